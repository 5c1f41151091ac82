// Printing a graph as torch.fx does: str(graph) and print_tabular().
#include <fx/graph.h>

#include <iostream>
#include <ostream>

namespace fx {

std::string Graph::str() const {
  std::string s = "graph():";
  for (Node* n : nodes()) s += "\n    " + n->format_node();
  return s;
}

std::ostream& operator<<(std::ostream& os, const Graph& graph) { return os << graph.str(); }

std::string Graph::tabular() const {
  // tabulate's "simple" format: columns two spaces apart, dashes under the
  // headers, trailing blanks dropped; each column at least its header + 2 wide.
  std::vector<std::vector<std::string>> rows = {{"opcode", "name", "target", "args", "kwargs"}};
  for (Node* n : nodes()) {
    rows.push_back({to_string(n->op()), n->name(), n->target(), Argument::tuple(n->args()).repr(),
                    Argument::dict(n->kwargs()).repr()});
  }
  // tabulate pads every column to at least its header + 2 (MIN_PADDING).
  std::vector<size_t> width(5, 0);
  for (size_t c = 0; c < 5; ++c) width[c] = rows[0][c].size() + 2;
  for (const auto& r : rows)
    for (size_t c = 0; c < 5; ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) s += "  ";
      s += cells[c] + std::string(width[c] - cells[c].size(), ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(rows[0]);
  std::vector<std::string> dashes;
  for (size_t w : width) dashes.push_back(std::string(w, '-'));
  out += line(dashes);
  for (size_t i = 1; i < rows.size(); ++i) out += line(rows[i]);
  return out;
}

void Graph::print_tabular(std::ostream& os) const { os << tabular(); }

void Graph::print_tabular() const { print_tabular(std::cout); }

}  // namespace fx
