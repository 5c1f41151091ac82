// DataParallelTrainer: DistributedDataParallel's reducer (buckets of
// gradients all-reduced as backward produces them) over fx's ProcessGroup.
#include <fx/distributed/data_parallel_trainer.h>

#include <fx/gradient_ready_hook.h>
#include <fx/graph_module.h>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fx::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double span_ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string shape_text(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

/// "name|[2, 3]|Float": what must agree across ranks.
std::string signature(const std::string& name, const at::Tensor& t) {
  return name + "|" + shape_text(t) + "|" + std::string(c10::toString(t.scalar_type()));
}

std::vector<std::string> split_at(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

/// The line saying how `mine` (this rank's) differs from `theirs` (rank `other`'s), "" if they agree.
std::string difference(const std::string& who, const std::vector<std::string>& mine,
                       const std::vector<std::string>& theirs, int other) {
  const std::string there = " on rank " + std::to_string(other);
  if (mine.size() != theirs.size()) {
    auto names = [](const std::vector<std::string>& sigs) {
      std::vector<std::string> out;
      for (const std::string& sig : sigs) out.push_back(split_at(sig, '|')[0]);
      return out;
    };
    const auto here = names(mine), there_names = names(theirs);
    std::string only;
    for (const std::string& n : here)
      if (only.empty() && std::find(there_names.begin(), there_names.end(), n) == there_names.end()) only = "'" + n + "' is only here";
    for (const std::string& n : there_names)
      if (only.empty() && std::find(here.begin(), here.end(), n) == here.end()) only = "'" + n + "' is only there";
    return who + ": the model has " + std::to_string(mine.size()) + " parameters here but " +
           std::to_string(theirs.size()) + there + " (" + (only.empty() ? std::string("some appear twice") : only) +
           "; every rank must hold the same model)";
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i] == theirs[i]) continue;
    const auto a = split_at(mine[i], '|'), b = split_at(theirs[i], '|');
    if (a[0] != b[0])
      return who + ": parameter " + std::to_string(i) + " is '" + a[0] + "' here but '" + b[0] + "'" + there +
             " (every rank must hold the same model)";
    if (a[1] != b[1])
      return who + ": parameter '" + a[0] + "' has shape " + a[1] + " here but " + b[1] + there +
             " (every rank must hold the same model)";
    return who + ": parameter '" + a[0] + "' is " + a[2] + " here but " + b[2] + there +
           " (every rank must hold the same model)";
  }
  return "";
}

std::string join_lines(const std::vector<std::string>& v, char sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? std::string(1, sep) : std::string()) + v[i];
  return out;
}

/// A distinct store key per trainer built on `group` (the same on every rank: they build them in the same
/// order). Counted per live group: a group made later at a freed one's address starts again at 0.
int next_trainer_id(const std::shared_ptr<ProcessGroup>& group) {
  static std::mutex mutex;
  static std::vector<std::pair<std::weak_ptr<ProcessGroup>, int>> ids;
  std::lock_guard<std::mutex> lock(mutex);
  ids.erase(std::remove_if(ids.begin(), ids.end(), [](const auto& e) { return e.first.expired(); }), ids.end());
  for (auto& [weak, count] : ids)
    if (weak.lock() == group) return count++;
  ids.emplace_back(group, 1);
  return 0;
}

}  // namespace

void check_same_parameters(ProcessGroup& group, const std::vector<std::pair<std::string, at::Tensor>>& params,
                           const std::string& key) {
  std::vector<std::string> mine;
  for (const auto& [name, t] : params) mine.push_back(signature(name, t));
  group.set(key + "/" + std::to_string(group.rank()), join_lines(mine, '\n'));
  if (group.world_size() == 1) return;
  auto read = [&](int r) {
    const std::string text = group.get(key + "/" + std::to_string(r), "rank " + std::to_string(r) + "'s parameter list");
    return text.empty() ? std::vector<std::string>() : split_at(text, '\n');
  };
  if (group.rank() != 0) {
    const std::string d = difference(group.who(), mine, read(0), 0);
    if (!d.empty()) throw Error(d);
    return;
  }
  for (int r = 1; r < group.world_size(); ++r) {
    const std::string d = difference(group.who(), mine, read(r), r);
    if (!d.empty()) throw Error(d);
  }
}

void broadcast_from_rank0(ProcessGroup& group, const std::vector<at::Tensor>& tensors, const std::string& what) {
  if (group.world_size() == 1) return;
  at::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, list] : by_dtype) {
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& t : list) flat_parts.push_back(t.detach().reshape(-1));
    at::Tensor flat = at::cat(flat_parts);
    group.broadcast(flat, 0, what);
    int64_t offset = 0;
    for (const at::Tensor& t : list) {
      t.detach().copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

// ---- the reducer ---------------------------------------------------------------

struct DataParallelTrainer::State {
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<torch::nn::Module> module;
  DataParallelOptions options;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // alive as long as the hooks
  std::vector<uintptr_t> hook_keys;
  std::vector<RemovableHandle> graph_hooks;  // on the AotModules' backward graphs

  struct Bucket {
    std::vector<size_t> members;  // parameter indices, in bucket order
    at::Tensor flat;              // their gradients, one after another
    size_t ready = 0;
    PendingCollective work;
    Clock::time_point started;
    bool launched = false;
  };
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of, offset_in_bucket;

  std::mutex mutex;
  int no_sync_depth = 0;
  std::vector<char> ready, used;  // this step
  /// Reported by a backward graph's hook in this backward: its accumulator's post-hook, which follows, is skipped.
  std::vector<char> reported_by_graph;
  /// The gradient the graph reported (its identity: what the accumulator must then receive), null for None.
  std::vector<const c10::TensorImpl*> graph_gradient;
  size_t next_bucket = 0;         // the next bucket to launch (in order)
  bool step_started = false;
  Clock::time_point backward_start, backward_end;
  bool in_backward = false;
  bool finishing = false;   // finish() marks the parameters without a gradient
  int64_t started_in_backward = 0;
  int64_t started_in_graph = 0;
  GradientSyncStats stats;

  std::string who() const { return group->who(); }

  /// DDP's autograd hook: runs after the gradient accumulator wrote param.grad.
  class ReadyHook : public torch::autograd::FunctionPostHook {
   public:
    ReadyHook(std::weak_ptr<State> state, size_t index) : state_(std::move(state)), index_(index) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& inputs) override {
      const at::Tensor* incoming = inputs.empty() ? nullptr : &inputs[0];
      if (auto s = state_.lock()) s->mark_ready(index_, true, incoming);
      return outputs;
    }

   private:
    std::weak_ptr<State> state_;
    size_t index_;
  };

  /// A parameter's gradient was accumulated into param.grad (the post-hook).
  /// `incoming`: what the accumulator added to param.grad.
  void mark_ready(size_t index, bool with_gradient, const at::Tensor* incoming) {
    std::lock_guard<std::mutex> lock(mutex);
    if (no_sync_depth > 0) return;
    if (reported_by_graph[index]) {
      // The backward graph's hook counted this gradient already, unless the accumulator got another one.
      reported_by_graph[index] = 0;
      const c10::TensorImpl* got = incoming && incoming->defined() ? incoming->unsafeGetTensorImpl() : nullptr;
      if (got != graph_gradient[index])
        throw Error(who() + ": parameter '" + names[index] +
                    "' received gradients from its aot_module's backward graph and from outside it in one backward: "
                    "the graph's alone was all-reduced (use the parameter inside the aot_module only)");
      return;
    }
    ready_locked(index, with_gradient, at::Tensor(), false);
  }

  /// An AotModule's backward graph computed `grad`, this backward's gradient of parameter `index`; autograd
  /// adds it to param.grad only when the whole graph has run. Undefined: the graph computes none (None).
  void graph_gradient_ready(size_t index, const at::Tensor& grad) {
    std::lock_guard<std::mutex> lock(mutex);
    if (no_sync_depth > 0) return;
    // A tensor hook (param.register_hook) changes the gradient when the accumulator runs: wait for that.
    if (!torch::autograd::impl::hooks(params[index]).empty()) return;
    reported_by_graph[index] = 1;
    graph_gradient[index] = grad.defined() ? grad.unsafeGetTensorImpl() : nullptr;
    // No gradient: a zero contribution with find_unused_parameters, else finish() names the parameter.
    if (!grad.defined() && !options.find_unused_parameters) return;
    ready_locked(index, grad.defined(), grad, true);
  }

  /// Copies a ready gradient into its bucket: param.grad (what this backward or, after no_sync(), earlier ones
  /// accumulated) plus `pending` (a backward graph's gradient, not accumulated yet); zeros without a gradient.
  void ready_locked(size_t index, bool with_gradient, const at::Tensor& pending, bool from_graph) {
    if (!step_started) {
      step_started = true;
      if (!in_backward) backward_start = Clock::now();
    }
    if (ready[index])
      throw Error(who() + ": parameter '" + names[index] +
                  "' received its gradient twice before finish_gradient_sync() (two backward passes in one step, "
                  "or an aot_module's forward ran twice: call finish_gradient_sync() after each backward, or "
                  "accumulate inside no_sync())");
    ready[index] = 1;
    used[index] = with_gradient;
    Bucket& b = buckets[bucket_of[index]];
    const at::Tensor& grad = params[index].grad();
    at::Tensor slot = b.flat.narrow(0, static_cast<int64_t>(offset_in_bucket[index]), params[index].numel());
    if (!with_gradient) {
      slot.zero_();
    } else if (grad.defined()) {
      slot.copy_(grad.reshape(-1));
      if (pending.defined()) slot.add_(pending.reshape(-1));
    } else if (pending.defined()) {
      slot.copy_(pending.reshape(-1));
    } else {
      slot.zero_();
    }
    ++b.ready;
    launch_ready_buckets(from_graph);
  }

  /// Starts the all-reduce of every full bucket whose predecessors have started (the same order on every rank).
  void launch_ready_buckets(bool from_graph) {
    while (next_bucket < buckets.size() && buckets[next_bucket].ready == buckets[next_bucket].members.size()) {
      Bucket& b = buckets[next_bucket];
      b.started = Clock::now();
      b.launched = true;
      b.work = group->allreduce_sum(b.flat, "all-reducing gradient bucket " + std::to_string(next_bucket));
      if (!finishing) ++started_in_backward;
      if (from_graph) ++started_in_graph;
      ++next_bucket;
    }
  }

  void reset_step() {
    std::fill(ready.begin(), ready.end(), 0);
    std::fill(used.begin(), used.end(), 0);
    std::fill(reported_by_graph.begin(), reported_by_graph.end(), 0);
    for (Bucket& b : buckets) b.ready = 0, b.launched = false;
    next_bucket = 0;
    step_started = false;
    started_in_backward = 0;
    started_in_graph = 0;
  }

  void finish() {
    std::unique_lock<std::mutex> lock(mutex);
    if (no_sync_depth > 0) return;
    const Clock::time_point end = in_backward ? backward_end : Clock::now();
    std::vector<std::string> missing;
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) missing.push_back(names[i]);
    if (!missing.empty() && !options.find_unused_parameters) {
      reset_step();
      std::string list;
      for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
      throw Error(who() + ": parameters that did not receive a gradient in this step: " + list +
                  " (they were not used in producing the loss: set DataParallelOptions::find_unused_parameters, "
                  "or make every forward output take part in the loss)");
    }
    finishing = true;
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) ready_locked(i, false, at::Tensor(), false);
    finishing = false;
    const Clock::time_point wait_start = Clock::now();
    for (Bucket& b : buckets) b.work.wait();
    const Clock::time_point waited = Clock::now();

    // Which parameters some rank used (find_unused_parameters): the others keep their param.grad.
    std::vector<char> globally_used(params.size(), 1);
    if (options.find_unused_parameters) {
      at::Tensor flags = at::empty({static_cast<int64_t>(params.size())}, at::kFloat);
      for (size_t i = 0; i < params.size(); ++i) flags[static_cast<int64_t>(i)] = used[i] ? 1.0f : 0.0f;
      PendingCollective w = group->allreduce_sum(flags, "all-reducing which parameters were used");
      w.wait();
      for (size_t i = 0; i < params.size(); ++i) globally_used[i] = flags[static_cast<int64_t>(i)].item<float>() > 0;
    }
    {
      at::NoGradGuard no_grad;
      const double world = static_cast<double>(group->world_size());
      for (Bucket& b : buckets) {
        b.flat.div_(world);
        for (size_t i : b.members) {
          if (!globally_used[i]) continue;
          at::Tensor avg = b.flat.narrow(0, static_cast<int64_t>(offset_in_bucket[i]), params[i].numel())
                               .view(params[i].sizes());
          at::Tensor& grad = params[i].mutable_grad();
          if (grad.defined()) grad.copy_(avg);
          else grad = avg.clone();
        }
      }
    }

    // Timing: all-reduce busy time, and the part of it before backward ended.
    std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
    for (Bucket& b : buckets) spans.emplace_back(b.started, std::max(b.started, b.work.finished_at()));
    std::sort(spans.begin(), spans.end());
    double busy = 0, overlap = 0;
    Clock::time_point cur_start{}, cur_end{};
    bool open = false;
    auto close = [&] {
      busy += span_ms(cur_end - cur_start);
      if (cur_start < end) overlap += span_ms(std::min(cur_end, end) - cur_start);
    };
    for (const auto& [s, e] : spans) {
      if (open && s <= cur_end) {
        cur_end = std::max(cur_end, e);
        continue;
      }
      if (open) close();
      cur_start = s, cur_end = e, open = true;
    }
    if (open) close();
    stats.steps += 1;
    stats.backward_ms = span_ms(end - backward_start);
    stats.allreduce_ms = busy;
    stats.overlap_ms = overlap;
    stats.wait_ms = span_ms(waited - wait_start);
    stats.buckets_started_in_backward = started_in_backward;
    stats.buckets_started_in_backward_graph = started_in_graph;
    reset_step();
  }
};

DataParallelTrainer::DataParallelTrainer(std::shared_ptr<ProcessGroup> group, std::shared_ptr<torch::nn::Module> module,
                                         DataParallelOptions options)
    : state_(std::make_shared<State>()) {
  if (!group) throw Error("DataParallelTrainer: no process group");
  if (!module) throw Error("DataParallelTrainer: no module");
  if (!(options.bucket_cap_mb > 0))
    throw Error("DataParallelTrainer: bucket_cap_mb must be positive, got " + std::to_string(options.bucket_cap_mb));
  State& s = *state_;
  s.group = std::move(group);
  s.module = std::move(module);
  s.options = options;
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& p : s.module->named_parameters(/*recurse=*/true)) {
    named.emplace_back(p.key(), p.value());
    if (!p.value().requires_grad()) continue;
    s.names.push_back(p.key());
    s.params.push_back(p.value());
  }
  const std::string key = "ddp/" + std::to_string(next_trainer_id(s.group));
  check_same_parameters(*s.group, named, key + "/parameters");
  std::vector<at::Tensor> sync;
  for (const auto& [name, t] : named) sync.push_back(t);
  if (options.broadcast_buffers)
    for (const auto& b : s.module->named_buffers(/*recurse=*/true)) sync.push_back(b.value());
  broadcast_from_rank0(*s.group, sync, "broadcasting rank 0's parameters");

  // Buckets: parameters in reverse order of registration, up to bucket_cap_mb each, one dtype per bucket.
  const double cap = options.bucket_cap_mb * 1024 * 1024;
  s.bucket_of.assign(s.params.size(), 0);
  s.offset_in_bucket.assign(s.params.size(), 0);
  std::vector<int64_t> sizes;
  for (size_t k = s.params.size(); k-- > 0;) {
    const at::Tensor& p = s.params[k];
    const double bytes = static_cast<double>(p.numel()) * static_cast<double>(p.element_size());
    const bool fits = !s.buckets.empty() && s.buckets.back().flat.scalar_type() == p.scalar_type() &&
                      static_cast<double>(sizes.back()) * static_cast<double>(p.element_size()) + bytes <= cap;
    if (!fits) {
      s.buckets.emplace_back();
      s.buckets.back().flat = at::empty({0}, p.options().requires_grad(false));
      sizes.push_back(0);
    }
    s.bucket_of[k] = s.buckets.size() - 1;
    s.offset_in_bucket[k] = static_cast<size_t>(sizes.back());
    s.buckets.back().members.push_back(k);
    sizes.back() += p.numel();
  }
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    s.buckets[b].flat = at::zeros({sizes[b]}, s.buckets[b].flat.options());
    s.stats.bytes += sizes[b] * static_cast<int64_t>(s.buckets[b].flat.element_size());
  }
  s.ready.assign(s.params.size(), 0);
  s.used.assign(s.params.size(), 0);
  s.reported_by_graph.assign(s.params.size(), 0);
  s.graph_gradient.assign(s.params.size(), nullptr);

  for (size_t i = 0; i < s.params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(s.params[i]);
    if (!acc) throw Error("DataParallelTrainer: parameter '" + s.names[i] + "' is not a leaf tensor");
    s.hook_keys.push_back(acc->add_post_hook(std::make_unique<State::ReadyHook>(state_, i)));
    s.accumulators.push_back(std::move(acc));
  }
  // An AotModule (the module or one inside it) computes all its gradients in one autograd node: its backward
  // graph's hooks report each parameter's gradient as soon as the graph has computed it, so the buckets start
  // in the graph's order while it still runs, not together when the node returns.
  std::unordered_map<const c10::TensorImpl*, size_t> index_of;
  for (size_t i = 0; i < s.params.size(); ++i) index_of.emplace(s.params[i].unsafeGetTensorImpl(), i);
  std::unordered_set<const torch::nn::Module*> seen;
  for (const auto& m : s.module->modules(/*include_self=*/true)) {
    auto* source = dynamic_cast<GradientReadyHooks*>(m.get());
    if (!source || !seen.insert(m.get()).second) continue;
    std::vector<std::ptrdiff_t> ours;  // the module's parameter k is our parameter ours[k] (-1: not ours)
    for (const at::Tensor& p : m->parameters(/*recurse=*/true)) {
      auto it = index_of.find(p.unsafeGetTensorImpl());
      ours.push_back(it == index_of.end() ? -1 : static_cast<std::ptrdiff_t>(it->second));
    }
    s.graph_hooks.push_back(source->register_gradient_ready_hook(
        [weak = std::weak_ptr<State>(state_), ours](size_t index, const at::Tensor& grad) {
          if (index >= ours.size() || ours[index] < 0) return;
          if (auto st = weak.lock()) st->graph_gradient_ready(static_cast<size_t>(ours[index]), grad);
        }));
  }
}

DataParallelTrainer::~DataParallelTrainer() {
  for (RemovableHandle& h : state_->graph_hooks) h.remove();
  for (size_t i = 0; i < state_->accumulators.size(); ++i) state_->accumulators[i]->del_post_hook(state_->hook_keys[i]);
}

c10::IValue DataParallelTrainer::forward(std::vector<c10::IValue> inputs) {
  if (auto gm = std::dynamic_pointer_cast<GraphModule>(state_->module)) return gm->forward(std::move(inputs));
  throw Error("DataParallelTrainer::forward: the module (" + state_->module->name() +
              ") is not a GraphModule: call its own forward (its gradients sync all the same)");
}

void DataParallelTrainer::backward(const at::Tensor& loss) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.in_backward = true;
    s.backward_start = Clock::now();
  }
  try {
    loss.backward();
  } catch (...) {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.in_backward = false;
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.backward_end = Clock::now();
  }
  try {
    s.finish();
  } catch (...) {
    s.in_backward = false;
    throw;
  }
  s.in_backward = false;
}

void DataParallelTrainer::finish_gradient_sync() { state_->finish(); }

DataParallelTrainer::NoSync::NoSync(DataParallelTrainer* trainer) : trainer_(trainer) {
  std::lock_guard<std::mutex> lock(trainer_->state_->mutex);
  ++trainer_->state_->no_sync_depth;
}
DataParallelTrainer::NoSync::NoSync(NoSync&& other) noexcept : trainer_(other.trainer_) { other.trainer_ = nullptr; }
DataParallelTrainer::NoSync::~NoSync() {
  if (!trainer_) return;
  std::lock_guard<std::mutex> lock(trainer_->state_->mutex);
  --trainer_->state_->no_sync_depth;
}
DataParallelTrainer::NoSync DataParallelTrainer::no_sync() { return NoSync(this); }

std::vector<std::vector<std::string>> DataParallelTrainer::bucket_parameters() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : state_->buckets) {
    out.emplace_back();
    for (size_t i : b.members) out.back().push_back(state_->names[i]);
  }
  return out;
}

const GradientSyncStats& DataParallelTrainer::stats() const { return state_->stats; }
const std::shared_ptr<torch::nn::Module>& DataParallelTrainer::module() const { return state_->module; }
const std::shared_ptr<ProcessGroup>& DataParallelTrainer::group() const { return state_->group; }

}  // namespace fx::distributed
