// fxcpp: capture, read, rewrite and run PyTorch graphs from the command line.
#include "command.h"

#include <fx/error.h>

#include <algorithm>
#include <exception>
#include <iostream>

namespace fx::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

static int usage(std::ostream& os) {
  os << "usage: fxcpp COMMAND [ARGS...]\n\ncommands:\n";
  for (const Command& c : commands()) {
    os << "  " << c.usage;
    for (size_t n = std::string(c.usage).size(); n < 40; ++n) os << ' ';
    os << c.summary << "\n";
  }
  return kBadInput;
}

}  // namespace fx::cli

int main(int argc, char** argv) {
  using namespace fx::cli;
  if (argc < 2) return usage(std::cerr);
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    usage(std::cout);
    return 0;
  }
  auto it = std::find_if(commands().begin(), commands().end(),
                         [&](const Command& c) { return name == c.name; });
  if (it == commands().end()) {
    std::cerr << "fxcpp: unknown command '" << name << "'\n";
    return usage(std::cerr);
  }
  try {
    return it->run(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const fx::Error& e) {
    std::cerr << "fxcpp " << name << ": " << e.what() << "\n";
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "fxcpp " << name << ": error: " << e.what() << "\n";
    return 1;
  }
}
