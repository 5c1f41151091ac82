// aot_function / aot_module: the joint forward+backward trace, its
// partition, and the autograd node that runs the compiled halves
// (functorch 1.13 aot_autograd.py's aot_dispatch_autograd).
#include <fx/compiler/fuse_kernels.h>

#include "aot/gradient_ready_hooks.h"
#include "aot/make_fx_session.h"
#include "aot/optimizer_in_backward.h"
#include "aot/partition_util.h"
#include "execution/memory_plan.h"
#include "passes/graph_copy.h"

#include <fx/aot.h>
#include <fx/error.h>

#include <torch/autograd.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>

namespace fx {
namespace aot_impl {

/// An AotModule's gradient-ready hooks (register_gradient_ready_hook), shared
/// by its entries and their hooked backward graphs.
class GradientHooks {
 public:
  using List = std::vector<std::pair<uint64_t, GradientReadyHook>>;
  /// Whether any hook is registered: without one, backward runs the plain graph.
  bool any() const { return any_.load(std::memory_order_acquire); }
  uint64_t add(GradientReadyHook hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto list = std::make_shared<List>(*list_);
    list->emplace_back(next_id_, std::move(hook));
    list_ = std::move(list);
    any_.store(true, std::memory_order_release);
    return next_id_++;
  }
  void remove(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto list = std::make_shared<List>(*list_);
    list->erase(std::remove_if(list->begin(), list->end(), [id](const auto& h) { return h.first == id; }), list->end());
    any_.store(!list->empty(), std::memory_order_release);
    list_ = std::move(list);
  }
  /// Calls every hook registered now, in registration order.
  void fire(size_t index, const at::Tensor& grad) const {
    std::shared_ptr<const List> list;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      list = list_;
    }
    for (const auto& entry : *list) entry.second(index, grad);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const List> list_ = std::make_shared<List>();  // copied on write: fire() runs unlocked
  uint64_t next_id_ = 0;
  std::atomic<bool> any_{false};
};

/// An AotModule's optimizer in backward (set_optimizer_in_backward), shared
/// by its entries, and what it did.
class OptimizerSlot {
 public:
  std::shared_ptr<OptimizerInBackward> get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return optimizer_;
  }
  void set(std::shared_ptr<OptimizerInBackward> optimizer) {
    std::lock_guard<std::mutex> lock(mutex_);
    optimizer_ = std::move(optimizer);
  }
  void add(const OptimizerInBackwardStats& run) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.steps += run.steps;
    stats_.updates_at_gradient += run.updates_at_gradient;
    stats_.updates_after_reads += run.updates_after_reads;
    stats_.updates_at_end += run.updates_at_end;
  }
  OptimizerInBackwardStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<OptimizerInBackward> optimizer_;
  OptimizerInBackwardStats stats_;
};

/// The shape of what the function returned: one tensor, or a tuple / list.
enum class OutputKind { Tensor, Tuple, List };

struct Entry {
  AotGraphs graphs;
  OutputKind kind = OutputKind::Tensor;
  size_t num_outputs = 0;
  /// Which inputs (params, buffers, then forward's inputs) get a gradient.
  std::vector<bool> needs_grad;
  /// Metadata of the outputs (zero gradients for outputs backward never saw).
  std::vector<at::TensorOptions> out_options;
  std::vector<std::vector<int64_t>> out_sizes;
  std::mutex backward_mutex;
  AotCompiler bw_compiler;
  /// The module's gradient-ready hooks; while any is registered, backward
  /// runs the hooked copy of the backward graph, compiled on first use.
  std::shared_ptr<GradientHooks> hooks;
  HookedBackward hooked_backward;
  CompiledGraph compiled_hooked_backward;
  /// The backward that adds each leaf's gradient into its .grad as soon as
  /// it is computed (accumulating_leaves: which inputs), compiled on first use.
  std::vector<bool> accumulating_leaves;
  HookedBackward accumulating_backward;
  CompiledGraph compiled_accumulating_backward;
  std::atomic<size_t> accumulating_runs{0};
  /// The module's optimizer in backward, and the backward that steps it
  /// (stepping_leaves: which inputs it updates), compiled on first use.
  std::shared_ptr<OptimizerSlot> optimizer;
  std::vector<bool> stepping_leaves;
  HookedBackward stepping_backward;
  CompiledGraph compiled_stepping_backward;
};

struct EntryHolder : torch::CustomClassHolder {
  explicit EntryHolder(std::shared_ptr<Entry> e) : entry(std::move(e)) {}
  std::shared_ptr<Entry> entry;
};

namespace {

std::vector<c10::IValue> flatten_result(const c10::IValue& r) {
  if (r.isList()) return r.toListRef().vec();
  if (r.isTuple()) return r.toTupleRef().elements().vec();
  return {r};
}

std::vector<at::Tensor> output_tensors(const c10::IValue& out, OutputKind& kind) {
  std::vector<at::Tensor> outs;
  auto fail = [](const std::string& what) {
    throw TraceError("aot: the traced function returned " + what +
                     ": a training graph's outputs are tensors (one, or a tuple or list of them)");
  };
  if (out.isTensor()) {
    kind = OutputKind::Tensor;
    outs.push_back(out.toTensor());
  } else if (out.isTuple() || out.isList()) {
    kind = out.isTuple() ? OutputKind::Tuple : OutputKind::List;
    size_t i = 0;
    for (const c10::IValue& e : flatten_result(out)) {
      if (!e.isTensor() || !e.toTensor().defined()) fail("a " + e.tagKind() + " at output[" + std::to_string(i) + "]");
      outs.push_back(e.toTensor());
      ++i;
    }
  } else {
    fail("a " + out.tagKind());
  }
  for (size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].defined()) fail("an undefined tensor at output[" + std::to_string(i) + "]");
  return outs;
}

/// Traces fn's forward and backward together (functorch's
/// create_joint_forward_backward under make_fx).
std::shared_ptr<Entry> trace_joint(const AotFunction& fn, const std::vector<at::Tensor>& params,
                                   const std::vector<at::Tensor>& inputs,
                                   std::optional<c10::MemoryFormat> memory_format) {
  auto entry = std::make_shared<Entry>();
  MakeFxSession session;
  std::vector<at::Tensor> grad_targets;
  size_t k = 1;
  for (const at::Tensor& p : params) {
    session.bind(p, "primals_" + std::to_string(k++));
    entry->needs_grad.push_back(p.requires_grad());
    if (p.requires_grad()) grad_targets.push_back(p);
  }
  std::vector<c10::IValue> args;
  for (const at::Tensor& x : inputs) {
    at::Tensor t = session.add_input(x, "primals_" + std::to_string(k++), x.requires_grad());
    entry->needs_grad.push_back(x.requires_grad());
    if (x.requires_grad()) grad_targets.push_back(t);
    args.emplace_back(t);
  }

  std::vector<Argument> outputs;
  try {
    RecordingScope scope(&session);
    if (memory_format)
      for (c10::IValue& a : args) {
        const at::Tensor& t = a.toTensor();
        if (t.dim() == 4 && at::isFloatingType(t.scalar_type())) a = t.contiguous(*memory_format);
      }
    const c10::IValue out = fn(std::move(args));
    const std::vector<at::Tensor> outs = output_tensors(out, entry->kind);
    std::vector<at::Tensor> needed_outs, needed_tangents;
    for (size_t i = 0; i < outs.size(); ++i) {
      const at::Tensor& ex = session.is_traced(outs[i]) ? session.example_of(outs[i]) : outs[i];
      at::Tensor tangent = session.add_late_input(ex.contiguous(), "tangents_" + std::to_string(i + 1));
      entry->out_options.push_back(ex.options());
      entry->out_sizes.push_back(ex.sizes().vec());
      if (outs[i].requires_grad()) {
        needed_outs.push_back(outs[i]);
        needed_tangents.push_back(tangent);
      }
    }
    std::vector<at::Tensor> grads;
    if (!grad_targets.empty() && !needed_outs.empty())
      grads = torch::autograd::grad(needed_outs, grad_targets, needed_tangents, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < outs.size(); ++i)
      outputs.push_back(session.output_argument(outs[i], "output[" + std::to_string(i) + "]"));
    size_t g = 0;
    for (bool needs : entry->needs_grad) {
      if (!needs) {
        outputs.emplace_back();
        continue;
      }
      const at::Tensor& grad = grad_targets.empty() || needed_outs.empty() ? at::Tensor() : grads[g];
      ++g;
      outputs.push_back(grad.defined() ? session.output_argument(grad, "gradient") : Argument());
    }
    entry->num_outputs = outs.size();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw TraceError(std::string("aot: tracing forward and backward failed: ") + e.what_without_backtrace());
  }
  entry->graphs.joint.module = session.finish(Argument::list(std::move(outputs)));
  entry->graphs.joint.num_forward_outputs = entry->num_outputs;
  return entry;
}

/// The leaves whose .grad the running accumulating backward adds into (by
/// input index), for the hook its graph calls on this thread.
thread_local const std::vector<at::Tensor>* tls_accumulate_into = nullptr;

/// The optimizer-in-backward run the stepping backward's hook reports to, on this thread.
thread_local BackwardStepper* tls_stepper = nullptr;

/// Points a thread-local at `value` for a scope (a graph's run), the previous value back after it, also on a throw.
template <class T>
class ThreadLocalScope {
 public:
  ThreadLocalScope(T*& slot, T* value) : slot_(slot), previous_(slot) { slot_ = value; }
  ~ThreadLocalScope() { slot_ = previous_; }
  ThreadLocalScope(const ThreadLocalScope&) = delete;
  ThreadLocalScope& operator=(const ThreadLocalScope&) = delete;

 private:
  T*& slot_;
  T* previous_;
};

/// Which inputs `optimizer` updates in the backward about to run: those
/// needing a gradient that are leaves it holds (none: an empty vector).
/// Throws where the backward is not a plain backward() (torch.autograd.grad,
/// backward(inputs=...), create_graph): the gradients asked for there are
/// not for a step.
std::vector<bool> step_in_backward(const std::vector<at::Tensor>& leaves, const std::vector<bool>& needs_grad,
                                   const OptimizerInBackward& optimizer) {
  std::vector<bool> stepping(needs_grad.size(), false);
  bool any = false;
  for (size_t k = 0; k < needs_grad.size() && k < leaves.size(); ++k) {
    if (!needs_grad[k] || !leaves[k].defined() || !optimizer.updates(leaves[k])) continue;
    const at::Tensor& v = leaves[k];
    if (!torch::autograd::impl::hooks(v).empty())
      throw Error("AotModule: input " + std::to_string(k) +
                  " has a tensor hook, and the optimizer in backward (set_optimizer_in_backward) takes its gradient: "
                  "remove the hook or the optimizer");
    stepping[k] = any = true;
  }
  if (!any) return {};
  const auto* exec_info = torch::autograd::get_current_graph_task_exec_info();
  if (at::GradMode::is_enabled() || exec_info == nullptr || !exec_info->empty())
    throw Error("AotModule: an optimizer steps in this module's backward (set_optimizer_in_backward), which runs "
                "in a plain backward() only, not in torch.autograd.grad, backward(inputs=...) or "
                "create_graph=True; call set_optimizer_in_backward(nullptr) first");
  return stepping;
}

/// Which inputs of a backward about to run can take their gradient into
/// .grad as the graph computes it, as AccumulateGrad would at the end: all
/// of them or none (an empty vector). AccumulateGrad adds a new gradient
/// into an existing dense .grad in place (`variable_grad += new_grad`, grad
/// mode off); doing it right after the gradient's node frees each gradient
/// there, where returning them all kept every parameter's gradient alive
/// beside its .grad until the graph's end (resnet18: 45 MB). Only where
/// nothing else could see the difference: a plain backward() (no
/// autograd.grad, no inputs=, no create_graph), each input needing a
/// gradient a leaf with a .grad of its own shape and dtype, no hook on it or
/// on its accumulator. Otherwise (a first step after zero_grad(set_to_none),
/// whose gradients AccumulateGrad takes over without a copy) the graph
/// returns them as before.
std::vector<bool> accumulate_in_place(const std::vector<at::Tensor>& leaves, const std::vector<bool>& needs_grad) {
  if (at::GradMode::is_enabled()) return {};
  const auto* exec_info = torch::autograd::get_current_graph_task_exec_info();
  if (exec_info == nullptr || !exec_info->empty()) return {};
  bool any = false;
  for (size_t k = 0; k < needs_grad.size(); ++k) {
    if (!needs_grad[k]) continue;
    if (k >= leaves.size() || !leaves[k].defined()) return {};
    const at::Tensor& v = leaves[k];
    if (!v.requires_grad() || v.grad_fn() || !torch::autograd::impl::hooks(v).empty()) return {};
    const std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::try_get_grad_accumulator(v);
    if (!acc || !acc->post_hooks().empty() || !acc->pre_hooks().empty()) return {};
    const at::Tensor& g = v.grad();
    if (!g.defined() || g.layout() != c10::kStrided || g.requires_grad() || g.sizes() != v.sizes() ||
        g.scalar_type() != v.scalar_type() || g.device() != v.device())
      return {};
    any = true;
  }
  return any ? needs_grad : std::vector<bool>{};
}

class CompiledFunction : public torch::autograd::Function<CompiledFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const std::shared_ptr<Entry>& e, at::TensorList args) {
    std::vector<c10::IValue> in(args.begin(), args.end());
    std::vector<c10::IValue> out = e->graphs.compiled_forward(in);
    torch::autograd::variable_list results, saved, non_differentiable;
    for (size_t i = 0; i < out.size(); ++i) {
      at::Tensor t = out[i].isTensor() ? out[i].toTensor() : at::Tensor();
      if (i < e->num_outputs) {
        results.push_back(t);
        if (t.defined() && !at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()))
          non_differentiable.push_back(t);
      } else {
        saved.push_back(t);
      }
    }
    // Saved as detached aliases in saved_data, not with save_for_backward:
    // backward moves them out, so the compiled backward frees each one after
    // its last use instead of all of them at the end (functorch's
    // maybe_clear_saved_tensors). Detached, an output kept here holds no
    // reference back to this node.
    c10::List<at::Tensor> keep;
    for (const at::Tensor& t : saved) keep.push_back(t.defined() ? t.detach() : t);
    ctx->saved_data["saved"] = std::move(keep);
    ctx->saved_data["entry"] = c10::IValue::make_capsule(c10::make_intrusive<EntryHolder>(e));
    // The leaves needing a gradient (parameters, leaf inputs), for
    // accumulate_in_place; nothing else is held (a non-leaf input's memory
    // is its producer's to free).
    c10::List<at::Tensor> leaves;
    for (size_t i = 0; i < args.size(); ++i)
      leaves.push_back(i < e->needs_grad.size() && e->needs_grad[i] && args[i].requires_grad() && !args[i].grad_fn()
                           ? args[i]
                           : at::Tensor());
    ctx->saved_data["leaves"] = std::move(leaves);
    if (!non_differentiable.empty()) ctx->mark_non_differentiable(non_differentiable);
    return results;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto e = static_cast<EntryHolder*>(ctx->saved_data["entry"].toCapsule().get())->entry;
    auto it = ctx->saved_data.find("saved");
    if (it == ctx->saved_data.end())
      throw Error("aot: trying to backward through the compiled graph a second time: its saved values were freed "
                  "by the first backward");
    std::vector<c10::IValue> in;
    {
      c10::List<at::Tensor> saved = std::move(it->second).toTensorList();
      ctx->saved_data.erase(it);
      for (size_t i = 0; i < saved.size(); ++i) in.emplace_back(saved.extract(i));
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const at::Tensor& g = grads[i];
      in.emplace_back(g.defined() ? g.contiguous() : at::zeros(e->out_sizes[i], e->out_options[i]));
    }
    const bool hooked = e->hooks && e->hooks->any();
    std::vector<at::Tensor> leaves;
    {
      auto lit = ctx->saved_data.find("leaves");
      if (lit != ctx->saved_data.end()) leaves = lit->second.toTensorVector();
    }
    const std::shared_ptr<OptimizerInBackward> optimizer = e->optimizer ? e->optimizer->get() : nullptr;
    const std::vector<bool> stepping =
        optimizer && !hooked ? step_in_backward(leaves, e->needs_grad, *optimizer) : std::vector<bool>{};
    const std::vector<bool> accumulating =
        hooked || !stepping.empty() ? std::vector<bool>{} : accumulate_in_place(leaves, e->needs_grad);
    CompiledGraph run;
    bool accumulates = false;
    {
      std::lock_guard<std::mutex> lock(e->backward_mutex);
      if (!stepping.empty()) {
        if (!e->compiled_stepping_backward || e->stepping_leaves != stepping) {
          e->stepping_leaves = stepping;
          e->stepping_backward = insert_gradient_ready_hooks(
              e->graphs.partitioned.backward, stepping,
              std::make_shared<GradientReadyHookModule>([](size_t index, const at::Tensor& grad) {
                if (tls_stepper != nullptr) tls_stepper->on_gradient(index, grad);
              }),
              /*consume=*/true);
          e->compiled_stepping_backward = e->bw_compiler(e->stepping_backward.module, in);
        }
        run = e->compiled_stepping_backward;
      } else if (!accumulating.empty() &&
          (e->accumulating_leaves.empty() || e->accumulating_leaves == accumulating)) {
        if (!e->compiled_accumulating_backward) {
          e->accumulating_leaves = accumulating;
          e->accumulating_backward = insert_gradient_ready_hooks(
              e->graphs.partitioned.backward, accumulating,
              std::make_shared<GradientReadyHookModule>([](size_t index, const at::Tensor& grad) {
                if (tls_accumulate_into == nullptr || !grad.defined()) return;
                at::NoGradGuard no_grad;
                at::Tensor into = tls_accumulate_into->at(index).mutable_grad();
                into += grad;  // AccumulateGrad's in-place sum
              }),
              /*consume=*/true);
          e->compiled_accumulating_backward = e->bw_compiler(e->accumulating_backward.module, in);
        }
        run = e->compiled_accumulating_backward;
        accumulates = true;
        ++e->accumulating_runs;
      } else if (hooked) {
        if (!e->compiled_hooked_backward) {
          e->hooked_backward = insert_gradient_ready_hooks(
              e->graphs.partitioned.backward, e->needs_grad,
              std::make_shared<GradientReadyHookModule>(
                  [hooks = e->hooks](size_t index, const at::Tensor& grad) { hooks->fire(index, grad); }));
          e->compiled_hooked_backward = e->bw_compiler(e->hooked_backward.module, in);
        }
        run = e->compiled_hooked_backward;
      } else {
        if (!e->graphs.compiled_backward) e->graphs.compiled_backward = e->bw_compiler(e->graphs.partitioned.backward, in);
        run = e->graphs.compiled_backward;
      }
    }
    // The hooked graph reports each gradient as its node runs; the None ones
    // have nothing to wait for, a constant one is known when the graph returns.
    if (hooked)
      for (size_t k : e->hooked_backward.none_outputs) e->hooks->fire(k, at::Tensor());
    std::vector<c10::IValue> out;
    if (!stepping.empty()) {
      // Gradients go to the optimizer as the graph computes them (each
      // update once nothing in the graph reads its parameter any more).
      optimizer->allocate_state();
      BackwardStepper stepper(*optimizer, leaves, stepping, in);
      {
        ThreadLocalScope<BackwardStepper> scope(tls_stepper, &stepper);
        out = run(in);
      }
      stepper.finish(out);
      e->optimizer->add(stepper.stats());
    } else if (accumulates) {
      // Gradients of leaves the graph returns as constants (not computed by
      // a node) are left to autograd; the rest went into .grad as computed.
      ThreadLocalScope<const std::vector<at::Tensor>> scope(tls_accumulate_into, &leaves);
      out = run(in);
    } else {
      out = run(in);
    }
    if (hooked)
      for (size_t k : e->hooked_backward.constant_outputs)
        e->hooks->fire(k, out.at(k).isTensor() ? out[k].toTensor() : at::Tensor());
    torch::autograd::variable_list result;
    result.emplace_back();  // the entry argument
    for (const c10::IValue& v : out) result.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
    return result;
  }
};

std::string signature_of(const std::vector<at::Tensor>& args, bool training) {
  std::ostringstream os;
  os << (training ? "train" : "eval") << (at::GradMode::is_enabled() ? "+grad" : "");
  for (const at::Tensor& t : args) {
    os << '|' << t.scalar_type() << (t.requires_grad() ? "g" : "") << '[';
    for (int64_t s : t.sizes()) os << s << ',';
    os << ']';
  }
  return os.str();
}

}  // namespace
}  // namespace aot_impl

struct AotModule::State {
  AotFunction fn;
  std::shared_ptr<torch::nn::Module> module;
  AotOptions options;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<aot_impl::Entry>> cache;
  std::shared_ptr<aot_impl::Entry> last;
  std::shared_ptr<aot_impl::GradientHooks> hooks = std::make_shared<aot_impl::GradientHooks>();
  std::shared_ptr<aot_impl::OptimizerSlot> optimizer = std::make_shared<aot_impl::OptimizerSlot>();

  /// The module's parameters then buffers now (they may have been replaced);
  /// none for a function. With options.memory_format, 4-d floating-point
  /// parameters not in it are first stored in it (as Python's
  /// module.to(memory_format=...)): the same tensors, so an optimizer holding
  /// them steps the converted values.
  std::vector<at::Tensor> current_params() const {
    std::vector<at::Tensor> out;
    if (!module) return out;
    for (const auto& p : module->named_parameters(true)) {
      const at::Tensor& t = p.value();
      const auto& format = options.memory_format;
      if (format && t.dim() == 4 && at::isFloatingType(t.scalar_type()) && !t.is_contiguous(*format)) {
        torch::NoGradGuard no_grad;
        t.set_data(t.contiguous(*format));
      }
      out.push_back(t);
    }
    for (const auto& b : module->named_buffers(true)) out.push_back(b.value());
    return out;
  }
};

AotModule::AotModule(AotFunction fn, std::shared_ptr<torch::nn::Module> module, AotOptions options)
    : state_(std::make_shared<State>()) {
  state_->fn = std::move(fn);
  state_->module = std::move(module);
  state_->options = std::move(options);
  if (!state_->options.partition_fn) state_->options.partition_fn = default_partition;
  if (!state_->options.fw_compiler) state_->options.fw_compiler = training_compiler();
  if (!state_->options.bw_compiler) state_->options.bw_compiler = training_compiler();
  if (state_->module) register_module("module", state_->module);
}

AotModule::~AotModule() = default;

c10::IValue AotModule::forward(std::vector<c10::IValue> inputs) {
  using namespace aot_impl;
  std::vector<at::Tensor> args = state_->current_params();
  const size_t num_params = args.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor() || !inputs[i].toTensor().defined())
      throw Error("AotModule::forward: input " + std::to_string(i) + " is a " + inputs[i].tagKind() +
                  ": a compiled training graph takes tensors");
    args.push_back(inputs[i].toTensor());
  }
  const bool training = state_->module ? state_->module->is_training() : is_training();
  const std::string key = signature_of(args, training);
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->cache.find(key);
    if (it != state_->cache.end()) {
      e = it->second;
    } else {
      std::vector<at::Tensor> params(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(num_params));
      std::vector<at::Tensor> rest(args.begin() + static_cast<std::ptrdiff_t>(num_params), args.end());
      e = trace_joint(state_->fn, params, rest, state_->options.memory_format);
      // The trace ran a whole step on real tensors; glibc kept what it freed
      // (resnet18, batch 8: VmRSS 390 MB after the trace, 322 MB after this).
      detail::release_freed_memory();
      e->graphs.partitioned = state_->options.partition_fn(e->graphs.joint);
      std::vector<c10::IValue> examples(args.begin(), args.end());
      e->graphs.compiled_forward = state_->options.fw_compiler(e->graphs.partitioned.forward, examples);
      e->bw_compiler = state_->options.bw_compiler;
      e->hooks = state_->hooks;
      e->optimizer = state_->optimizer;
      state_->cache.emplace(key, e);
    }
    state_->last = e;
  }
  torch::autograd::variable_list outs;
  bool differentiable = false;
  for (size_t i = 0; i < args.size(); ++i) differentiable = differentiable || e->needs_grad[i];
  if (differentiable && at::GradMode::is_enabled()) {
    // As an ArrayRef, apply() counts each tensor as an input of the autograd node.
    outs = CompiledFunction::apply(e, at::TensorList(args));
  } else {
    std::vector<c10::IValue> in(args.begin(), args.end());
    std::vector<c10::IValue> out = e->graphs.compiled_forward(in);
    for (size_t i = 0; i < e->num_outputs; ++i) outs.push_back(out[i].toTensor());
  }
  switch (e->kind) {
    case OutputKind::Tensor:
      return outs.at(0);
    case OutputKind::Tuple:
      return c10::ivalue::Tuple::create(std::vector<c10::IValue>(outs.begin(), outs.end()));
    case OutputKind::List:
      break;
  }
  return c10::List<at::Tensor>(outs);
}

at::Tensor AotModule::forward(const at::Tensor& x) {
  c10::IValue r = forward(std::vector<c10::IValue>{x});
  if (!r.isTensor()) throw Error("AotModule::forward(Tensor): the function returned a " + r.tagKind());
  return r.toTensor();
}

const AotGraphs& AotModule::graphs() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->last) throw Error("AotModule: no graphs yet: they are traced by the first forward");
  return state_->last->graphs;
}

std::shared_ptr<GraphModule> AotModule::forward_graph() const { return graphs().partitioned.forward; }
std::shared_ptr<GraphModule> AotModule::backward_graph() const { return graphs().partitioned.backward; }
std::shared_ptr<GraphModule> AotModule::joint_graph() const { return graphs().joint.module; }

RemovableHandle AotModule::register_gradient_ready_hook(GradientReadyHook hook) {
  if (!hook) throw Error("AotModule::register_gradient_ready_hook: the hook is empty");
  if (state_->optimizer->get())
    throw Error("AotModule::register_gradient_ready_hook: an optimizer steps in this module's backward "
                "(set_optimizer_in_backward) and takes the gradients: remove it first");
  const uint64_t id = state_->hooks->add(std::move(hook));
  return RemovableHandle([weak = std::weak_ptr<aot_impl::GradientHooks>(state_->hooks), id] {
    if (auto hooks = weak.lock()) hooks->remove(id);
  });
}

void AotModule::set_optimizer_in_backward(std::shared_ptr<OptimizerInBackward> optimizer) {
  if (optimizer && state_->hooks->any())
    throw Error("AotModule::set_optimizer_in_backward: gradient-ready hooks are registered on this module (a "
                "DataParallelTrainer's?), and the optimizer in backward would take their gradients: remove them first");
  if (optimizer) optimizer->allocate_state();
  state_->optimizer->set(std::move(optimizer));
}

OptimizerInBackwardStats AotModule::optimizer_in_backward_stats() const { return state_->optimizer->stats(); }

size_t AotModule::num_traces() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->cache.size();
}

size_t AotModule::num_accumulating_backwards() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  size_t n = 0;
  for (const auto& [key, entry] : state_->cache) n += entry->accumulating_runs.load();
  return n;
}

CompiledGraph graph_module_compiler(const std::shared_ptr<GraphModule>& gm, const std::vector<c10::IValue>&) {
  // The memory plan serves each graph's temporaries from a reused arena
  // (convolution_backward's scratch, freed intermediates); what escapes, the
  // forward's saved values and the gradients, comes from the allocator.
  gm->set_memory_planning(true);
  return [gm](std::vector<c10::IValue>& inputs) {
    c10::IValue r = gm->forward(std::move(inputs));
    inputs.clear();
    return aot_impl::flatten_result(r);
  };
}

std::vector<std::pair<std::string, size_t>> TrainingRewrites::items() const {
  return {{"conv_as_winograd", conv_as_winograd},
          {"conv_weight_grad_as_matmul", conv_weight_grad_as_matmul},
          {"conv_as_matmul", conv_as_matmul},
          {"bmm_as_onednn_matmul", bmm_as_onednn_matmul},
          {"bernoulli_as_fxcpp", bernoulli_as_fxcpp},
          {"fuse_batch_norm_activation", fuse_batch_norm_activation},
          {"fuse_kernels", fuse_kernels},
          {"sink_recomputation", sink_recomputation}};
}

size_t TrainingRewrites::total() const {
  size_t n = 0;
  for (const auto& item : items()) n += item.second;
  return n;
}

TrainingRewrites rewrite_for_training(Graph& g, const TrainingCompileOptions& options) {
  TrainingRewrites r;
  // Winograd first: it takes the large maps, the products the small ones.
  r.conv_as_winograd = conv_as_winograd(g, options.conv_winograd_min_positions, options.conv_forward_rewrites);
  r.conv_weight_grad_as_matmul = conv_weight_grad_as_matmul(g, options.conv_weight_grad_matmul_max_positions);
  r.conv_as_matmul = conv_as_matmul(g, options.conv_matmul_max_positions, options.conv_forward_rewrites);
  if (options.bmm_as_onednn_matmul) r.bmm_as_onednn_matmul = bmm_as_onednn_matmul(g);
  if (options.bernoulli_as_fxcpp) r.bernoulli_as_fxcpp = bernoulli_as_fxcpp(g);
  if (options.fuse_batch_norm_activation)
    r.fuse_batch_norm_activation = fuse_batch_norm_activation(g, options.fuse_batch_norm_backward);
  if (options.fuse_kernels) {
    compiler::FuseReport fused;
    compiler::fuse_kernels(g, {}, &fused);
    r.fuse_kernels = fused.fused_nodes;
  }
  if (options.sink_recomputation) r.sink_recomputation = sink_recomputation(g);
  return r;
}

AotCompiler training_compiler(TrainingCompileOptions options) {
  return [options](const std::shared_ptr<GraphModule>& gm, const std::vector<c10::IValue>& example_inputs) {
    auto copy = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
    rewrite_for_training(copy->graph(), options);
    return graph_module_compiler(copy, example_inputs);
  };
}

std::shared_ptr<AotModule> aot_function(AotFunction fn, AotOptions options) {
  return std::make_shared<AotModule>(std::move(fn), nullptr, std::move(options));
}

std::shared_ptr<AotModule> aot_module(std::shared_ptr<torch::nn::Module> module, AotFunction forward,
                                      AotOptions options) {
  if (!module) throw Error("aot_module: the module is null");
  return std::make_shared<AotModule>(std::move(forward), std::move(module), std::move(options));
}

std::shared_ptr<AotModule> aot_module(const std::shared_ptr<GraphModule>& module, AotOptions options) {
  if (!module) throw Error("aot_module: the module is null");
  GraphModule* gm = module.get();
  return aot_module(std::static_pointer_cast<torch::nn::Module>(module),
                    [gm](std::vector<c10::IValue> args) { return gm->forward(std::move(args)); }, std::move(options));
}

}  // namespace fx
