"""fxcpp.generate: autoregressive decoding with any decoder that follows fxcpp's decoder convention (issue 67).

    forward(tokens: int64 [B, T], input_pos: int64 [T]) -> logits [B, T, V]

with the KV caches as buffers the module updates in place at input_pos (gpt-fast's KVCache, written as torch.fx
1.13 can trace it: ``k_cache.index_copy_(2, input_pos, k)``). The model may be a torch.nn.Module (traced here by
torch.fx with its buffers proxied), a torch.fx GraphModule traced so (a Tracer with proxy_buffer_attributes = True:
torch.fx's default records a buffer's reads as constants, which the convention check refuses), or an fxcpp
GraphModule (fxcpp.from_fx, fxcpp.load); it is brought over to fxcpp, checked against the
convention (fxcpp.FxError naming what is wrong), made fast by the decoder passes and the optimiser
(``optimize=True``), and driven by fx::decoders::generate: the prompt in one forward, then one token per forward,
greedy or sampled as Hugging Face's processors do. Its caches are shared with the module given, and reset first.

    import fxcpp
    result = fxcpp.generate(model, [1, 450, 4996], max_new_tokens=64)   # greedy
    print(result.tokens)
"""
import collections

import torch
import torch.fx

from . import _C
from .convert import from_fx

GenerateResult = collections.namedtuple("GenerateResult", ["tokens", "stopped", "prefill_seconds", "decode_seconds"])
GenerateResult.__doc__ = "The new tokens (the prompt not included), whether a stop id ended them, and the seconds " \
                         "of the prefill forward and of the decode forwards."


class _BufferTracer(torch.fx.Tracer):
    """torch.fx's tracer with the buffers proxied: the KV caches are read where the graph reads them, not baked in
    as the values they held while tracing."""

    proxy_buffer_attributes = True


def decoder_graph(model, optimize=True):
    """(an fxcpp GraphModule following the decoder convention, what the decoder passes fused or None)."""
    if isinstance(model, _C.GraphModule):
        gm = model
    elif isinstance(model, torch.fx.GraphModule):
        gm = from_fx(model)
    elif isinstance(model, torch.nn.Module):
        gm = from_fx(torch.fx.GraphModule(model, _BufferTracer().trace(model)))
    else:
        raise TypeError("fxcpp.generate: expected a torch.nn.Module, a torch.fx.GraphModule or an fxcpp GraphModule, "
                        "not %s" % type(model).__name__)
    _C._check_decoder(gm)
    if not optimize:
        return gm, None
    return _C._optimize_decoder(gm)


def generate(model, prompt_ids, max_new_tokens=32, *, temperature=0.0, top_k=0, top_p=1.0, repetition_penalty=1.0,
             seed=0, stop_ids=(), on_token=None, optimize=True):
    """Decodes from `prompt_ids` (a list of token ids) with `model` (see the module's docstring); returns a
    GenerateResult. on_token(id) is called with each new token as it is chosen (returning False stops)."""
    gm, _ = decoder_graph(model, optimize)
    if optimize:  # the optimised graph is this call's own: its head on the last position only
        _C._keep_last_logits(gm)
    r = _C._generate(gm, [int(t) for t in prompt_ids], int(max_new_tokens), float(temperature), int(top_k),
                     float(top_p), float(repetition_penalty), int(seed), [int(t) for t in stop_ids], on_token)
    return GenerateResult(r["tokens"], r["stopped"], r["prefill_seconds"], r["decode_seconds"])
