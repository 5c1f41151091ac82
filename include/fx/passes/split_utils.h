#pragma once
/// \file
/// split_by_tags and attribute helpers (torch.fx `passes/split_utils.py`).
///
/// split_by_tags cuts a GraphModule into one submodule per tag: every
/// call_module / call_function / call_method node carries a tag, nodes of a
/// tag go to the submodule named after it, and the new top-level graph calls
/// the submodules in the order of `tags`. Placeholders become inputs where
/// they are used, get_attr nodes are copied into every submodule that reads
/// them, and values crossing a submodule boundary become its inputs and
/// outputs (several outputs are unpacked with operator.getitem), exactly as
/// torch.fx builds them.
///
/// Differences from torch.fx: a node's tag lives in `node->meta()["tag"]`
/// (a std::string; torch.fx uses a `node.tag` attribute) or comes from a
/// function you pass. Where torch.fx fails with a bare `assert` (a node
/// without a tag, a tag not in `tags`, a tag ordered before one of its
/// inputs' tags) fxcpp throws fx::Error naming the node. The input module is
/// never modified.

#include <fx/error.h>
#include <fx/graph_module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fx {

/// Reads a node's tag (split_by_tags). Return "" for "no tag".
using TagFn = std::function<std::string(const Node* node)>;

/// The tag stored in node->meta()["tag"] (a std::string), or "" if none.
std::string get_tag(const Node* node);
/// Stores `tag` in node->meta()["tag"] (torch.fx: `node.tag = tag`).
void set_tag(Node* node, std::string tag);

/// Whether `from` has a submodule, parameter or buffer at the dotted
/// `qualified_name` (torch.fx getattr_recursive(...) is not None).
bool has_attr_recursive(const torch::nn::Module& from, const std::string& qualified_name);

/// torch.fx setattr_recursive(to, to_name, getattr_recursive(from, from_name)):
/// installs the submodule, parameter or buffer found at `from_name` in
/// `from` at the dotted `to_name` of `to`, creating empty parent modules.
/// The object is shared, not copied; a parameter stays a parameter. Throws
/// fx::Error if `from` has nothing at `from_name`.
void copy_attr_recursive(const torch::nn::Module& from, const std::string& from_name, torch::nn::Module& to,
                         const std::string& to_name);

/// Splits `gm` by node tags (torch.fx split_by_tags). Components are made in
/// the order of `tags` (each a submodule named after its tag, even if no
/// node carries it); `tag_of` reads a node's tag (default: get_tag). Throws
/// fx::Error naming the node when a callable node has no tag, a tag not in
/// `tags`, or a tag that comes before the tag of one of its inputs.
std::shared_ptr<GraphModule> split_by_tags(const std::shared_ptr<GraphModule>& gm, const std::vector<std::string>& tags,
                                           const TagFn& tag_of = nullptr);

}  // namespace fx
