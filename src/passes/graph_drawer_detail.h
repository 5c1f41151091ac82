#pragma once
// Internal: what graph_drawer.cpp (DOT, SVG) and graph_drawer_html.cpp (the
// interactive page) share.

#include <fx/passes/graph_drawer.h>

#include <string>
#include <vector>

namespace fx::drawer_detail {

/// "(1, 3, 224, 224)", Python's tuple repr of a shape.
std::string shape_repr(const std::vector<int64_t>& shape);

/// The heat-map colour of a time share in [0, 1], "#rrggbb": white → yellow → red.
std::string heat_color(double share);

/// Total and largest microseconds over the drawn graph's nodes (0 when no times are set).
struct TimeRange {
  double total_us = 0;
  double max_us = 0;
};
TimeRange time_range(const FxGraphDrawer& drawer);

/// The nodes drawn, in graph order (get_attr left out with ignore_getattr).
std::vector<const Node*> drawn_nodes(const FxGraphDrawer& drawer);

}  // namespace fx::drawer_detail
