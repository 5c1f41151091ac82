#pragma once
/// \file
/// The whole public API of fxcpp: the IR, execution, the passes, tracing,
/// TorchScript import, tensor files, saving, loading, export, quantization, distributed execution
/// and training graphs (make_fx, aot_module). (tests/core/umbrella_test.cpp checks
/// that every public header is reachable from here.)

#include <fx/aot.h>
#include <fx/argument.h>
#include <fx/control_flow.h>
#include <fx/decoders.h>
#include <fx/distributed.h>
#include <fx/error.h>
#include <fx/export.h>
#include <fx/fused_sgd.h>
#include <fx/gradient_ready_hook.h>
#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/load_library.h>
#include <fx/memory_plan.h>
#include <fx/meta_kernels.h>
#include <fx/module_attributes.h>
#include <fx/node.h>
#include <fx/normalize.h>
#include <fx/onednn.h>
#include <fx/onednn_int8.h>
#include <fx/optimize.h>
#include <fx/optimizer_in_backward.h>
#include <fx/passes.h>
#include <fx/quantization.h>
#include <fx/safetensors.h>
#include <fx/serialize.h>
#include <fx/shape_guard.h>
#include <fx/target.h>
#include <fx/tensor_file.h>
#include <fx/tensor_meta.h>
#include <fx/torchscript.h>
#include <fx/trace.h>
