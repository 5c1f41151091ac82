#pragma once
/// \file
/// Every pass of fxcpp (torch.fx.passes and friends); see README "Transforming graphs".

#include <fx/passes/const_fold.h>
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>
#include <fx/passes/fold_batch_norm.h>
#include <fx/passes/fold_conv_add_mul.h>
#include <fx/passes/freeze.h>
#include <fx/passes/fuser_utils.h>
#include <fx/passes/graph_drawer.h>
#include <fx/passes/lower_to_onednn.h>
#include <fx/passes/model_summary.h>
#include <fx/passes/normalize.h>
#include <fx/passes/operator_support.h>
#include <fx/passes/optimize_for_inference.h>
#include <fx/passes/partitioner.h>
#include <fx/passes/pass_manager.h>
#include <fx/passes/profiler.h>
#include <fx/passes/reinplace.h>
#include <fx/passes/remove_dropout.h>
#include <fx/passes/remove_noops.h>
#include <fx/passes/shape_prop.h>
#include <fx/passes/split_module.h>
#include <fx/passes/split_utils.h>
#include <fx/passes/subgraph_matcher.h>
#include <fx/passes/subgraph_rewriter.h>
