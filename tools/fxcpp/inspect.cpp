// fxcpp inspect MODEL.pt: the imported graph as a table and as generated code.
#include "command.h"
#include "model_io.h"

#include <iostream>

namespace fx::cli {
namespace {

int run_inspect(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(argv, {}, {"no-code", "graph"});
  double import_ms = 0;
  auto gm = import_model(args.model, &import_ms);
  Graph& g = gm->graph();
  std::cout << args.model << ": " << gm->class_name() << ", " << g.nodes().size() << " nodes ("
            << g.find_nodes(Opcode::CallModule).size() << " call_module, "
            << g.find_nodes(Opcode::CallFunction).size() << " call_function, "
            << g.find_nodes(Opcode::GetAttr).size() << " get_attr), imported in " << import_ms << " ms\n\n";
  if (args.has("graph")) {
    std::cout << g.str() << "\n";
  } else {
    g.print_tabular(std::cout);
  }
  if (!args.has("no-code")) std::cout << "\n" << gm->code() << "\n";
  return 0;
}

}  // namespace

FX_COMMAND("inspect", "inspect MODEL.pt [--graph] [--no-code]",
           "import a TorchScript file; print its graph table and generated code", run_inspect);

}  // namespace fx::cli
