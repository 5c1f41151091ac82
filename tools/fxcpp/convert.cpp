// fxcpp convert MODEL.pt -o MODEL.fx: imports a TorchScript file (or reads an
// fxcpp file) and writes it with fx::save, atomically.
#include "command.h"
#include "model_io.h"

#include <fx/serialize.h>

#include <iostream>

namespace fx::cli {
namespace {

int run_convert(const std::vector<std::string>& argv) {
  std::vector<std::string> args = argv;
  for (auto& a : args)
    if (a == "-o") a = "--output";
  ModelArgs parsed = parse_model_args(args, {"output"});
  if (!parsed.has("output")) throw Error("-o OUT.fx is required");
  auto gm = import_model(parsed.model);
  const std::string out = parsed.get("output");
  set_activity("writing " + out);
  SaveReport report = save(*gm, out);
  std::cout << "wrote " << out << " (" << report.bytes << " bytes, " << gm->graph().nodes().size() << " nodes, "
            << report.storages << " storages";
  if (report.dropped_meta) std::cout << ", " << report.dropped_meta << " meta entries not saved";
  std::cout << ")\n";
  return 0;
}

}  // namespace

FX_COMMAND("convert", "convert MODEL.pt -o MODEL.fx",
           "import a TorchScript file and save it as an fxcpp file (fx::save)", run_convert);

}  // namespace fx::cli
