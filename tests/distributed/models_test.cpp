// Real models exported by Python (tests/import/tests.cmake's fixtures):
// torchvision's resnet18 and a scripted nn.TransformerEncoder (run-time
// control flow, strings and None crossing stages) as pipelines of 2 and 3
// ranks and data parallel, bit for bit with one process. The plain
// test_distributed program skips them when the files are missing.
#include "dist_test_util.h"

#include <fx/import.h>
#include <fx/tensor_file.h>

#include <fstream>

namespace {

using namespace dist_test;

bool have(const std::string& path) { return static_cast<bool>(std::ifstream(path)); }

/// A pipeline of `stages` ranks over `inputs` as `m` microbatches, and data
/// parallel over as many ranks: both bit for bit with one process.
void check_model(const std::shared_ptr<fx::GraphModule>& gm, const std::vector<c10::IValue>& inputs, int stages, int64_t m) {
  at::NoGradGuard no_grad;
  dist::SplitOptions o;
  o.stages = stages;
  o.example_inputs = dist::split_microbatches(inputs, m)[0];
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  c10::IValue piped, shared;
  run_ranks(stages, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
    {
      dist::PipelineRunner runner(g, plan.stages[static_cast<size_t>(rank)]);
      if (rank == 0) {
        piped = runner.run(inputs, m);
        runner.stop();
      } else {
        EXPECT_TRUE(runner.serve());
      }
    }
    dist::DataParallelRunner dp(g, gm);  // the ranks share the module object: forward is thread-safe
    if (rank == 0) {
      shared = dp.run(inputs);
      dp.stop();
    } else {
      EXPECT_TRUE(dp.serve());
    }
  });
  EXPECT_TRUE(dist::bitwise_equal(piped, dist::microbatched_forward(*gm, inputs, m))) << stages << " stages";
  EXPECT_TRUE(dist::bitwise_equal(shared, dist::microbatched_forward(*gm, inputs, stages))) << stages << " ranks";
}

TEST(DistributedModels, resnet18) {
  const std::string base = std::string(FX_BINARY_DIR) + "/models/resnet18";
  if (!have(base + ".pt")) GTEST_SKIP() << base << ".pt is missing (python/export_models.py exports it)";
  auto gm = fx::import_torchscript(base + ".pt");
  const at::Tensor x = fx::load_inputs(base + ".input.pt")[0].toTensor();
  const at::Tensor batch = at::cat({x, x.flip(3), x * 0.5, -x});  // 4 different images
  check_model(gm, {batch}, 2, 2);
}

TEST(DistributedModels, transformer_encoder) {
  const std::string base = std::string(FX_BINARY_DIR) + "/families/transformer_encoder.script";
  if (!have(base + ".pt")) GTEST_SKIP() << base << ".pt is missing (python/export_families.py exports it)";
  auto gm = fx::import_torchscript(base + ".pt");
  const at::Tensor src = fx::load_inputs(base + ".input.pt")[0].toTensor();
  const at::Tensor batch = at::cat({src, src.flip(1), src * 0.5});  // [3 * b, t, d]
  check_model(gm, {batch}, 2, 3);
  check_model(gm, {batch}, 3, 3);
}

}  // namespace
