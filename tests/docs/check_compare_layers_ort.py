#!/usr/bin/python3
"""scripts/compare_layers_ort.py's reading of the two profiles, on made-up ones: per-node medians without each
node's first time, in the order the nodes first ran; convolutions paired in order, a count mismatch refused."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import compare_layers_ort as cl  # noqa: E402


def ort_event(name, op, us, weight=None):
    shapes = [{"float": [1, 8, 4, 4]}] + ([{"float": weight}] if weight else [])
    return {"cat": "Node", "name": name + "_kernel_time", "dur": us, "ph": "X",
            "args": {"op_name": op, "input_type_shape": shapes}}


def fx_event(name, target, us):
    return {"cat": "call_function", "name": name, "dur": us * 1000.0, "args": {"target": target}}


def main():
    profile = [{"cat": "Session", "name": "model_loading_uri", "dur": 5}]
    for run, first in enumerate((50, 0, 0, 0)):  # the first run is slow: dropped
        profile += [ort_event("/conv1/Relu_output_0_nchwc", "Conv", 1000 + first * 100 + run, [16, 8, 3, 3]),
                    ort_event("/pool/MaxPool_output_0", "MaxPool", 200),
                    ort_event("/conv2/Conv_output_0_nchwc", "FusedConv", 3000 + first * 100 - run, [16, 16, 1, 1])]
        profile.append({"cat": "Node", "name": "/conv1/Relu_fence_before", "dur": 1})
    ort = cl.ort_nodes(profile)
    assert [n[0] for n in ort] == ["/conv1/Relu_output_0_nchwc", "/pool/MaxPool_output_0",
                                   "/conv2/Conv_output_0_nchwc"], ort
    assert ort[0][1:] == ("Conv", [16, 8, 3, 3], 1.002), ort[0]  # median of 1.001, 1.002, 1.003
    assert ort[1][1:] == ("MaxPool", None, 0.2), ort[1]
    assert ort[2][3] == 2.998, ort[2]

    trace = {"traceEvents": [{"cat": "placeholder", "name": "x", "dur": 1}]}
    for t in (9.0, 2.0, 2.2, 2.1):
        trace["traceEvents"] += [fx_event("onednn_conv2d", "fxcpp::onednn_conv2d", t),
                                 {"cat": "operator", "name": "aten::empty", "dur": 3},
                                 fx_event("max_pool2d", "fxcpp::max_pool2d", 0.1),
                                 fx_event("onednn_conv2d_1", "fxcpp::onednn_conv2d", 1.5)]
    fx = cl.fx_nodes(trace)
    assert fx == [("onednn_conv2d", "fxcpp::onednn_conv2d", 2.1), ("max_pool2d", "fxcpp::max_pool2d", 0.1),
                  ("onednn_conv2d_1", "fxcpp::onednn_conv2d", 1.5)], fx

    pairs = cl.pair_convolutions(ort, fx)
    assert [(o[0], f[0]) for o, f in pairs] == [("/conv1/Relu_output_0_nchwc", "onednn_conv2d"),
                                               ("/conv2/Conv_output_0_nchwc", "onednn_conv2d_1")], pairs
    text = cl.table(ort, fx, "title")
    assert "| 0 | /conv1/Relu_output_0_nchwc | 16×8×3×3 | 1.002 | onednn_conv2d | 2.100 | 2.10 |" in text, text
    assert "| 1 | /conv2/Conv_output_0_nchwc | 16×16×1×1 | 2.998 | onednn_conv2d_1 | 1.500 | 0.50 |" in text, text
    assert "Convolutions: ORT 4.00 ms, fxcpp 3.60 ms (0.90)" in text, text
    assert "Other nodes, ORT: /pool/MaxPool_output_0 0.200." in text, text
    try:
        cl.pair_convolutions(ort, fx[:1])
        raise AssertionError("a count mismatch was paired")
    except ValueError as e:
        assert str(e) == "ONNX Runtime ran 2 convolutions, fxcpp 1: they cannot be paired in order", str(e)
    print("compare_layers_ort ok")


if __name__ == "__main__":
    main()
