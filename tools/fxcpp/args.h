#pragma once
// The CLI11 argument parsing of tools/fxcpp/args.cpp for commands that name
// their own options (parse_model_args builds on it, and so do the
// distributed commands' parse_dist_args).

#include "model_io.h"

#include <string>
#include <vector>

namespace fx::cli {

/// One option of a command, for parse_options.
struct OptionSpec {
  std::string name;         ///< "--name" without the dashes
  std::string short_name;   ///< its short form ("-i"), or "" for none
  std::string value;        ///< its value's name for --help ("VALUE", "N"); "" for a switch
  std::string description;  ///< for --help
};

/// Parses `MODEL [--name value | --switch]...` with CLI11 as `program`
/// ("fxcpp run"), whose --help shows `command`'s summary and usage (none when
/// null) and `model_help` for MODEL: `options` in their order, then
/// `--load-library PATH` and the `repeatable` --names (their descriptions
/// from args.cpp's table). Loads the libraries once parsed. Throws
/// HelpRequested for -h / --help and fx::Error on anything else (no MODEL
/// unless `model_optional`).
ModelArgs parse_options(const std::vector<std::string>& args, const Command* command, const std::string& program,
                        const std::string& model_help, const std::vector<OptionSpec>& options, bool model_optional,
                        const std::vector<std::string>& repeatable = {});

/// fxcpp bench's engines, by their JSON names, in the order they run and
/// print (bench.cpp); --engine's help lists them.
const std::vector<std::string>& engine_names();

}  // namespace fx::cli
