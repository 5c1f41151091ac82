#pragma once
// Internal: the TorchScript → fx::Graph importer.
//
// It runs the TorchScript graph of forward symbolically, the way
// torch.fx.symbolic_trace runs Python code: every TorchScript value gets an
// import-time value (Val) — a constant known now (ints, bools, attributes, the
// training flag), a node of the new graph (a run-time value), a submodule, a
// function, or a list / tuple / dict built at import time whose items are
// Vals (as a Python list is during tracing). Operators on constants are
// evaluated now; operators on run-time values become nodes; calls into
// non-leaf modules and functions are run recursively (inlined); prim::If and
// prim::Loop are folded when their conditions are constants.

#include <fx/import.h>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace fx::import_detail {

/// A submodule seen during import.
struct ModuleRef {
  torch::jit::Module module;
  std::string path;       ///< qualified name from the root ("" for the root)
  std::string type_name;  ///< demangled class name
};

/// The import-time value of a TorchScript value.
struct Val {
  enum class Kind { Constant, Symbolic, Module, Function, List, Tuple, Dict, Object };
  Kind kind = Kind::Constant;
  c10::IValue constant;                         ///< Constant
  Argument symbolic;                            ///< Symbolic: a Node*
  std::shared_ptr<const ModuleRef> module;      ///< Module
  torch::jit::Function* function = nullptr;     ///< Function
  std::shared_ptr<std::vector<Val>> items;      ///< List (shared by aliases), Tuple
  std::shared_ptr<std::vector<std::pair<Val, Val>>> entries;  ///< Dict
  c10::TypePtr type;  ///< Symbolic: the TorchScript type of the value that made it (int[], not Optional[int[]])
  c10::ClassTypePtr class_type;                                     ///< Object: its TorchScript class
  std::shared_ptr<std::vector<std::pair<std::string, Val>>> fields;  ///< Object: attributes (shared by aliases)

  static Val of_constant(c10::IValue v);
  static Val of_node(Node* n);
  static Val of_list(std::vector<Val> items);
  static Val of_tuple(std::vector<Val> items);
};

/// "__torch__.torchvision.models.detection.image_list.ImageList": a class's
/// qualified name, without the compilation unit repr_str() adds.
inline std::string class_name_of(const c10::ClassTypePtr& type) {
  return type->name() ? type->name()->qualifiedName() : type->str();
}

/// torch.nn's TransformerEncoderLayer / TransformerDecoderLayer (demangled names).
bool is_transformer_layer_type(const std::string& type_name);
/// Those and TransformerEncoder / TransformerDecoder: not leaves (is_torch_nn_leaf).
bool is_opened_transformer_type(const std::string& type_name);
/// torch.nn.MultiheadAttention.
bool is_attention_type(const std::string& type_name);

/// Imports one TorchScript module; use once.
class Importer {
 public:
  Importer(const torch::jit::Module& root, const ImportOptions& options);
  /// Builds the graph and the GraphModule.
  std::shared_ptr<GraphModule> run();
  /// Builds the graph only.
  std::shared_ptr<Graph> build_graph();

 private:
  struct Frame {
    std::unordered_map<const torch::jit::Value*, Val> env;
    std::string function_name;             // "forward", "_forward_impl", "relu"
    std::string qualified_name;            // "__torch__.torch.nn.functional.relu"
    std::shared_ptr<const ModuleRef> self;  // the module whose method runs (may be null)
    const Frame* caller = nullptr;
    const torch::jit::Node* call_site = nullptr;  // in the caller
  };

  std::vector<Val> call_graph(const torch::jit::Graph& graph, std::vector<Val> inputs, std::string function_name,
                              std::shared_ptr<const ModuleRef> self, const Frame* caller,
                              const torch::jit::Node* call_site, std::string qualified_name);
  void run_block(const torch::jit::Block* block, Frame& f);
  void run_node(const torch::jit::Node* n, Frame& f);

  // Node kinds with their own rules.
  void get_attr(const torch::jit::Node* n, Frame& f);
  void call_method(const torch::jit::Node* n, Frame& f);
  void call_function(const torch::jit::Node* n, Frame& f);
  void run_if(const torch::jit::Node* n, Frame& f);
  void run_loop(const torch::jit::Node* n, Frame& f);
  void unpack(const torch::jit::Node* n, Frame& f);
  bool run_special(const torch::jit::Node* n, Frame& f);
  // Objects of TorchScript classes (objects.cpp).
  void create_object(const torch::jit::Node* n, Frame& f);
  Val object_val(const c10::IValue& object);
  void set_attr(const torch::jit::Node* n, Frame& f);
  bool get_object_attr(const torch::jit::Node* n, Frame& f);
  bool call_object_method(const torch::jit::Node* n, Frame& f);
  // Lists and dicts changed in place (aggregates.cpp).
  bool run_mutation(const torch::jit::Node* n, Frame& f);
  bool mutable_constant_args(const torch::jit::Node* n, Frame& f);
  void unfreeze(const torch::jit::Value* v, Frame& f);
  void run_operator(const torch::jit::Node* n, Frame& f);
  bool try_emit_assert(const torch::jit::Node* n, Frame& f, const Val& cond);

  // Control flow kept as sub-GraphModules (control_flow_import.cpp).
  /// What a run-time if / loop takes from the code around it.
  struct Capture {
    std::vector<const torch::jit::Value*> free;  ///< TorchScript values used inside, defined outside
    std::vector<Node*> operands;                 ///< the nodes of this graph those values hold
  };
  /// A branch or loop body built as a graph of its own, made a GraphModule by run().
  struct PendingSubgraph {
    std::string name;                            ///< the call_module target ("cond_0", "loop_1")
    bool is_loop = false;
    std::vector<std::shared_ptr<Graph>> graphs;  ///< (true, false) or (body)
    size_t count = 0;                            ///< results of a cond, carried values of a loop
  };
  void emit_cond(const torch::jit::Node* n, Frame& f, const Val& cond);
  void emit_loop(const torch::jit::Node* n, Frame& f, int64_t first_iteration = 0,
                 std::optional<std::vector<Val>> loop_inputs = std::nullopt);
  Capture capture(const torch::jit::Node* n, Frame& f);
  /// `lifted`: nodes of enclosing graphs the block reads other than through
  /// its free values (a module attribute a forward assigned, read in a
  /// function the block calls), each a placeholder after cap's; shared by
  /// the two branches of a conditional (those the first lifted come first).
  std::shared_ptr<Graph> import_block(const torch::jit::Block* block, Frame& f, const Capture& cap,
                                      std::vector<Node*>& lifted, int64_t first_iteration = 0);
  /// `a` with every node of an enclosing graph replaced by a placeholder of
  /// the graph being built (added once per node, its operand appended to the
  /// subgraph's `lifted`): a value a branch or loop body reads from outside
  /// becomes one of its inputs. As is outside subgraphs.
  Argument local(const Argument& a);
  ArgList local(const ArgList& args);
  /// Adds a placeholder for `outer` after graph's last one.
  Node* add_operand_placeholder(Graph& graph, Node* outer);
  Val substitute(const Val& v, const std::unordered_map<const Node*, Node*>& map) const;
  Node* materialize(const torch::jit::Value* v, Frame& f, const torch::jit::Node* user);
  std::string fresh_module_name(const std::string& stem);
  void bind_results(const torch::jit::Node* n, Node* node, Frame& f);
  std::shared_ptr<torch::nn::Module> attach_subgraphs(const std::shared_ptr<torch::nn::Module>& mirror);

  // Ranks and dtypes from ImportOptions::example_inputs (example_meta.cpp).
  std::optional<c10::IValue> meta_value(Node* n);
  std::optional<c10::IValue> compute_meta(Node* n);
  bool fold_with_example(const torch::jit::Node* n, Frame& f);
  void guard_example_inputs();

  // torch.nn's transformer layers written out (transformer_import.cpp).
  /// A mask argument: no node when absent; its dtype and rank, known at import.
  struct MaskInfo {
    Node* node = nullptr;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    int64_t rank = 0;
  };
  /// `m`'s forward on `args` (self not included) as its eager slow path when
  /// it is one of torch.nn's transformer classes this importer writes out;
  /// nullopt when it is not (the caller imports it as usual).
  std::optional<std::vector<Val>> open_transformer(const std::shared_ptr<const ModuleRef>& m,
                                                   const std::vector<Val>& args, const torch::jit::Node* n, Frame& f);
  std::optional<Val> open_attention(const std::shared_ptr<const ModuleRef>& m, const std::vector<Val>& args,
                                    const torch::jit::Node* n, Frame& f);
  /// Calls method `name` of `m` as a TorchScript call would: a leaf's
  /// forward is a call_module, anything else is inlined.
  Val call_module_method(const std::shared_ptr<const ModuleRef>& m, const std::string& name, std::vector<Val> args,
                         const torch::jit::Node* n, Frame& f);
  std::shared_ptr<const ModuleRef> child_module(const std::shared_ptr<const ModuleRef>& m, const std::string& name);
  Val module_tensor(const std::shared_ptr<const ModuleRef>& m, const std::string& name, const torch::jit::Node* n,
                    Frame& f);
  /// An Optional[Tensor] or bool input of the graph whose example value (or
  /// default) is None / a bool: that constant, checked by a torch._assert
  /// when the graph runs; `v` otherwise.
  Val settle_input(const Val& v, const std::string& what, const torch::jit::Node* n, Frame& f);
  /// What is known of a mask now; nullopt when it is present but its dtype is
  /// not known; fails on dtypes eager rejects.
  std::optional<MaskInfo> mask_info(const Val& v, const std::string& what, const std::shared_ptr<const ModuleRef>& m,
                                    const torch::jit::Node* n, Frame& f);

  /// Attention on batch-major [N, L, E] inputs (the same node thrice:
  /// self-attention, one in_proj linear), heads split, masks applied, out_proj.
  struct Attention {
    Node *xq = nullptr, *xk = nullptr, *xv = nullptr;
    Argument w_in, b_in, w_out, b_out;
    int64_t heads = 1, head_dim = 1;
    MaskInfo attn, kpm;
    bool unbatched = false;  ///< the key padding mask is [S]
    double dropout = 0;      ///< of the attention weights (training)
  };
  /// The output [N, L, E] and the attention weights [N, H, L, S].
  std::pair<Node*, Node*> emit_attention(const Attention& a, const torch::jit::Node* n, Frame& f);
  /// aten::_transformer_encoder_layer_fwd / _native_multi_head_attention
  /// (traced fast paths), written out; false when not one of them or with a mask.
  bool expand_fused_transformer(const torch::jit::Node* n, Frame& f);
  Node* aten_op(const std::string& name, const char* overload, ArgList args, const torch::jit::Node* n, Frame& f);
  static Argument int_list(const std::vector<int64_t>& v);
  /// A tensor's rank: from rank_hints_, else its meta value (example inputs).
  std::optional<int64_t> rank_of(Node* x);
  std::unordered_map<const Node*, int64_t> rank_hints_;  ///< ranks known without meta tensors (layer outputs)

  bool is_leaf(const ModuleRef& m);
  const Val& value(const torch::jit::Value* v, Frame& f, const torch::jit::Node* user);
  void bind(const torch::jit::Value* v, Val val, Frame& f) {
    if (val.kind == Val::Kind::Symbolic && !val.type) val.type = v->type();
    f.env[v] = std::move(val);
  }
  Argument to_argument(const Val& v, const torch::jit::Node* n, Frame& f);
  bool is_constant(const Val& v) const;
  c10::IValue to_ivalue(const Val& v, const c10::TypePtr& type) const;
  Node* emit(const std::string& target, ArgList args, Kwargs kwargs, const torch::jit::Node* n, Frame& f);
  Val getitem(const Val& v, int64_t i, const torch::jit::Node* n, Frame& f);
  std::string message_text(const torch::jit::Value* v, Frame& f, int depth = 0);
  [[noreturn]] void fail(const torch::jit::Node* n, const Frame& f, const std::string& what) const;

  torch::jit::Module root_;
  ImportOptions options_;
  std::shared_ptr<Graph> graph_;
  std::unordered_map<std::string, bool> leaf_cache_;
  std::vector<PendingSubgraph> subgraphs_;
  std::unordered_map<std::string, size_t> next_module_index_;  ///< per stem: cond_0, cond_1 ... loop_0 ...
  size_t subgraph_depth_ = 0;  ///< > 0 while a branch or loop body is built
  /// Per branch or body being built (innermost last): the graph it is built
  /// in, outer node → placeholder, and its lifted operands.
  struct LiftScope {
    Graph* parent;
    std::unordered_map<Node*, Node*> placeholders;
    std::vector<Node*>* lifted;
  };
  std::vector<LiftScope> lift_scopes_;
  std::unordered_map<Node*, size_t> root_placeholders_;      ///< forward's inputs → example_inputs index
  std::unordered_map<const Node*, Node*> placeholder_origin_;     ///< a subgraph operand → the outer node
  std::unordered_map<const Node*, std::optional<c10::IValue>> meta_;  ///< lazily computed example values
  bool folded_with_example_ = false;
  std::unordered_map<const c10::ivalue::Object*, Val> objects_;  ///< attribute objects, one Val each
  std::unordered_map<std::string, Val> module_attr_writes_;  ///< "path.name" → the value a forward assigned
  size_t unrolled_ = 0;
  size_t depth_ = 0;
};

}  // namespace fx::import_detail
