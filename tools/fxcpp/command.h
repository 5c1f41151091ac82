#pragma once
// The fxcpp command line: each subcommand lives in its own file and
// registers itself with FX_COMMAND, so main.cpp never changes.

#include <chrono>
#include <string>
#include <vector>

namespace fx::cli {

/// Exit status for bad input (bad file, bad arguments): one clear line on stderr.
constexpr int kBadInput = 2;

/// Exit status when the model fails while running (an operator's error, the
/// model's own raise): one line naming the node.
constexpr int kRunFailed = 1;

/// Milliseconds from `t0` to now (steady clock): what the commands time.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// A subcommand: `fxcpp NAME ARGS...`.
struct Command {
  const char* name;
  const char* usage;    ///< one line: "inspect MODEL.pt"
  const char* summary;  ///< one line: what it does
  int (*run)(const std::vector<std::string>& args);
};

/// Every registered subcommand, in registration order.
std::vector<Command>& commands();

/// Registers a command at static-initialisation time.
struct RegisterCommand {
  explicit RegisterCommand(Command c) { commands().push_back(c); }
};

}  // namespace fx::cli

#define FX_CONCAT_INNER(a, b) a##b
#define FX_CONCAT(a, b) FX_CONCAT_INNER(a, b)
/// FX_COMMAND("demo", "demo", "run the built-in example", run_demo);
#define FX_COMMAND(name, usage, summary, fn) \
  static ::fx::cli::RegisterCommand FX_CONCAT(fx_command_, __LINE__)({name, usage, summary, fn})
