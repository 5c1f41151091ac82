// fxcpp export MODEL -o OUT.pt [--remove-dropout]: a model as a TorchScript
// file that stock torch::jit::load / torch.jit.load run (fx::export_torchscript).
#include "command.h"
#include "model_io.h"

#include <fx/export.h>
#include <fx/passes/remove_dropout.h>

#include <iostream>

namespace fx::cli {
namespace {

int run_export(const std::vector<std::string>& argv) {
  std::vector<std::string> spelled = argv;
  for (std::string& a : spelled)
    if (a == "-o") a = "--output";
  ModelArgs args = parse_model_args(spelled, {"output"}, {"remove-dropout"});
  if (!args.has("output")) throw Error("-o OUT.pt is required");
  auto gm = import_model(args.model);
  if (args.has("remove-dropout")) remove_dropout(gm);
  set_activity("exporting " + args.model + " to " + args.get("output"));
  export_torchscript(*gm, args.get("output"));
  std::cout << "wrote " << args.get("output") << "\n";
  return 0;
}

}  // namespace

FX_COMMAND("export", "export MODEL -o OUT [--remove-dropout]",
           "write a model as TorchScript for torch::jit::load / torch.jit.load", run_export);

}  // namespace fx::cli
