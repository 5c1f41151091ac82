// PipelineTrainer: GPipe and 1F1B training schedules over pipeline_split's
// stages (see fx/distributed/pipeline_trainer.h).
#include <fx/distributed/microbatch.h>
#include <fx/distributed/pipeline_trainer.h>

#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/functional/loss.h>

#include <chrono>
#include <map>

namespace fx::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<c10::IValue> elements(const c10::IValue& v) {
  if (!v.isTuple()) return {v};
  const auto& e = v.toTupleRef().elements();
  return std::vector<c10::IValue>(e.begin(), e.end());
}

/// What a stage keeps of one microbatch between its forward and its backward.
struct Kept {
  std::vector<c10::IValue> inputs;  // floating-point tensors: leaves that require grad
  std::vector<c10::IValue> outputs;
  at::Tensor loss;  // the last stage
};

}  // namespace

std::string to_string(Schedule s) { return s == Schedule::GPipe ? "gpipe" : "1f1b"; }

Schedule parse_schedule(const std::string& s) {
  if (s == "gpipe") return Schedule::GPipe;
  if (s == "1f1b") return Schedule::OneFOneB;
  throw Error("unknown pipeline schedule '" + s + "' (expected gpipe or 1f1b)");
}

std::vector<ScheduleAction> schedule_actions(Schedule schedule, int stage, int stages, int64_t microbatches) {
  std::vector<ScheduleAction> out;
  const int64_t warmup =
      schedule == Schedule::GPipe ? microbatches : std::min<int64_t>(stages - stage - 1, microbatches);
  for (int64_t i = 0; i < warmup; ++i) out.push_back({'F', i});
  for (int64_t i = 0; i < microbatches - warmup; ++i) {
    out.push_back({'F', warmup + i});
    out.push_back({'B', i});
  }
  for (int64_t i = microbatches - warmup; i < microbatches; ++i) out.push_back({'B', i});
  return out;
}

LossFunction cross_entropy_loss() {
  return [](const c10::IValue& output, const at::Tensor& targets) {
    if (!output.isTensor()) throw Error("cross-entropy needs the model's output to be one tensor of logits");
    return torch::nn::functional::cross_entropy(output.toTensor(), targets);
  };
}

PipelineTrainer::PipelineTrainer(std::shared_ptr<ProcessGroup> group, PipelineStage stage, PipelineTrainOptions options)
    : group_(std::move(group)), stage_(std::move(stage)), options_(std::move(options)) {
  if (!group_) throw Error("PipelineTrainer: no process group");
  if (!stage_.module) throw Error("PipelineTrainer: stage " + std::to_string(stage_.index) + " has no module");
  if (stage_.num_stages != group_->world_size() || stage_.index != group_->rank())
    throw Error("PipelineTrainer: " + group_->who() + " of " + std::to_string(group_->world_size()) +
                " was given stage " + std::to_string(stage_.index) + " of " + std::to_string(stage_.num_stages) +
                " (rank r runs stage r, one stage per rank)");
  if (options_.microbatches < 1)
    throw Error("PipelineTrainer: microbatches must be at least 1, got " + std::to_string(options_.microbatches));
  if (!options_.loss) options_.loss = cross_entropy_loss();
}

double PipelineTrainer::train_step(const std::vector<c10::IValue>& inputs, const at::Tensor& targets) {
  const Clock::time_point t0 = Clock::now();
  const int s = stage_.index, last = stage_.num_stages - 1;
  const int64_t m = options_.microbatches;
  std::vector<std::vector<c10::IValue>> input_chunks;
  std::vector<at::Tensor> target_chunks;
  if (s == 0) input_chunks = split_microbatches(inputs, m);
  if (s == last) {
    if (!targets.defined()) throw Error("PipelineTrainer: the last stage needs the targets of the batch");
    for (const auto& t : split_microbatches({targets}, m)) target_chunks.push_back(t[0].toTensor());
  }
  std::map<int64_t, Kept> kept;
  std::vector<PendingSend> sends;
  double forward_ms = 0, backward_ms = 0, loss_sum = 0;
  int64_t peak = 0;

  for (const ScheduleAction& a : schedule_actions(options_.schedule, s, stage_.num_stages, m)) {
    const int64_t i = a.microbatch;
    const std::string mb = "microbatch " + std::to_string(i);
    if (a.kind == 'F') {
      Kept k;
      k.inputs = s == 0 ? input_chunks[static_cast<size_t>(i)]
                        : elements(group_->recv(s - 1, nullptr, mb + "'s activations").value);
      if (s > 0)
        for (c10::IValue& v : k.inputs)
          if (v.isTensor() && v.toTensor().is_floating_point()) v = v.toTensor().detach().requires_grad_(true);
      const Clock::time_point f0 = Clock::now();
      c10::IValue out = stage_.module->forward(k.inputs);
      if (s == last) {
        k.loss = options_.loss(out, target_chunks[static_cast<size_t>(i)]) / static_cast<double>(m);
        loss_sum += k.loss.item<double>();
      } else {
        k.outputs = elements(out);
        std::vector<c10::IValue> sent;
        for (const c10::IValue& v : k.outputs) sent.push_back(v.isTensor() ? c10::IValue(v.toTensor().detach()) : v);
        forward_ms += elapsed_ms(f0);
        Message msg;
        msg.id = i;
        msg.count = m;
        msg.value = c10::ivalue::Tuple::create(std::move(sent));
        sends.push_back(group_->send(msg, s + 1, mb + "'s activations"));
      }
      if (s == last) forward_ms += elapsed_ms(f0);
      kept[i] = std::move(k);
      peak = std::max<int64_t>(peak, static_cast<int64_t>(kept.size()));
      continue;
    }
    // Backward of microbatch i.
    Kept k = std::move(kept.at(i));
    kept.erase(i);
    std::vector<at::Tensor> roots, grads;
    if (s == last) {
      roots.push_back(k.loss);
    } else {
      const std::vector<c10::IValue> g =
          elements(group_->recv(s + 1, nullptr, mb + "'s gradients").value);
      for (size_t j = 0; j < k.outputs.size() && j < g.size(); ++j) {
        if (!k.outputs[j].isTensor() || !g[j].isTensor()) continue;
        const at::Tensor& o = k.outputs[j].toTensor();
        if (!o.requires_grad()) continue;
        roots.push_back(o);
        grads.push_back(g[j].toTensor());
      }
    }
    const Clock::time_point b0 = Clock::now();
    if (!roots.empty()) torch::autograd::backward(roots, grads);
    backward_ms += elapsed_ms(b0);
    if (s > 0) {
      std::vector<c10::IValue> input_grads;
      for (const c10::IValue& v : k.inputs) {
        at::Tensor g = v.isTensor() && v.toTensor().requires_grad() ? v.toTensor().grad() : at::Tensor();
        input_grads.push_back(g.defined() ? c10::IValue(g) : c10::IValue());
      }
      Message msg;
      msg.id = i;
      msg.count = m;
      msg.value = c10::ivalue::Tuple::create(std::move(input_grads));
      sends.push_back(group_->send(msg, s - 1, mb + "'s input gradients"));
    }
  }
  for (PendingSend& p : sends) p.wait();

  // Every rank learns the loss (the last stage has it).
  at::Tensor loss = at::full({1}, s == last ? loss_sum : 0.0, at::kDouble);
  if (stage_.num_stages > 1) group_->allreduce_sum(loss, "sharing the step's loss").wait();
  stats_.loss = loss.item<double>();
  stats_.forward_ms = forward_ms;
  stats_.backward_ms = backward_ms;
  stats_.peak_microbatches_kept = peak;
  stats_.steps += 1;
  stats_.step_ms = elapsed_ms(t0);
  return stats_.loss;
}

std::vector<at::Tensor> PipelineTrainer::parameters() const { return stage_.module->parameters(); }
const PipelineStage& PipelineTrainer::stage() const { return stage_; }
const PipelineStepStats& PipelineTrainer::stats() const { return stats_; }

}  // namespace fx::distributed
