#pragma once
/// \file
/// Every pass of fxcpp: torch.fx.passes and friends (fxcpp_passes, docs/passes.md),
/// and the inference optimiser's (fxcpp_optimize, fx/optimize.h).

#include <fx/optimize.h>
#include <fx/passes/common.h>
#include <fx/passes/const_fold.h>
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>
#include <fx/passes/fuser_utils.h>
#include <fx/passes/graph_drawer.h>
#include <fx/passes/graph_manipulation.h>
#include <fx/passes/model_summary.h>
#include <fx/passes/net_min_base.h>
#include <fx/passes/normalize.h>
#include <fx/passes/operator_support.h>
#include <fx/passes/partitioner.h>
#include <fx/passes/pass_manager.h>
#include <fx/passes/profiler.h>
#include <fx/passes/remove_dropout.h>
#include <fx/passes/remove_noops.h>
#include <fx/passes/shape_prop.h>
#include <fx/passes/split_module.h>
#include <fx/passes/split_utils.h>
#include <fx/passes/splitter_base.h>
#include <fx/passes/subgraph_matcher.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/passes/tools_common.h>
