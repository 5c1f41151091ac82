// fxcpp: capture, read, rewrite and run PyTorch graphs from the command line.
#include "command.h"
#include "model_io.h"

#include <fx/error.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <new>

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
  } catch (const std::bad_alloc&) {
    std::cerr << "fxcpp " << name << ": out of memory\n";
    return kBadInput;
  } catch (const std::exception& e) {
    // libtorch errors (c10::Error) that no command turned into fx::Error: one
    // line without the backtrace, still "bad input" (exit 2).
    std::cerr << "fxcpp " << name << ": " << one_line_error(e) << "\n";
    return kBadInput;
  } catch (...) {
    std::cerr << "fxcpp " << name << ": unknown error\n";
    return kBadInput;
  }
}
