// Microbatches: inputs cut along dim 0, outputs concatenated.
#include <fx/distributed/microbatch.h>

#include <fx/error.h>

#include <optional>

namespace fx::distributed {
namespace {

std::optional<int64_t> first_batch(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.dim() >= 1) return t.size(0);
    return std::nullopt;
  }
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      if (auto b = first_batch(e)) return b;
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (auto b = first_batch(e)) return b;
  }
  return std::nullopt;
}

/// `v` cut into `chunks` pieces: out[i] is microbatch i's value.
std::vector<c10::IValue> split_value(const c10::IValue& v, int64_t batch, int64_t chunks) {
  std::vector<c10::IValue> out;
  out.reserve(static_cast<size_t>(chunks));
  if (v.isTensor() && v.toTensor().defined() && v.toTensor().dim() >= 1 && v.toTensor().size(0) == batch) {
    for (const at::Tensor& piece : at::tensor_split(v.toTensor(), chunks, 0)) out.emplace_back(piece);
    return out;
  }
  auto split_items = [&](const std::vector<c10::IValue>& items) {
    std::vector<std::vector<c10::IValue>> per(static_cast<size_t>(chunks));
    for (const auto& item : items) {
      std::vector<c10::IValue> pieces = split_value(item, batch, chunks);
      for (int64_t c = 0; c < chunks; ++c) per[static_cast<size_t>(c)].push_back(std::move(pieces[static_cast<size_t>(c)]));
    }
    return per;
  };
  if (v.isTuple()) {
    std::vector<c10::IValue> items(v.toTupleRef().elements().begin(), v.toTupleRef().elements().end());
    for (auto& p : split_items(items)) out.emplace_back(c10::ivalue::Tuple::create(std::move(p)));
    return out;
  }
  if (v.isList()) {
    c10::List<c10::IValue> list = v.toList();
    std::vector<c10::IValue> items(list.begin(), list.end());
    for (auto& p : split_items(items)) {
      c10::impl::GenericList l(list.elementType());
      for (auto& e : p) l.push_back(std::move(e));
      out.emplace_back(std::move(l));
    }
    return out;
  }
  for (int64_t c = 0; c < chunks; ++c) out.push_back(v);
  return out;
}

c10::IValue concat_values(const std::vector<c10::IValue>& parts, const std::string& where) {
  const c10::IValue& first = parts.front();
  if (first.isTensor()) {
    std::vector<at::Tensor> ts;
    for (const auto& p : parts) {
      if (!p.isTensor()) throw Error("microbatch outputs differ in structure at " + where);
      ts.push_back(p.toTensor());
    }
    if (!ts[0].defined() || ts[0].dim() == 0) return first;
    return at::cat(ts, 0);
  }
  auto gather = [&](size_t n, auto item_of) {
    std::vector<c10::IValue> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<c10::IValue> column;
      for (const auto& p : parts) column.push_back(item_of(p, i));
      out.push_back(concat_values(column, where + "[" + std::to_string(i) + "]"));
    }
    return out;
  };
  if (first.isTuple()) {
    const size_t n = first.toTupleRef().elements().size();
    for (const auto& p : parts)
      if (!p.isTuple() || p.toTupleRef().elements().size() != n)
        throw Error("microbatch outputs differ in structure at " + where);
    return c10::ivalue::Tuple::create(
        gather(n, [](const c10::IValue& p, size_t i) { return p.toTupleRef().elements()[i]; }));
  }
  if (first.isList()) {
    const size_t n = first.toListRef().size();
    for (const auto& p : parts)
      if (!p.isList() || p.toListRef().size() != n) throw Error("microbatch outputs differ in structure at " + where);
    std::vector<c10::IValue> items = gather(n, [](const c10::IValue& p, size_t i) { return p.toListRef()[i]; });
    c10::impl::GenericList l(first.toList().elementType());
    for (auto& e : items) l.push_back(std::move(e));
    return l;
  }
  return first;
}

}  // namespace

int64_t batch_size(const std::vector<c10::IValue>& inputs) {
  for (const auto& v : inputs)
    if (auto b = first_batch(v)) return *b;
  throw Error("no input is a tensor with a batch dimension (dim 0) to cut into microbatches");
}

std::vector<std::vector<c10::IValue>> split_microbatches(const std::vector<c10::IValue>& inputs, int64_t chunks) {
  if (chunks < 1) throw Error("microbatches must be at least 1, got " + std::to_string(chunks));
  std::vector<std::vector<c10::IValue>> out(static_cast<size_t>(chunks));
  if (chunks == 1) {
    out[0] = inputs;
    return out;
  }
  const int64_t batch = batch_size(inputs);
  if (batch < chunks)
    throw Error("a batch of " + std::to_string(batch) + " cannot be cut into " + std::to_string(chunks) +
                " microbatches (at most one per row)");
  for (const auto& v : inputs) {
    std::vector<c10::IValue> pieces = split_value(v, batch, chunks);
    for (int64_t c = 0; c < chunks; ++c) out[static_cast<size_t>(c)].push_back(std::move(pieces[static_cast<size_t>(c)]));
  }
  return out;
}

c10::IValue concat_microbatches(const std::vector<c10::IValue>& outputs) {
  if (outputs.empty()) throw Error("concat_microbatches: no outputs");
  if (outputs.size() == 1) return outputs[0];
  return concat_values(outputs, "output");
}

c10::IValue microbatched_forward(GraphModule& gm, const std::vector<c10::IValue>& inputs, int64_t chunks) {
  std::vector<c10::IValue> outs;
  for (auto& mb : split_microbatches(inputs, chunks)) outs.push_back(gm.forward(std::move(mb)));
  return concat_microbatches(outs);
}

}  // namespace fx::distributed
