// The data, batches, optimizer, checkpoints and testing hooks of the
// training subcommands (see train_io.h).
#include "train_io.h"

#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
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
          {"checkpoint", "DIR", "write DIR/step-K/ (model, optimizer, data position, random generators) and DIR/step at the end (and every --save-every steps)"},
          {"save-every", "K", "checkpoint every K steps too"},
          {"resume", nullptr, "continue from the checkpoint in --checkpoint DIR when there is one, up to --steps in all"},
          {"seed", "S", "seeds rank R's random generator (dropout) with S + R when the run starts (default 0)"},
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

TrainingData batch_at(const TrainingData& data, int64_t row, int64_t batch) {
  const at::Tensor rows = at::remainder(at::arange(row, row + batch, at::kLong), data.inputs.size(0));
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

TrainingState TrainingState::current(int64_t next_row) {
  TrainingState s;
  s.next_row = next_row;
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  s.cpu_generator = g.get_state();
  return s;
}

void TrainingState::start_generator(int64_t seed, int rank) const {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  if (cpu_generator.defined()) g.set_state(cpu_generator);
  else g.set_current_seed(static_cast<uint64_t>(seed + rank));
}

namespace {

/// Makes `path` durable: its data, then (for a rename) its directory's entry.
void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

/// Writes `path` through `write(tmp)` to "path.tmp", syncs it and renames it into place.
template <typename Write>
void write_file(const std::string& path, Write write) {
  const std::string tmp = path + ".tmp";
  write(tmp);
  sync_path(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error("cannot write the checkpoint " + path + " (" + std::strerror(errno) + ")");
}

void make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw Error("cannot make the checkpoint directory " + dir + " (" + std::strerror(errno) + ")");
}

bool readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

}  // namespace

int64_t Checkpoint::latest() const {
  if (dir.empty() || !readable(dir + "/step")) return -1;
  std::ifstream in(dir + "/step");
  int64_t s = -1;
  if (!(in >> s) || s < 0) throw Error(dir + "/step: not a step count (a damaged checkpoint)");
  return s;
}

int64_t Checkpoint::agreed_step(distributed::ProcessGroup* group, bool resume) const {
  int64_t step = 0;
  if (resume && rank == 0) step = std::max<int64_t>(latest(), 0);
  if (group && group->world_size() > 1) {
    at::Tensor t = at::full({1}, rank == 0 ? step : 0, at::kLong);
    group->allreduce_sum(t, "agreeing on the checkpoint's step").wait();
    step = t.item<int64_t>();
  }
  if (step == 0) return 0;
  for (const std::string& path : {model_path(step), set_dir(step) + "/optimizer" + suffix + ".pt",
                                  set_dir(step) + "/state_" + std::to_string(rank) + ".pt"})
    if (!readable(path)) {
      if (readable(dir + "/model" + suffix + ".fx") && !readable(set_dir(step)))  // fxcpp before DIR/step-K/
        throw SharedError(dir + " holds a checkpoint of an earlier fxcpp (model" + suffix + ".fx beside step, no step-" +
                          std::to_string(step) + "/): train without --resume" +
                          (suffix.empty() ? ", or from " + dir + "/model.fx as the model" : std::string()));
      throw Error(path + " is missing: rank 0 resumes from step " + std::to_string(step) +
                  " (is --checkpoint a directory every rank shares?)");
    }
  return step;
}

std::string Checkpoint::set_dir(int64_t step) const { return dir + "/step-" + std::to_string(step); }

std::string Checkpoint::model_path(int64_t step) const { return set_dir(step) + "/model" + suffix + ".fx"; }

void Checkpoint::load_optimizer(int64_t step, torch::optim::Optimizer& optimizer) const {
  const std::string path = set_dir(step) + "/optimizer" + suffix + ".pt";
  try {
    torch::load(optimizer, path);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    throw Error(path + ": cannot load the optimizer's state (" + msg + "): another optimizer or model?");
  }
}

TrainingState Checkpoint::load_state(int64_t step) const {
  const std::string path = set_dir(step) + "/state_" + std::to_string(rank) + ".pt";
  TrainingState s;
  try {
    torch::serialize::InputArchive in;
    in.load_from(path);
    at::Tensor row;
    in.read("next_row", row);
    s.next_row = row.item<int64_t>();
    in.read("cpu_generator", s.cpu_generator);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    throw Error(path + ": cannot read the training state (" + msg.substr(0, msg.find('\n')) + ")");
  }
  return s;
}

void Checkpoint::save(distributed::ProcessGroup& group, int64_t step, const GraphModule* model,
                      torch::optim::Optimizer* optimizer, const TrainingState& state) const {
  const std::string set = set_dir(step);
  make_dir(set);
  if (model) write_file(model_path(step), [&](const std::string& tmp) { fx::save(*model, tmp); });
  if (optimizer)
    write_file(set + "/optimizer" + suffix + ".pt", [&](const std::string& tmp) { torch::save(*optimizer, tmp); });
  write_file(set + "/state_" + std::to_string(rank) + ".pt", [&](const std::string& tmp) {
    torch::serialize::OutputArchive out;
    out.write("next_row", at::full({1}, state.next_row, at::kLong));
    out.write("cpu_generator", state.cpu_generator);
    out.save_to(tmp);
  });
  sync_path(set);
  group.barrier("writing the checkpoint of step " + std::to_string(step));  // every rank's files are in place
  if (rank != 0) return;
  training_save_hook(rank, step);
  write_file(dir + "/step", [&](const std::string& tmp) {
    std::ofstream out(tmp);
    out << step << "\n";
    if (!out.flush()) throw Error("cannot write the checkpoint " + tmp);
  });
  sync_path(dir);
  // The sets of other steps (older ones, or a later one a stopped attempt left half written).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.size() > 5 && name.find_first_not_of("0123456789", 5) == std::string::npos &&
        name != "step-" + std::to_string(step))
      std::filesystem::remove_all(entry.path(), ec);
  }
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

void training_save_hook(int rank, int64_t step) {
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart && std::atoi(restart) > 0) return;
  const char* r = std::getenv("FXCPP_TEST_KILL_RANK");
  const char* s = std::getenv("FXCPP_TEST_KILL_SAVING");
  if (r && s && std::atoi(r) == rank && std::atoll(s) == step) ::kill(::getpid(), SIGKILL);
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
