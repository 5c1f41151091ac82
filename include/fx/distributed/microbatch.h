#pragma once
/// \file
/// Microbatches: a batch of inputs cut along dim 0, and outputs put back
/// together (what torch.distributed.pipelining's split_args_kwargs_into_chunks
/// and merge_chunks do with the default chunking).
///
/// The batch size is dim 0 of the first tensor among the inputs (looking
/// into tuples and lists, depth first). Every tensor whose dim 0 has that
/// size is cut into `chunks` consecutive pieces (at::tensor_split: the first
/// batch % chunks pieces one row longer; views, no copies); every other
/// value (a mask without a batch dimension, an int, None) goes to each
/// microbatch whole. Outputs are concatenated along dim 0 tensor by tensor
/// (tuples and lists keep their structure); other values (and 0-dim tensors)
/// are taken from the first microbatch.
///
/// Batch-dependent kernels (a convolution whose algorithm depends on the
/// batch size) can round differently on a microbatch than on the whole
/// batch, so a pipeline's output is compared bit for bit with
/// microbatched_forward, the single-process forward on the same microbatches.

#include <fx/graph_module.h>

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace fx::distributed {

/// The batch size of `inputs` (see the file comment); throws fx::Error when
/// no input is a tensor with a dim 0.
int64_t batch_size(const std::vector<c10::IValue>& inputs);

/// `inputs` cut into `chunks` microbatches. Throws fx::Error when chunks < 1
/// or the batch has fewer rows than chunks.
std::vector<std::vector<c10::IValue>> split_microbatches(const std::vector<c10::IValue>& inputs, int64_t chunks);

/// The microbatches' outputs as one output (see the file comment); throws
/// fx::Error when their structures differ.
c10::IValue concat_microbatches(const std::vector<c10::IValue>& outputs);

/// The single-process reference of a microbatched run: gm.forward on each
/// microbatch, in order, concatenated.
c10::IValue microbatched_forward(GraphModule& gm, const std::vector<c10::IValue>& inputs, int64_t chunks);

}  // namespace fx::distributed
