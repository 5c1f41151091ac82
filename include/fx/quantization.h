#pragma once
/// \file
/// Int8 quantization (torch.ao.quantization's FX workflow):
/// QConfig / QConfigMapping, observers, fuse, prepare, convert to the
/// reference quantized graph. See the headers under fx/quantization/.
///
///     auto prepared = fx::quantization::prepare(gm, fx::quantization::get_default_qconfig_mapping("onednn"), {x});
///     for (auto& batch : calibration) prepared->forward({batch});
///     auto reference = fx::quantization::convert(prepared);   // examples/quantize.cpp
///
/// or all of it in one call, lowered to oneDNN's int8 kernels (quantize.h):
///
///     auto int8 = fx::quantization::quantize(gm, {x}, fx::quantization::load_calibration("calib.pt"));
///
/// Quantization-aware training (fake-quantized training, then the same convert; qat.h):
///
///     auto qat = fx::quantization::prepare_qat(gm, fx::quantization::get_default_qat_qconfig_mapping("onednn"), {x});
///
/// Dynamic quantization of linear layers (no calibration), as quantize_dynamic:
///
///     auto int8 = fx::quantization::quantize_dynamic(gm);    // fx/quantization/quantize_dynamic.h

#include <fx/quantization/convert.h>
#include <fx/quantization/fake_quantize.h>
#include <fx/quantization/fuse.h>
#include <fx/quantization/lower.h>
#include <fx/quantization/observers.h>
#include <fx/quantization/prepare.h>
#include <fx/quantization/qat.h>
#include <fx/quantization/qconfig.h>
#include <fx/quantization/quantize.h>
#include <fx/quantization/quantize_dynamic.h>
