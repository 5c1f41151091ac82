#pragma once
/// \file
/// OperatorSupport: which nodes a backend supports (torch.fx
/// `passes/operator_support.py`), the question CapabilityBasedPartitioner asks.
///
/// An OperatorSupportBase answers is_node_supported(submodules, node).
/// OperatorSupport answers from a support dict keyed by the node's target
/// name (get_node_target: "aten::add" for call_function, the method name for
/// call_method, torch::nn::Module::name() for call_module), optionally
/// restricted to argument dtypes read from `meta["tensor_meta"]`.
/// create_op_support wraps a function; chain / any_chain combine checks with
/// all / any; OpSupports holds torch.fx's two ready-made checks.
///
/// Differences from torch.fx: submodules are passed as the module's
/// named_modules() computed once (torch.fx rebuilds that dict for every
/// node); a dtype check on an argument without tensor_meta throws fx::Error
/// naming the node (torch.fx raises a bare KeyError on meta["type"]);
/// any_chain (torch.fx 2.x) is provided as well.

#include <fx/error.h>
#include <fx/graph_module.h>

#include <c10/core/ScalarType.h>
#include <torch/ordered_dict.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace fx {

/// A module's named_modules(): qualified name -> module ("" is the root).
using SubmoduleMap = torch::OrderedDict<std::string, std::shared_ptr<torch::nn::Module>>;

/// The dtypes allowed for one argument.
using DTypes = std::vector<c10::ScalarType>;
/// torch.fx SupportedArgumentDTypes: per positional argument the allowed
/// dtypes (nullopt: not checked), per keyword the allowed dtypes. The
/// support dict maps a target to nullopt when any dtype is fine.
using SupportedArgumentDTypes = std::optional<std::pair<std::vector<std::optional<DTypes>>, std::map<std::string, DTypes>>>;
/// Target name -> supported argument dtypes (torch.fx SupportDict).
using SupportDict = std::unordered_map<std::string, SupportedArgumentDTypes>;

/// The name OperatorSupport looks a node up by (torch.fx get_node_target):
/// the target for call_function ("aten::add") and call_method ("view"), the
/// module's type name (torch::nn::Module::name(), e.g. "torch::nn::LinearImpl")
/// for call_module. Throws fx::Error for other opcodes or a missing module.
std::string get_node_target(const SubmoduleMap& submodules, const Node* node);

/// Whether a backend supports a node (torch.fx OperatorSupportBase).
class OperatorSupportBase {
 public:
  virtual ~OperatorSupportBase() = default;
  /// True if `node` is supported; `submodules` is the module's named_modules().
  virtual bool is_node_supported(const SubmoduleMap& submodules, const Node* node) const = 0;
};

/// Support from a dict of target names (torch.fx OperatorSupport).
class OperatorSupport : public OperatorSupportBase {
 public:
  /// Supports exactly the targets in `support_dict`, with their dtype rules.
  explicit OperatorSupport(SupportDict support_dict = {});
  /// Nodes that are not call_* are supported; call_* nodes are supported
  /// when their target is in the dict and every checked node argument has
  /// an allowed dtype (read from its meta["tensor_meta"]).
  bool is_node_supported(const SubmoduleMap& submodules, const Node* node) const override;
  /// The dict.
  const SupportDict& support_dict() const { return support_dict_; }

 private:
  SupportDict support_dict_;
};

/// A function with is_node_supported's signature (torch.fx IsNodeSupported).
using IsNodeSupported = std::function<bool(const SubmoduleMap& submodules, const Node* node)>;

/// Wraps a function as an OperatorSupportBase (torch.fx create_op_support).
std::shared_ptr<OperatorSupportBase> create_op_support(IsNodeSupported is_node_supported);
/// Supported when every one of `op_support` says so (torch.fx chain).
std::shared_ptr<OperatorSupportBase> chain(std::vector<std::shared_ptr<OperatorSupportBase>> op_support);
/// Supported when any one of `op_support` says so (torch.fx any_chain).
std::shared_ptr<OperatorSupportBase> any_chain(std::vector<std::shared_ptr<OperatorSupportBase>> op_support);

/// torch.fx OpSupports: atomic checks to combine with chain().
struct OpSupports {
  /// Declines a node if any input (other than get_attr) has dtype `dtype`.
  static std::shared_ptr<OperatorSupportBase> decline_if_input_dtype(c10::ScalarType dtype);
  /// Declines a node whose name is in `disallow_set`.
  static std::shared_ptr<OperatorSupportBase> decline_if_node_in_names(std::unordered_set<std::string> disallow_set);
};

}  // namespace fx
