"""fxcpp.generate (issue 67): a decoder written in Python as gpt-fast writes one (tests/python/gptfast_model.py),
traced by torch.fx, decodes eager PyTorch's greedy tokens in fxcpp, plain and optimised; graphs breaking the decoder
convention are refused in one line."""
import copy

import pytest
import torch
import torch.fx

import fxcpp
from gptfast_model import Transformer

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


class BufferTracer(torch.fx.Tracer):
    proxy_buffer_attributes = True


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = Transformer().eval()
    for p in m.parameters():
        torch.nn.init.normal_(p, 0, 0.3)  # random weights whose greedy output varies
    return m


def eager_greedy(m, prompt, n):
    """Greedy decoding in eager PyTorch with the model's own cache (a copy: the caches are written)."""
    m = copy.deepcopy(m)
    with torch.no_grad():
        logits = m(torch.tensor([prompt]), torch.arange(len(prompt)))
        out = []
        for i in range(n):
            out.append(int(logits[0, -1].argmax()))
            logits = m(torch.tensor([[out[-1]]]), torch.tensor([len(prompt) + i]))
    return out


@pytest.mark.parametrize("optimize", [False, True])
def test_gpt_fast_model_decodes_eagers_greedy_tokens(model, optimize):
    expected = eager_greedy(model, PROMPT, 24)
    assert len(set(expected)) >= 4  # the output varies
    r = fxcpp.generate(copy.deepcopy(model), PROMPT, 24, optimize=optimize)
    assert r.tokens == expected
    assert not r.stopped and r.prefill_seconds > 0
    # A torch.fx GraphModule traced with its buffers proxied, and the fxcpp GraphModule of it, the same.
    m = copy.deepcopy(model)
    gm = torch.fx.GraphModule(m, BufferTracer().trace(m))
    assert fxcpp.generate(gm, PROMPT, 24, optimize=optimize).tokens == expected
    assert fxcpp.generate(fxcpp.from_fx(gm), PROMPT, 24, optimize=optimize).tokens == expected


def test_streaming_stop_ids_and_seeded_sampling(model):
    expected = eager_greedy(model, PROMPT, 12)
    seen = []
    r = fxcpp.generate(copy.deepcopy(model), PROMPT, 12, on_token=lambda t: seen.append(t) is None and len(seen) < 5)
    assert seen == expected[:5] and r.tokens == expected[:5]
    r = fxcpp.generate(copy.deepcopy(model), PROMPT, 12, stop_ids=[expected[3]])
    assert r.stopped and r.tokens == expected[:expected.index(expected[3]) + 1]
    a = fxcpp.generate(copy.deepcopy(model), PROMPT, 12, temperature=1.0, top_k=10, seed=7).tokens
    b = fxcpp.generate(copy.deepcopy(model), PROMPT, 12, temperature=1.0, top_k=10, seed=7).tokens
    assert a == b


def test_graphs_breaking_the_convention_are_refused(model):
    # torch.fx's default tracer bakes the caches' reads in as constants: only the update is a node.
    gm = torch.fx.symbolic_trace(copy.deepcopy(model))
    with pytest.raises(fxcpp.FxError) as e:
        fxcpp.generate(gm, PROMPT, 4)
    assert str(e.value) == ("decoder convention: cache layers.0.attention.kv_cache.k_cache is written at input_pos "
                            "but never read (a torch.fx trace records a buffer's reads as constants unless its Tracer "
                            "has proxy_buffer_attributes = True)")
    with pytest.raises(fxcpp.FxError) as e:
        fxcpp.generate(torch.nn.Linear(4, 4), PROMPT, 4)
    assert str(e.value) == ("decoder convention: the graph takes 1 inputs, a decoder 2 (tokens int64 [B, T], "
                            "input_pos int64 [T])")
    with pytest.raises(TypeError):
        fxcpp.generate("model", PROMPT, 4)


def test_optimised_graph_runs_generated_kernels(model):
    """The torch.fx-traced gpt-fast decoder's RMSNorm (with its residual add) and rotary halves do not match the
    decoder passes' patterns written for HF's graph; fxcpp's compiler fuses them (fx::compiler::fuse_kernels in the
    optimiser), and the greedy tokens above are eager's with them."""
    from fxcpp.decoders import decoder_graph
    gm, _ = decoder_graph(copy.deepcopy(model), True)
    programs = [n.args[1] for n in gm.graph.nodes if n.op == "call_function" and n.target == "fxcpp::fused_kernel"]
    if not programs and not fxcpp._C._fuse_kernels_available():
        pytest.skip("no C++ compiler")
    assert any("mean(" in p and "rsqrt(" in p for p in programs), programs
    # The rotary's two halves (x1 * cos - x2 * sin, x2 * cos + x1 * sin) read the same four values: siblings fused
    # horizontally, one kernel with both outputs for q and one for k in each of the 2 layers.
    rotary = [p for p in programs if p.startswith("inputs 4; ") and "sub(" in p and "add(" in p and p.count(" full") == 2]
    assert len(rotary) == 4, programs


def test_w1_and_w3_become_one_gemm(model):
    """fx::decoders::merge_projections (fxcpp._C._merge_projections): gpt-fast's w1 and w3 read one normed value and
    become one linear (its wqkv is one already), their halves read by the SiLU-gated product; the greedy tokens stay
    eager's, optimised or not. optimize_decoder merges weight-only layers only: these float ones it leaves."""
    from fxcpp.decoders import decoder_graph
    gm, _ = decoder_graph(copy.deepcopy(model), False)
    merged, groups = fxcpp._C._merge_projections(gm)
    assert groups == 2  # one a layer
    parts = {n.name: n for n in merged.graph.nodes if n.target == "aten::narrow" and n.name.endswith("_part")}
    assert sorted(parts) == ["layers_0_w1_part", "layers_0_w3_part", "layers_1_w1_part", "layers_1_w3_part"]
    for layer in ("layers_0", "layers_1"):  # the two halves of one product
        w1, w3 = parts[layer + "_w1_part"], parts[layer + "_w3_part"]
        assert w1.args[0] is w3.args[0] and w1.args[0].name == layer + "_w1_w3"
        assert w1.args[1:] == (-1, 0, 160) and w3.args[1:] == (-1, 160, 160)
    expected = eager_greedy(model, PROMPT, 24)
    assert fxcpp.generate(merged, PROMPT, 24, optimize=False).tokens == expected
    assert fxcpp.generate(merged, PROMPT, 24).tokens == expected
    assert decoder_graph(copy.deepcopy(model), True)[1]["projections"] == 0


def test_keep_last_logits_on_the_optimised_graph(model):
    """fxcpp.generate runs fx::decoders::keep_last_logits on its optimised graph: the gpt-fast decoder's head
    (output(x) after its norm) takes the last position only, and the prompt's logits are [1, 1, V], the full
    graph's last row."""
    from fxcpp.decoders import decoder_graph
    full, _ = decoder_graph(copy.deepcopy(model), True)
    last, _ = decoder_graph(copy.deepcopy(model), True)
    assert fxcpp._C._keep_last_logits(last) == 1
    assert fxcpp._C._keep_last_logits(last) == 0
    tokens = torch.tensor([PROMPT])
    pos = torch.arange(len(PROMPT))
    want = full(tokens, pos)
    got = last(tokens, pos)
    assert tuple(got.shape) == (1, 1, want.shape[-1])
    assert torch.allclose(got[0, 0], want[0, -1], rtol=1e-5, atol=1e-5 * float(want.abs().max()))
