#pragma once
/// \file
/// The inference optimiser (library fxcpp_optimize, between the passes and
/// the frontends): optimize_for_inference and the passes it is made of,
/// each usable alone — freeze_modules, fold_batch_norm, fold_conv_add_mul,
/// lower_to_onednn, reinplace. See docs/optimize.md.

#include <fx/optimize/fold_batch_norm.h>
#include <fx/optimize/fold_conv_add_mul.h>
#include <fx/optimize/freeze.h>
#include <fx/optimize/lower_to_onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/optimize/reinplace.h>
