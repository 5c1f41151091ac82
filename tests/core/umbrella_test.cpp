// <fx/fx.h> is the whole public API: it compiles on its own, and every public
// header under include/fx/ is reachable from it (directly or through
// <fx/passes.h>).
#include <fx/fx.h>

#include "fx_paths.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> headers_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 2 && name.compare(name.size() - 2, 2, ".h") == 0) out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

TEST(Umbrella, EveryPublicHeaderIsIncluded) {
  const std::string inc = std::string(FX_SOURCE_DIR) + "/include/fx/";
  const std::string umbrella = read(inc + "fx.h") + read(inc + "passes.h") + read(inc + "optimize.h");
  const auto top = headers_in(inc);
  ASSERT_GT(top.size(), 5u);
  for (const std::string& h : top) {
    if (h == "fx.h") continue;
    EXPECT_NE(umbrella.find("#include <fx/" + h + ">"), std::string::npos) << "fx/fx.h misses fx/" << h;
  }
  // The optimiser's headers moved to fx/optimize/; fx/passes/ keeps a forwarding header of each.
  const auto optimiser = headers_in(inc + "optimize/");
  ASSERT_GT(optimiser.size(), 3u);
  for (const std::string& h : optimiser)
    EXPECT_NE(umbrella.find("#include <fx/optimize/" + h + ">"), std::string::npos) << "fx/optimize.h misses fx/optimize/" << h;
  for (const std::string& h : headers_in(inc + "passes/")) {
    if (std::count(optimiser.begin(), optimiser.end(), h)) {
      EXPECT_NE(read(inc + "passes/" + h).find("#include <fx/optimize/" + h + ">"), std::string::npos)
          << "fx/passes/" << h << " does not forward to fx/optimize/" << h;
      continue;
    }
    EXPECT_NE(umbrella.find("#include <fx/passes/" + h + ">"), std::string::npos) << "fx/passes.h misses fx/passes/" << h;
  }
}

}  // namespace
