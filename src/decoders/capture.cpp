// A decoder as a graph (include/fx/decoders/capture.h): the LLaMA model
// traced with T dynamic, the convention checked on any graph, and generate
// driving it.
#include <fx/decoders/capture.h>

#include "decoders/convention.h"
#include "passes/graph_copy.h"

#include <fx/decoders/passes.h>
#include <fx/passes/cse.h>
#include <fx/error.h>
#include <fx/tensor_meta.h>
#include <fx/trace.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>
#include <torch/types.h>

namespace fx::decoders {

namespace {

const char* kWhere = "decoder convention: ";

/// x[i] = v as torch.fx records it on a buffer (gpt-fast's k_cache[:, :, input_pos] = k).
bool is_setitem(const Node* n) {
  return (n->op() == Opcode::CallMethod && n->target() == "__setitem__") ||
         (n->op() == Opcode::CallFunction && n->target() == "operator.setitem");
}

/// aten::index_copy_ / index_put_, as a function or as a method (x.index_copy_(2, input_pos, k) from torch.fx).
bool is_index_write(const Node* n, const char* name) {
  return (n->op() == Opcode::CallFunction && n->target() == std::string("aten::") + name) ||
         (n->op() == Opcode::CallMethod && n->target() == name);
}

bool is_cache_write(const Node* n) {
  const bool writes = is_index_write(n, "index_copy_") || is_index_write(n, "index_put_") || is_setitem(n);
  return writes && !n->args().empty() && n->args()[0].is_node() && n->args()[0].to_node()->op() == Opcode::GetAttr;
}

bool is_full_slice(const Argument& a) {
  if (!a.is_slice()) return false;
  for (const Argument& p : a.slice_parts())
    if (!p.is_none()) return false;
  return true;
}

/// The dimension `n` (a cache write) indexes with `input_pos`, or -1.
int64_t indexed_dim(const Node* n, const Node* input_pos) {
  const auto& a = n->args();
  if (is_index_write(n, "index_copy_")) {
    if (a.size() == 4 && a[2].is_node() && a[2].to_node() == input_pos && a[1].kind() == Argument::Kind::Int) return a[1].to_int();
    return -1;
  }
  // aten::index_put_(self, indices: Tensor?[], values): input_pos at position d of the list;
  // x[:, :, input_pos] = v: input_pos after d full slices.
  if (a.size() >= 3 && a[1].is_sequence()) {
    const auto& l = a[1].items();
    for (size_t d = 0; d < l.size(); ++d) {
      if (l[d].is_node() && l[d].to_node() == input_pos) return static_cast<int64_t>(d);
      if (is_setitem(n) && !is_full_slice(l[d])) return -1;
    }
  }
  return -1;
}

}  // namespace

std::shared_ptr<GraphModule> capture(LlamaForCausalLM& model) {
  auto m = model;
  TracedFunction forward = [m](std::vector<c10::IValue> a) mutable -> c10::IValue {
    return m->lm_head->forward(m->model->forward(a[0].toTensor(), a[1].toTensor()));
  };
  TraceOptions options;
  options.dynamic_dims = {{0, 1, "T"}, {1, 0, "T"}};  // tokens [B, T], input_pos [T]: one T
  // Two positions as the example: T = 1 would be a size tracing cannot tell from broadcasting.
  const int64_t b = model->cache_options().max_batch;
  Tracer tracer;
  tracer.set_options(options);
  tracer.set_input_names({"tokens", "input_pos"});
  auto graph = tracer.trace(model.ptr(), forward, {at::zeros({b, 2}, at::kLong), at::arange(2, at::kLong)});
  auto gm = to_graph_module(tracer, std::move(graph));
  check_decoder(*gm);
  return gm;
}

DecoderSignature check_decoder(const GraphModule& gm) {
  const Graph& g = gm.graph();
  const auto inputs = g.find_nodes(Opcode::Placeholder);
  if (inputs.size() != 2)
    throw Error(std::string(kWhere) + "the graph takes " + std::to_string(inputs.size()) +
                " inputs, a decoder 2 (tokens int64 [B, T], input_pos int64 [T])");
  DecoderSignature s;
  for (const Node* n : g.nodes()) {
    if (!is_cache_write(n)) continue;
    const int64_t dim = indexed_dim(n, inputs[1]);
    if (dim < 0) continue;
    const Node* attr = n->args()[0].to_node();
    const at::Tensor cache = gm.fetch_attr(attr->target());
    if (cache.dim() < 2 || dim >= cache.dim() || dim == 0)
      throw Error(std::string(kWhere) + "cache " + attr->target() + " (" + detail::described(cache) +
                  ") is written at input_pos along dimension " + std::to_string(dim) +
                  ", not a sequence dimension after the batch");
    if (s.caches.empty()) {
      s.max_batch = cache.size(0);
      s.max_seq = cache.size(dim);
    } else if (cache.size(0) != s.max_batch || cache.size(dim) != s.max_seq) {
      throw Error(std::string(kWhere) + "cache " + attr->target() + " holds " + std::to_string(cache.size(0)) +
                  " sequences of " + std::to_string(cache.size(dim)) + " positions, " + s.caches.front() + " " +
                  std::to_string(s.max_batch) + " of " + std::to_string(s.max_seq));
    }
    // torch.fx 1.13 proxies no buffer unless its tracer's proxy_buffer_attributes is set: the
    // cache's reads then become constants of the trace, and only its update is recorded.
    bool read = !n->users().empty();
    for (const Node* u : attr->users()) read |= u != n && !is_cache_write(u);
    if (!read)
      throw Error(std::string(kWhere) + "cache " + attr->target() +
                  " is written at input_pos but never read (a torch.fx trace records a buffer's reads as "
                  "constants unless its Tracer has proxy_buffer_attributes = True)");
    s.caches.push_back(attr->target());
  }
  if (s.caches.empty())
    throw Error(std::string(kWhere) +
                "the graph writes no cache in place at input_pos (a buffer updated by aten::index_copy_, "
                "aten::index_put_ or x[:, :, input_pos] = v with the second input as the index)");
  for (const Node* n : g.find_nodes(Opcode::Output)) {
    if (n->args().size() == 1 && n->args()[0].is_node())
      if (const TensorMetadata* t = tensor_meta_of(n->args()[0].to_node()); t && t->shape.size() == 3)
        s.vocab_size = t->shape.back();
  }
  return s;
}

std::shared_ptr<GraphModule> optimize_decoder(const std::shared_ptr<GraphModule>& gm, OptimizeOptions options,
                                              OptimizeReport* report, DecoderPassReport* passes) {
  const DecoderSignature s = check_decoder(*gm);
  if (options.example_inputs.empty())  // a decode step: its weights packed now, not at the first token
    options.example_inputs = {at::zeros({s.max_batch, 1}, at::kLong), at::zeros({1}, at::kLong)};
  DecoderPassReport p;
  const auto merged = merge_projections(gm, &p.merged_projections, /*float_layers=*/false);
  auto work = std::make_shared<GraphModule>(merged, passes_detail::copy_graph(merged->graph()), gm->class_name());
  // Each layer builds the same causal mask from input_pos (arange, unsqueeze, le, logical_not): once is enough.
  CSEPass cse;
  cse.call(work);
  p.merged_duplicates = cse.merged();
  p.fused_attention = fuse_attention(*work);
  p.fused_rms_norm = fuse_rms_norm(*work);
  p.fused_rotary = fuse_rotary_embedding(*work);
  p.fused_silu_mul = fuse_silu_mul(*work);
  if (passes) *passes = p;
  auto out = optimize_for_inference(work, options, report);
  reset_cache(*out);  // the warm-up wrote position 0 (and the result is checked against the convention)
  return out;
}

namespace {

/// decoder_step for a graph whose signature is known.
DecoderStep step_of(std::shared_ptr<GraphModule> gm, const DecoderSignature& s) {
  detail::DecoderLimits limits;
  limits.max_batch = s.max_batch;
  limits.exact_batch = true;
  limits.max_seq = s.max_seq;
  limits.vocab_size = s.vocab_size;
  return [gm, limits](const at::Tensor& tokens, const at::Tensor& input_pos) -> at::Tensor {
    detail::check_decoder_inputs("decoder(tokens, input_pos)", tokens, input_pos, limits);
    return gm->forward({tokens, input_pos}).toTensor();
  };
}

/// reset_cache for a graph whose signature is known.
void zero_caches(GraphModule& gm, const DecoderSignature& s) {
  at::NoGradGuard no_grad;
  for (const auto& name : s.caches) gm.fetch_attr(name).zero_();
}

}  // namespace

DecoderStep decoder_step(std::shared_ptr<GraphModule> gm) {
  const DecoderSignature s = check_decoder(*gm);
  return step_of(std::move(gm), s);
}

void reset_cache(GraphModule& gm) { zero_caches(gm, check_decoder(gm)); }

GenerateResult generate(const std::shared_ptr<GraphModule>& gm, const std::vector<int64_t>& prompt,
                        GenerateOptions options) {
  const DecoderSignature s = check_decoder(*gm);
  if (s.max_batch != 1)
    throw Error("generate: the decoder graph was captured for " + std::to_string(s.max_batch) +
                " sequences; generate decodes one (capture with max_batch 1)");
  zero_caches(*gm, s);
  if (options.max_seq <= 0 || options.max_seq > s.max_seq) options.max_seq = s.max_seq;
  at::NoGradGuard no_grad;
  return generate(step_of(gm, s), prompt, options);
}

}  // namespace fx::decoders
