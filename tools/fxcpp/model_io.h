#pragma once
// Shared by the model subcommands (inspect, run, profile): argument parsing,
// importing a .pt file, reading and checking inputs, and turning any error
// into one clear line.

#include "command.h"

#include <fx/graph_module.h>

#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fx::cli {

/// Parsed `MODEL.pt [--flag value]...` arguments.
struct ModelArgs {
  std::string model;                          ///< the positional .pt path
  std::map<std::string, std::string> values;  ///< --name value
  std::vector<std::string> libraries;         ///< --load-library PATH, in order (already loaded)
  std::map<std::string, std::vector<std::string>> lists;  ///< repeatable --name value, in order
  /// The value of --name, or `fallback`.
  std::string get(const std::string& name, const std::string& fallback = "") const;
  /// The value of --name as an integer ≥ `min`, or `fallback`; throws
  /// fx::Error if it is not such a number.
  int get_int(const std::string& name, int fallback, int min = 1) const;
  /// The value of --name as a number > 0, or `fallback`; throws fx::Error
  /// if it is not such a number.
  double get_positive(const std::string& name, double fallback) const;
  bool has(const std::string& name) const { return values.count(name) != 0; }
};

/// Parses args with CLI11 (tools/fxcpp/args.cpp): `flags` are the --names
/// that take a value (also as --name=value; -i / -o for input / output),
/// `switches` those that do not; `--` ends the options. -h / --help prints
/// the command's help (HelpRequested). Throws fx::Error (exit 2) on anything
/// else. With `model_optional`, MODEL may be left out (`model` is then empty).
/// Every command also takes `--load-library PATH` (repeatable): operator
/// libraries loaded with fx::load_library once the arguments are parsed, in
/// the process that then loads the model. `repeatable` are --names that
/// take a value and may be given several times (ModelArgs::lists).
ModelArgs parse_model_args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                           const std::vector<std::string>& switches = {}, bool model_optional = false,
                           const std::vector<std::string>& repeatable = {});

/// Thrown by parse_model_args for -h / --help: `text` is the help to print (exit 0).
struct HelpRequested {
  std::string text;
};

/// Sets the command whose arguments parse_model_args parses (for its help).
void set_current_command(const Command* command);

/// Checks that `path` can be written (its directory exists and is writable,
/// and it is not a directory) before any work is done; throws fx::Error.
void check_output_path(const std::string& path, const std::string& option);

/// Whether `path` is an fxcpp file (fx::save): by its .fx name or its content.
bool is_fx_model(const std::string& path);

/// Imports the model: an fxcpp file (a .fx name, or fx::save's content) with
/// fx::load, anything else as TorchScript (fx::ImportError on a bad file);
/// `import_ms` gets the time. `example_value`: the value of the inputs file
/// `example_path` (fx::load_value), matched to forward's parameters
/// (fx::bind_inputs) as the import's example inputs.
std::shared_ptr<GraphModule> import_model(const std::string& path, double* import_ms = nullptr,
                                          const c10::IValue* example_value = nullptr, bool specialize_shapes = false,
                                          const std::string& example_path = "");

/// import_model with the inputs file's values as the import's example inputs
/// (a TorchScript model's conditions on their rank and dtype fold:
/// ImportOptions::example_inputs), then load_model_inputs: the model and its
/// checked inputs. `specialize_shapes`: their sizes too
/// (ImportOptions::specialize_shapes: exact shape guards).
std::pair<std::shared_ptr<GraphModule>, std::vector<c10::IValue>> import_model_with_inputs(
    const std::string& path, const std::string& input_path, bool specialize_shapes = false);

/// Reads the inputs file and checks their number against the graph's
/// placeholders and their kinds (tensor or not, and dtype / rank where the
/// file recorded them); throws fx::Error naming the problem.
std::vector<c10::IValue> load_model_inputs(GraphModule& gm, const std::string& path);

/// load_model_inputs on the value of the inputs file `path` already read:
/// matched to the placeholders with fx::bind_inputs (a tuple's items, a
/// list for a List[...] first input, a dict's entries by name), then checked.
std::vector<c10::IValue> model_inputs(GraphModule& gm, const c10::IValue& value, const std::string& path);

/// Prints a model's output `v` for the run commands (run, pipeline), one
/// line per value after `indent`: a tensor's sizes and dtype (with min, max
/// and mean when it is a non-empty floating-point one), a tuple or list as
/// its length with its items indented below it, anything else as it prints.
void describe_value(std::ostream& os, const c10::IValue& v, const std::string& indent = "");

/// Every tensor input repeated `batch` times along dim 0 (--batch N).
std::vector<c10::IValue> batched(const std::vector<c10::IValue>& inputs, int batch);

/// --threads N (default 1, at most 256): sets ATen's and OpenMP's (oneDNN's)
/// thread counts and returns N.
int set_threads(const ModelArgs& args);

/// Records what the command is doing ("reading m.pt") in the shared buffer
/// the crash guard of main.cpp reads if the process dies from a signal, and,
/// when stderr is a terminal (and FXCPP_NO_PROGRESS is unset), shows it there
/// as progress.
/// Testing hook: with FXCPP_TEST_CRASH set in the environment, the process
/// raises SIGSEGV right after recording (to test the guard).
void set_activity(const std::string& what);

/// Whether progress lines go to stderr: it is a terminal and
/// FXCPP_NO_PROGRESS is unset (what set_activity shows its steps with).
bool progress_enabled();

/// Installs the shared buffer set_activity writes into (main.cpp, before fork).
void install_activity_buffer(char* buffer, size_t size);

/// One line saying what went wrong in a run (the root cause of a TorchScript
/// or ATen error, without backtraces), with the node being executed if known.
std::string one_line_error(const std::exception& e);

/// Whether `e` is an error raised while executing a node (its message has
/// torch.fx's "While executing %node ..." context).
bool names_a_node(const std::exception& e);

/// Reports an error of running `model` on `input` (GraphModule::forward, the
/// Interpreter, a profiling or shape-propagation run) as one line on stderr,
/// "fxcpp COMMAND: ...", and returns the exit status. Bad input — a shape
/// guard, the wrong number of inputs, a missing one — is
/// "INPUT: bad input for MODEL: why" (kBadInput); a failure while executing
/// a node — an operator's error, the model's own raise — is
/// "MODEL failed on INPUT at node NAME (op[target=T]): why" (kRunFailed).
int report_run_error(const std::string& command, const std::string& model, const std::string& input,
                     const std::exception& e);

}  // namespace fx::cli
