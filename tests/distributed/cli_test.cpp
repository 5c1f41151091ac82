// The command line, as separate processes on 127.0.0.1: `fxcpp launch`
// with `fxcpp pipeline` / `fxcpp data-parallel` (bit for bit with one
// process), stage files, and the failures: a rank killed mid-run, a port in
// use, a world size that does not match the stages, a stage file of another
// model. Each failure is one clear line per process, and nothing hangs.
#include "dist_test_util.h"

#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace {

using namespace dist_test;

/// A small model and its inputs as files (shared by the tests of this file).
class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    fx::save(*small_resnet(0), *dir_ / "model.fx");
    fx::save(*small_resnet(5), *dir_ / "other.fx");  // same structure, other weights
    fx::save_value(*dir_ / "input.pt", images(1));
    fx::save(*small_resnet(0, 2), *dir_ / "two_blocks.fx");  // another model: fewer parameters
    torch::manual_seed(3);
    fx::save_value(*dir_ / "train.pt", c10::ivalue::Tuple::create({images(64, 2), at::randint(0, 10, {64}, at::kLong)}));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const std::string& name) { return *dir_ / name; }
  static TempDir* dir_;
};
TempDir* Cli::dir_ = nullptr;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(Cli, LaunchPipelineOfTwoAndThreeRanksBitForBit) {
  for (const char* stages : {"2", "3"}) {
    Child c = run({"fxcpp", "launch", "--nproc", stages, "--", "fxcpp", "pipeline", path("model.fx"), "--input",
                   path("input.pt"), "--stages", stages, "--microbatches", "4", "--batch", "8", "--check"});
    EXPECT_EQ(exit_status(c), 0) << c.output;
    EXPECT_NE(c.output.find("bitwise equal to one process on the same microbatches: yes"), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("boundary 0 -> 1: "), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("tensor [8, 10] Float"), std::string::npos) << c.output;
  }
}

TEST_F(Cli, OptimizedPipelineEqualsTheWholeModelOptimized) {
  Child c = run({"fxcpp", "launch", "--nproc", "2", "--", "fxcpp", "pipeline", path("model.fx"), "--input",
                 path("input.pt"), "--stages", "2", "--microbatches", "2", "--batch", "4", "--optimize", "--check",
                 "--balance", "flops", "--json"});
  EXPECT_EQ(exit_status(c), 0) << c.output;
  EXPECT_NE(c.output.find("\"bitwise_equal\":true"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("\"optimize\":true"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("\"whole_model_bitwise_equal\":true"), std::string::npos) << c.output;
}

TEST_F(Cli, DataParallelOverThreeRanks) {
  Child c = run({"fxcpp", "launch", "--nproc", "3", "--", "fxcpp", "data-parallel", path("model.fx"), "--input",
                 path("input.pt"), "--batch", "7", "--check"});
  EXPECT_EQ(exit_status(c), 0) << c.output;
  EXPECT_NE(c.output.find("data parallel: " + path("model.fx") + " on 3 ranks, batch 7"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("bitwise equal to one process on the same shards: yes"), std::string::npos) << c.output;
}

TEST_F(Cli, StageFilesEachRankLoadsItsOwn) {
  TempDir stages;
  Child plan = run({"fxcpp", "pipeline-plan", path("model.fx"), "--input", path("input.pt"), "--stages", "2",
                    "--batch", "4", "--runs", "1", "-o", stages.path});
  ASSERT_EQ(exit_status(plan), 0) << plan.output;
  EXPECT_NE(plan.output.find("simulated on 2 machines"), std::string::npos) << plan.output;
  Child c = run({"fxcpp", "launch", "--nproc", "2", "--", "fxcpp", "pipeline", stages.path, "--input",
                 path("input.pt"), "--stages", "2", "--batch", "4", "--check"});
  EXPECT_EQ(exit_status(c), 0) << c.output;
  EXPECT_NE(c.output.find("bitwise equal to the same stages run in one process on the same microbatches: yes"),
            std::string::npos)
      << c.output;

  // A stage file of another model: one line, from rank 0, exit status 2.
  TempDir other;
  Child other_plan = run({"fxcpp", "pipeline-plan", path("other.fx"), "--input", path("input.pt"), "--stages", "2",
                          "--batch", "4", "--runs", "1", "-o", other.path});
  ASSERT_EQ(exit_status(other_plan), 0) << other_plan.output;
  ASSERT_EQ(std::system(("cp '" + other / "stage_1.fx" + "' '" + stages / "stage_1.fx" + "'").c_str()), 0);
  Child bad = run({"fxcpp", "launch", "--nproc", "2", "--", "fxcpp", "pipeline", stages.path, "--input",
                   path("input.pt"), "--stages", "2"});
  EXPECT_EQ(exit_status(bad), 2) << bad.output;
  ASSERT_EQ(lines(bad.output).size(), 1u) << bad.output;
  EXPECT_EQ(bad.output.rfind("fxcpp pipeline: " + stages / "stage_1.fx" + " was split from another model than rank 0's " +
                                 stages / "stage_0.fx" + " (model fingerprints ",
                             0),
            0u)
      << bad.output;
}

TEST_F(Cli, WorldSizeThatDoesNotMatchTheStages) {
  Child c = run({"fxcpp", "launch", "--nproc", "3", "--", "fxcpp", "pipeline", path("model.fx"), "--input",
                 path("input.pt"), "--stages", "2"});
  EXPECT_EQ(exit_status(c), 2);
  EXPECT_EQ(c.output, "fxcpp pipeline: WORLD_SIZE is 3 but --stages 2 needs 2 ranks (one per stage)\n");
  // Without a rendezvous: how to start the ranks.
  Child alone = run({"fxcpp", "pipeline", path("model.fx"), "--input", path("input.pt"), "--stages", "2"});
  EXPECT_EQ(exit_status(alone), 2);
  EXPECT_EQ(alone.output,
            "fxcpp pipeline: --stages 2 needs 2 ranks: start them with `fxcpp launch --nproc 2 -- fxcpp pipeline ...`, "
            "or set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for each (see docs/distributed.md)\n");
}

TEST_F(Cli, PortInUse) {
  Listener busy;
  const std::string port = std::to_string(busy.port);
  Child c = run({"fxcpp", "launch", "--nproc", "2", "--master-port", port, "--", "fxcpp", "pipeline", path("model.fx"),
                 "--input", path("input.pt"), "--stages", "2"});
  EXPECT_EQ(exit_status(c), 2);
  EXPECT_EQ(c.output, "fxcpp launch: MASTER_PORT " + port +
                          " on 127.0.0.1 is in use (another rendezvous or program listens there): choose another port\n");
  // A rank 0 started by hand, serving the store itself.
  Child r0 = run({"fxcpp", "pipeline", path("model.fx"), "--input", path("input.pt"), "--stages", "2"},
                 {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=0", "WORLD_SIZE=2"});
  EXPECT_NE(exit_status(r0), 0);
  EXPECT_EQ(r0.output, "fxcpp pipeline: MASTER_PORT " + port +
                           " on 127.0.0.1 is in use (another rendezvous or program listens there): choose another port\n");
}

TEST_F(Cli, RankKilledMidRunTheOthersStop) {
  // Rank 1 of 3 kills itself (SIGKILL) after its 3rd microbatch; --runs keeps the pipeline busy. The launcher
  // stops ranks 0 and 2 at once (SIGTERM), long before --timeout.
  Child c = run({"fxcpp", "launch", "--nproc", "3", "--timeout", "120", "--", "fxcpp", "pipeline", path("model.fx"),
                 "--input", path("input.pt"), "--stages", "3", "--microbatches", "4", "--batch", "8", "--runs", "100000"},
                {"FXCPP_TEST_KILL_RANK=1", "FXCPP_TEST_KILL_AT=3"}, std::chrono::seconds(100));
  EXPECT_EQ(exit_status(c), 128 + SIGKILL) << c.output;
  EXPECT_LT(c.seconds, 90.0) << c.output;  // the --timeout (120 s) was not waited for
  EXPECT_EQ(count(c.output, "fxcpp launch: rank 1 (pid "), 1u) << c.output;
  EXPECT_NE(c.output.find(") was killed by signal 9 (Killed); stopping the other ranks\n"), std::string::npos) << c.output;
  // Ranks 0 and 2 may have said that they lost rank 1 before SIGTERM reached them, at most once each.
  EXPECT_LE(count(c.output, "fxcpp pipeline: rank 0: lost rank 1 while "), 1u) << c.output;
  EXPECT_LE(count(c.output, "fxcpp pipeline: rank 2: lost rank 1 while "), 1u) << c.output;
  EXPECT_EQ(count(c.output, "SIGKILL"), 0u) << c.output;
}

/// Whether process `pid` exists (a zombie counts as gone).
bool alive(pid_t pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  return !text.empty() && text.substr(text.rfind(')') + 2, 1) != "Z";
}

/// The pid a rank of the launch tests wrote to `file`, or -1.
pid_t read_pid(const std::string& file) {
  std::ifstream in(file);
  pid_t pid = -1;
  return in >> pid ? pid : -1;
}

TEST_F(Cli, LauncherStopsTheOtherRanksWhenOneFails) {
  // Any program, not only fxcpp: ranks 0 and 2 write their pid and sleep; rank 1 waits for their pids, then
  // kills itself. Ranks 0 and 2 must be gone (SIGTERM) when the launcher returns, with one line said.
  TempDir d;
  const std::string script = "echo $$ > " + d.path + "/pid.$RANK.tmp && mv " + d.path + "/pid.$RANK.tmp " + d.path +
                             "/pid.$RANK; if [ $RANK = 1 ]; then while [ ! -e " + d.path + "/pid.0 ] || [ ! -e " +
                             d.path + "/pid.2 ]; do sleep 0.05; done; kill -9 $$; fi; exec sleep 1000";
  Child c = run({"fxcpp", "launch", "--nproc", "3", "--", "/bin/sh", "-c", script}, {}, std::chrono::seconds(60));
  const pid_t r0 = read_pid(d / "pid.0"), r1 = read_pid(d / "pid.1"), r2 = read_pid(d / "pid.2");
  ASSERT_GT(r0, 0) << c.output;
  ASSERT_GT(r2, 0) << c.output;
  EXPECT_EQ(exit_status(c), 128 + SIGKILL) << c.output;
  EXPECT_EQ(c.output, "fxcpp launch: rank 1 (pid " + std::to_string(r1) +
                          ") was killed by signal 9 (Killed); stopping the other ranks\n");
  EXPECT_FALSE(alive(r0));
  EXPECT_FALSE(alive(r2));
  EXPECT_LT(c.seconds, 30.0) << c.output;  // the bound: a failed run is over within 30 s

  // A rank that ignores SIGTERM gets SIGKILL after --grace; a rank that exited with a status said why itself.
  TempDir e;
  const std::string stubborn = "if [ $RANK = 1 ]; then while [ ! -e " + e.path + "/pid.0 ]; do sleep 0.05; done; exit 3; fi; "
                               "trap '' TERM; echo $$ > " + e.path + "/pid.0.tmp && mv " + e.path + "/pid.0.tmp " +
                               e.path + "/pid.0; exec sleep 1000";
  Child s = run({"fxcpp", "launch", "--nproc", "2", "--grace", "1", "--", "/bin/sh", "-c", stubborn}, {},
                std::chrono::seconds(60));
  EXPECT_EQ(exit_status(s), 3) << s.output;
  EXPECT_EQ(s.output, "fxcpp launch: rank 0 still running 1 s after SIGTERM: killed (SIGKILL)\n");
  const pid_t stubborn0 = read_pid(e / "pid.0");
  ASSERT_GT(stubborn0, 0) << s.output;
  EXPECT_FALSE(alive(stubborn0));
  EXPECT_LT(s.seconds, 30.0) << s.output;

  Child bad = run({"fxcpp", "launch", "--nproc", "2", "--grace", "40", "--", "/bin/true"});
  EXPECT_EQ(exit_status(bad), 2);
  EXPECT_EQ(bad.output, "fxcpp launch: --grace 40 is too long: a failed run must be over within 30 s\n");
}

TEST_F(Cli, RankKilledByAnotherProgramTheOthersStop) {
  // Two ranks started by hand (torchrun's environment, no launcher); rank 1's pid is killed from outside
  // once both ranks have computed a microbatch (each writes FXCPP_TEST_READY_FILE.RANK then), so rank 0 is in
  // the pipeline, not in the rendezvous, however loaded the machine: it loses its peer's connection at once.
  TempDir d;
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"fxcpp", "pipeline", path("model.fx"), "--input", path("input.pt"),
                                         "--stages", "2", "--batch", "4", "--runs", "100000", "--timeout", "60"};
  const std::string ready = "FXCPP_TEST_READY_FILE=" + d / "ready";
  Child r0 = start(args, {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=0", "WORLD_SIZE=2", ready});
  Child r1 = start(args, {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=1", "WORLD_SIZE=2", ready});
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while ((read_pid(d / "ready.0") <= 0 || read_pid(d / "ready.1") <= 0) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GT(read_pid(d / "ready.1"), 0);
  const auto killed = std::chrono::steady_clock::now();
  ::kill(r1.pid, SIGKILL);  // the crash guard's process: the rank dies with it
  finish(r1, std::chrono::seconds(200));
  finish(r0, std::chrono::seconds(200));
  const double after_kill = std::chrono::duration<double>(r0.start + std::chrono::duration<double>(r0.seconds) - killed).count();
  EXPECT_EQ(exit_status(r0), 1) << r0.output;
  EXPECT_LT(after_kill, 50.0) << r0.output;  // not the --timeout (60 s): the lost connection said it
  ASSERT_EQ(lines(r0.output).size(), 1u) << r0.output;
  EXPECT_EQ(r0.output.rfind("fxcpp pipeline: rank 0: lost rank 1 while ", 0), 0u) << r0.output;
}

/// The step lines of a training run, and the rest.
std::pair<size_t, std::vector<std::string>> step_lines_and_others(const std::string& output) {
  size_t steps = 0;
  std::vector<std::string> others;
  for (const std::string& l : lines(output)) {
    if (l.rfind("step ", 0) == 0 || l.rfind("train-dp: ", 0) == 0) ++steps;
    else others.push_back(l);
  }
  return {steps, others};
}

TEST_F(Cli, TrainDpRankKilledMidStep) {
  // Two ranks by hand (no launcher): rank 1 dies (SIGKILL) at the start of step 3; rank 0, in the gradient
  // all-reduce of step 3, says so in one line and exits 1, long before --timeout.
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"fxcpp", "train-dp", path("model.fx"), "--data", path("train.pt"), "--batch",
                                         "8", "--steps", "100", "--timeout", "60"};
  const std::vector<std::string> kill = {"FXCPP_TEST_KILL_RANK=1", "FXCPP_TEST_KILL_AT=3"};
  auto env = [&](int r) {
    std::vector<std::string> e = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=" + std::to_string(r), "WORLD_SIZE=2"};
    e.insert(e.end(), kill.begin(), kill.end());
    return e;
  };
  Child r0 = start(args, env(0));
  Child r1 = start(args, env(1));
  finish(r1, std::chrono::seconds(100));
  finish(r0, std::chrono::seconds(100));
  EXPECT_EQ(exit_status(r1), 128 + SIGKILL) << r1.output;
  EXPECT_EQ(exit_status(r0), 1) << r0.output;
  const auto [steps, others] = step_lines_and_others(r0.output);
  EXPECT_EQ(steps, 3u) << r0.output;  // the heading, steps 1 and 2
  ASSERT_EQ(others.size(), 1u) << r0.output;
  EXPECT_EQ(others[0], "fxcpp train-dp: rank 0: lost rank 1 while all-reducing gradient bucket 0 (its connection "
                       "closed: the process ended or was killed)");
  EXPECT_LT(r0.seconds, 50.0) << r0.output;  // not the --timeout

  // Under the launcher: the launcher's line, and rank 0 stopped at once.
  Child c = run({"fxcpp", "launch", "--nproc", "2", "--", "fxcpp", "train-dp", path("model.fx"), "--data",
                 path("train.pt"), "--batch", "8", "--steps", "100", "--timeout", "60"},
                kill, std::chrono::seconds(100));
  EXPECT_EQ(exit_status(c), 128 + SIGKILL) << c.output;
  EXPECT_EQ(count(c.output, ") was killed by signal 9 (Killed); stopping the other ranks\n"), 1u) << c.output;
  EXPECT_LT(c.seconds, 30.0) << c.output;
}

TEST_F(Cli, TrainDpHungPeerTimesOut) {
  // Rank 1 hangs at the start of step 2: rank 0 gives up after --timeout 3 with one line; the launcher stops rank 1.
  Child c = run({"fxcpp", "launch", "--nproc", "2", "--", "fxcpp", "train-dp", path("model.fx"), "--data",
                 path("train.pt"), "--batch", "8", "--steps", "100", "--timeout", "3"},
                {"FXCPP_TEST_HANG_RANK=1", "FXCPP_TEST_HANG_AT=2"}, std::chrono::seconds(100));
  EXPECT_EQ(exit_status(c), 1) << c.output;
  const auto [steps, others] = step_lines_and_others(c.output);
  EXPECT_EQ(steps, 2u) << c.output;
  ASSERT_EQ(others.size(), 1u) << c.output;
  EXPECT_EQ(others[0], "fxcpp train-dp: rank 0: the other ranks did not join all-reducing gradient bucket 0 within 3 s "
                       "(a rank hangs, or the timeout is too short)");
  EXPECT_LT(c.seconds, 60.0) << c.output;
}

TEST_F(Cli, TrainDpModelThatDiffersOnOneRank) {
  // Rank 1 was given another model: each rank names the difference in one line, exit status 2.
  const std::string port = std::to_string(free_port());
  auto args = [&](const std::string& model) {
    return std::vector<std::string>{"fxcpp", "train-dp", model, "--data", path("train.pt"), "--batch", "8", "--timeout", "60"};
  };
  auto env = [&](int r) {
    return std::vector<std::string>{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=" + std::to_string(r), "WORLD_SIZE=2"};
  };
  Child r0 = start(args(path("model.fx")), env(0));
  Child r1 = start(args(path("two_blocks.fx")), env(1));
  finish(r0, std::chrono::seconds(100));
  finish(r1, std::chrono::seconds(100));
  EXPECT_EQ(exit_status(r0), 2) << r0.output;
  EXPECT_EQ(exit_status(r1), 2) << r1.output;
  EXPECT_EQ(r0.output, "fxcpp train-dp: rank 0: the model has 23 parameters here but 17 on rank 1 "
                       "('layer2_conv_a.weight' is only here; every rank must hold the same model)\n");
  EXPECT_EQ(r1.output, "fxcpp train-dp: rank 1: the model has 17 parameters here but 23 on rank 0 "
                       "('layer2_conv_a.weight' is only there; every rank must hold the same model)\n");
}

TEST_F(Cli, TrainPipelineStageKilledMidStep) {
  // Two stages by hand: stage 1 dies at the start of step 2; stage 0 (1F1B: forward 0, forward 1, then
  // backward 0) says in one line that it lost rank 1 while waiting for microbatch 0's gradients.
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"fxcpp", "train-pipeline", path("model.fx"), "--data", path("train.pt"),
                                         "--batch", "8", "--microbatches", "4", "--steps", "100", "--timeout", "60"};
  auto env = [&](int r) {
    return std::vector<std::string>{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=" + std::to_string(r),
                                    "WORLD_SIZE=2", "FXCPP_TEST_KILL_RANK=1", "FXCPP_TEST_KILL_AT=2"};
  };
  Child r0 = start(args, env(0));
  Child r1 = start(args, env(1));
  finish(r1, std::chrono::seconds(100));
  finish(r0, std::chrono::seconds(100));
  EXPECT_EQ(exit_status(r1), 128 + SIGKILL) << r1.output;
  EXPECT_EQ(exit_status(r0), 1) << r0.output;
  std::vector<std::string> others;
  for (const std::string& l : lines(r0.output))
    if (l.rfind("step ", 0) != 0 && l.rfind("train-pipeline: ", 0) != 0) others.push_back(l);
  ASSERT_EQ(others.size(), 1u) << r0.output;
  EXPECT_EQ(others[0], "fxcpp train-pipeline: rank 0: lost rank 1 while receiving microbatch 0's gradients from rank 1 "
                       "(its connection closed: the process ended or was killed)");
  EXPECT_EQ(count(r0.output, "step 1: loss "), 1u) << r0.output;
  EXPECT_LT(r0.seconds, 50.0) << r0.output;  // not the --timeout
}

TEST_F(Cli, PingPongAndPlanJson) {
  Child c = run({"fxcpp", "launch", "--nproc", "2", "--", "fxcpp", "pingpong", "--sizes", "4K,1M", "--iters", "3"});
  EXPECT_EQ(exit_status(c), 0) << c.output;
  EXPECT_NE(c.output.find("pingpong between rank 0 and rank 1"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("1.00 MB"), std::string::npos) << c.output;
  Child plan = run({"fxcpp", "pipeline-plan", path("model.fx"), "--input", path("input.pt"), "--stages", "3",
                    "--batch", "6", "--runs", "1", "--balance", "flops", "--json", "--bandwidth", "1"});
  EXPECT_EQ(exit_status(plan), 0) << plan.output;
  EXPECT_NE(plan.output.find("\"stages\":3"), std::string::npos) << plan.output;
  EXPECT_NE(plan.output.find("\"bubble_fraction\":"), std::string::npos) << plan.output;
}

}  // namespace
