#pragma once
/// \file
/// The inference optimiser is a layer of its own (fxcpp_optimize,
/// include/fx/optimize/): this path stays so that existing code builds.
#include <fx/optimize/fold_batch_norm.h>
