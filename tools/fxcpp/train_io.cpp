// The data, batches, optimizer, checkpoints and testing hooks of the
// training subcommands (see train_io.h).
#include "train_io.h"

#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace fx::cli {

std::vector<DistOption> training_options() {
  return {{"data", "DATA.pt", "training data: torch.save((inputs, labels)), labels class indices (int64)"},
          {"steps", "N", "the run's total optimizer steps, those before --resume included (default 10)"},
          {"batch", "B", "samples per step, all ranks together (default 32)"},
          {"optimizer", "NAME", "sgd (default) or adam"},
          {"lr", "LR", "learning rate (default 0.01)"},
          {"momentum", "M", "SGD momentum (default 0.9)"},
          {"checkpoint", "DIR", "write model.fx, optimizer.pt and step there at the end (and every --save-every steps)"},
          {"save-every", "K", "checkpoint every K steps too"},
          {"resume", nullptr, "continue from the checkpoint in --checkpoint DIR when there is one, up to --steps in all"},
          {"threads", "T", "intra-op threads per rank (default 1)"},
          {"timeout", "SECONDS", "how long a rank waits for a peer (default 300, FXCPP_DIST_TIMEOUT)"}};
}

TrainingData load_training_data(const std::string& path) {
  const c10::IValue v = load_value(path);
  std::vector<c10::IValue> items;
  if (v.isTuple()) items.assign(v.toTupleRef().elements().begin(), v.toTupleRef().elements().end());
  else if (v.isList()) items = v.toListRef().vec();
  const std::string want = " (write it with torch.save((inputs, labels)))";
  if (items.size() != 2 || !items[0].isTensor() || !items[1].isTensor())
    throw Error(path + " does not hold (inputs, labels), two tensors" + want);
  TrainingData d{items[0].toTensor(), items[1].toTensor()};
  if (d.inputs.dim() < 1 || d.inputs.size(0) < 1) throw Error(path + ": the inputs have no rows" + want);
  if (!d.inputs.is_floating_point()) throw Error(path + ": the inputs are " + std::string(c10::toString(d.inputs.scalar_type())) + ", not floating point");
  if (d.labels.scalar_type() != at::kLong || d.labels.dim() != 1)
    throw Error(path + ": the labels must be a 1-d int64 tensor of class indices, not " +
                std::string(c10::toString(d.labels.scalar_type())) + " with " + std::to_string(d.labels.dim()) + " dimensions");
  if (d.labels.size(0) != d.inputs.size(0))
    throw Error(path + ": " + std::to_string(d.inputs.size(0)) + " inputs but " + std::to_string(d.labels.size(0)) + " labels");
  return d;
}

void check_labels(GraphModule& model, const TrainingData& data, const std::string& path) {
  c10::IValue out;
  {
    torch::NoGradGuard no_grad;
    const bool training = model.is_training();
    model.eval();
    out = model.forward({data.inputs.narrow(0, 0, 1)});
    model.train(training);
  }
  if (!out.isTensor() || out.toTensor().dim() != 2)
    throw SharedError("the model's output is " + (out.isTensor() ? std::to_string(out.toTensor().dim()) + "-d" : "no tensor") +
                      ": training with cross-entropy needs a classifier (logits [batch, classes])");
  const int64_t classes = out.toTensor().size(1);
  const at::Tensor bad = at::nonzero(data.labels.lt(0).logical_or(data.labels.ge(classes))).flatten();
  if (bad.numel() == 0) return;
  const int64_t row = bad[0].item<int64_t>();
  throw SharedError(path + ": row " + std::to_string(row) + " has label " + std::to_string(data.labels[row].item<int64_t>()) +
                    ", but the model has " + std::to_string(classes) + " classes (labels 0 to " +
                    std::to_string(classes - 1) + ")");
}

TrainingData step_batch(const TrainingData& data, int64_t step, int64_t batch) {
  const at::Tensor rows = at::remainder(at::arange(step * batch, (step + 1) * batch, at::kLong), data.inputs.size(0));
  return {data.inputs.index_select(0, rows), data.labels.index_select(0, rows)};
}

bool nothing_left(const std::string& command, const RankInfo& rank, const std::string& dir, int64_t done, int64_t steps) {
  if (done < steps) return false;
  if (rank.rank == 0)
    std::cout << command << ": nothing to do: " << dir << " holds step " << done << " and --steps " << steps
              << " is the run's total\n";
  if (rank.group) rank.group->barrier("the end of training");
  return true;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ModelArgs& args, const std::vector<at::Tensor>& params) {
  const std::string name = args.get("optimizer", "sgd");
  const double lr = args.get_positive("lr", 0.01);
  if (name == "sgd") {
    const double momentum = args.has("momentum") ? std::stod(args.get("momentum")) : 0.9;
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr).momentum(momentum));
  }
  if (name == "adam") return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
  throw Error("--optimizer " + name + " is not known (sgd or adam)");
}

std::string describe_optimizer(const ModelArgs& args) {
  const std::string name = args.get("optimizer", "sgd");
  std::string out = name + " (lr " + args.get("lr", "0.01");
  if (name == "sgd") out += ", momentum " + args.get("momentum", "0.9");
  return out + ")";
}

bool Checkpoint::exists() const {
  return !dir.empty() && ::access((dir + "/step").c_str(), R_OK) == 0 && ::access(model_path().c_str(), R_OK) == 0 &&
         ::access((dir + "/optimizer" + suffix + ".pt").c_str(), R_OK) == 0;
}

int64_t Checkpoint::step() const {
  std::ifstream in(dir + "/step");
  int64_t s = -1;
  if (!(in >> s) || s < 0) throw Error(dir + "/step: not a step count (a damaged checkpoint)");
  return s;
}

std::string Checkpoint::model_path() const { return dir + "/model" + suffix + ".fx"; }

void Checkpoint::load_optimizer(torch::optim::Optimizer& optimizer) const {
  try {
    torch::load(optimizer, dir + "/optimizer" + suffix + ".pt");
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    throw Error(dir + "/optimizer" + suffix + ".pt: cannot load the optimizer's state (" + msg + "): another optimizer or model?");
  }
}

namespace {

void replace(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot write the checkpoint " + path);
}

}  // namespace

void Checkpoint::save(const GraphModule& model, torch::optim::Optimizer& optimizer) const {
  const std::string optimizer_path = dir + "/optimizer" + suffix + ".pt";
  fx::save(model, model_path() + ".tmp");
  torch::save(optimizer, optimizer_path + ".tmp");
  replace(model_path() + ".tmp", model_path());
  replace(optimizer_path + ".tmp", optimizer_path);
}

void Checkpoint::save_step(int64_t step) const {
  {
    std::ofstream out(dir + "/step.tmp");
    out << step << "\n";
  }
  replace(dir + "/step.tmp", dir + "/step");
}

std::shared_ptr<distributed::ProcessGroup> group_or_solo(const RankInfo& rank) {
  if (rank.group) return rank.group;
  char path[] = "/tmp/fxcpp-train-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd >= 0) ::close(fd);
  ::unlink(path);
  distributed::RendezvousOptions o;
  o.store_file = path;
  return distributed::ProcessGroup::create(o);
}

void print_step(int64_t step, double loss, int64_t samples, double seconds) {
  char line[160];
  std::snprintf(line, sizeof line, "step %lld: loss %.6f, %s samples/s\n", static_cast<long long>(step), loss,
                format_number(static_cast<double>(samples) / seconds).c_str());
  std::cout << line << std::flush;
}

void training_test_hooks(int rank, int64_t step) {
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart && std::atoi(restart) > 0) return;  // a group `fxcpp launch --max-restarts` started again
  auto hit = [&](const char* rank_var, const char* step_var) {
    const char* r = std::getenv(rank_var);
    const char* s = std::getenv(step_var);
    return r && s && std::atoi(r) == rank && std::atoll(s) == step;
  };
  if (hit("FXCPP_TEST_KILL_RANK", "FXCPP_TEST_KILL_AT")) ::kill(::getpid(), SIGKILL);
  if (hit("FXCPP_TEST_HANG_RANK", "FXCPP_TEST_HANG_AT"))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

double peak_resident_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;  // kB
  return 0;
}

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.1f" : v >= 1 ? "%.2f" : "%.3g", v);
  return buf;
}

}  // namespace fx::cli
