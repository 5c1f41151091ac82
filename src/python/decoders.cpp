// fxcpp.generate (python/fxcpp/decoders.py): decoding with a graph that
// follows the decoder convention (fx/decoders/capture.h), the GIL released
// while fxcpp runs and taken again for each streamed token.
#include "python/bindings.h"

#include <fx/decoders/passes.h>

#include <fx/decoders/capture.h>

namespace fx::python {

void bind_decoders(py::module_& m) {
  m.def(
      "_check_decoder",
      [](const std::shared_ptr<GraphModule>& gm) {
        const decoders::DecoderSignature s = decoders::check_decoder(*gm);
        py::dict d;
        d["max_batch"] = s.max_batch;
        d["max_seq"] = s.max_seq;
        d["vocab_size"] = s.vocab_size;
        d["caches"] = s.caches;
        return d;
      },
      "fx::decoders::check_decoder: the graph's caches, batch, positions and vocabulary; FxError if it breaks the "
      "decoder convention.");
  m.def(
      "_optimize_decoder",
      [](const std::shared_ptr<GraphModule>& gm) {
        decoders::DecoderPassReport p;
        std::shared_ptr<GraphModule> out;
        {
          py::gil_scoped_release release;
          out = decoders::optimize_decoder(gm, {}, nullptr, &p);
        }
        // A meta kernel torch registered in Python (repeat_interleave's) may refuse the
        // shape propagation's meta tensors; the optimiser then propagates real values, and
        // the Python error that kernel raised, handled in C++, must not outlive it.
        if (PyErr_Occurred()) PyErr_Clear();
        py::dict fused;
        fused["projections"] = p.merged_projections;
        fused["attention"] = p.fused_attention;
        fused["rms_norm"] = p.fused_rms_norm;
        fused["rotary"] = p.fused_rotary;
        fused["silu_mul"] = p.fused_silu_mul;
        return py::make_tuple(out, fused);
      },
      "fx::decoders::optimize_decoder: (the optimised graph, what the decoder passes fused).");
  m.def(
      "_merge_projections",
      [](const std::shared_ptr<GraphModule>& gm) {
        size_t merged = 0;
        std::shared_ptr<GraphModule> out;
        {
          py::gil_scoped_release release;
          out = decoders::merge_projections(gm, &merged);
        }
        return py::make_tuple(out, merged);
      },
      "fx::decoders::merge_projections: (the module with sibling projections merged, how many groups).");
  m.def(
      "_keep_last_logits", [](GraphModule& gm) { return decoders::keep_last_logits(gm); },
      "fx::decoders::keep_last_logits: the head on the last position only (logits [B, 1, V]); 1 if it sliced.");
  m.def(
      "_generate",
      [](const std::shared_ptr<GraphModule>& gm, const std::vector<int64_t>& prompt, int64_t max_new_tokens,
         double temperature, int64_t top_k, double top_p, double repetition_penalty, uint64_t seed,
         const std::vector<int64_t>& stop_ids, py::object on_token) {
        decoders::GenerateOptions o;
        o.max_new_tokens = max_new_tokens;
        o.temperature = temperature;
        o.top_k = top_k;
        o.top_p = top_p;
        o.repetition_penalty = repetition_penalty;
        o.seed = seed;
        o.stop_ids = stop_ids;
        if (!on_token.is_none())
          o.on_token = [&on_token](int64_t t) {
            py::gil_scoped_acquire gil;
            py::object r = on_token(t);
            return r.is_none() || r.cast<bool>();
          };
        decoders::GenerateResult r;
        {
          py::gil_scoped_release release;
          r = decoders::generate(gm, prompt, o);
        }
        py::dict d;
        d["tokens"] = r.tokens;
        d["stopped"] = r.stopped;
        d["prefill_seconds"] = r.prefill_seconds;
        d["decode_seconds"] = r.decode_seconds;
        return d;
      },
      py::arg("gm"), py::arg("prompt"), py::arg("max_new_tokens"), py::arg("temperature"), py::arg("top_k"),
      py::arg("top_p"), py::arg("repetition_penalty"), py::arg("seed"), py::arg("stop_ids"), py::arg("on_token"),
      "fx::decoders::generate on a decoder graph (its caches reset first).");
}

}  // namespace fx::python
