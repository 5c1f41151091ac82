// draw_joint_graph: the joint graph coloured by its partition (functorch's
// partitioners.draw_joint_graph), drawn by FxGraphDrawer.
#include <fx/aot.h>
#include <fx/error.h>
#include <fx/passes/graph_drawer.h>

#include <unordered_set>

namespace fx {

void draw_joint_graph(const PartitionedGraphs& partition, const std::string& path, const std::string& name) {
  if (!partition.joint || !partition.forward || !partition.backward)
    throw Error("draw_joint_graph: the partition has no joint, forward or backward graph");
  auto names = [](const GraphModule& gm) {
    std::unordered_set<std::string> out;
    for (Node* n : gm.graph().nodes())
      if (n->op() == Opcode::CallFunction || n->op() == Opcode::GetAttr) out.insert(n->name());
    return out;
  };
  const std::unordered_set<std::string> fw = names(*partition.forward), bw = names(*partition.backward);
  const std::unordered_set<std::string> saved(partition.saved.begin(), partition.saved.end());
  const std::unordered_set<std::string> recomputed(partition.recomputed.begin(), partition.recomputed.end());
  const char* kForward = "#cfe2f3";
  const char* kBackward = "#fce5cd";
  const char* kSaved = "#ea9999";
  const char* kRecomputed = "#b6d7a8";
  std::unordered_map<const Node*, std::string> colors;
  for (Node* n : partition.joint->graph().nodes()) {
    if (saved.count(n->name())) colors[n] = kSaved;
    else if (recomputed.count(n->name())) colors[n] = kRecomputed;
    else if (fw.count(n->name())) colors[n] = kForward;
    else if (bw.count(n->name())) colors[n] = kBackward;
  }
  FxGraphDrawer drawer(partition.joint, name);
  drawer.set_node_colors(std::move(colors), {{kForward, "forward"},
                                             {kSaved, "saved for backward"},
                                             {kRecomputed, "recomputed in backward"},
                                             {kBackward, "backward"}});
  drawer.write(path);
}

}  // namespace fx
