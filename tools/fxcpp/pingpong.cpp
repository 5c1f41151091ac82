// fxcpp pingpong [--sizes 4K,64K,1M,16M] [--iters N]: the link between two
// ranks, measured with the messages the pipeline sends (header + tensor,
// Gloo send/recv): rank 0 sends a tensor, rank 1 sends it back; half the
// round trip is the one-way time. Run it under `fxcpp launch --nproc 2`, or
// on two machines with torchrun's environment, before planning a pipeline
// across them (fxcpp pipeline-plan --bandwidth).
#include "command.h"
#include "distributed_io.h"

#include <fx/distributed.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

namespace fx::cli {
namespace {

namespace dist = fx::distributed;
using Clock = std::chrono::steady_clock;

int64_t parse_size(const std::string& s) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    const std::string unit = s.substr(used);
    if (unit == "K" || unit == "k") v *= 1e3;
    else if (unit == "M" || unit == "m") v *= 1e6;
    else if (unit == "G" || unit == "g") v *= 1e9;
    else if (!unit.empty()) throw std::invalid_argument("");
    if (!(v >= 8)) throw std::invalid_argument("");
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    throw Error("--sizes expects sizes like 4K,1M,16M (at least 8 bytes), got '" + s + "'");
  }
}

int run_pingpong(const std::vector<std::string>& argv) {
  RankInfo rank;
  try {
    ModelArgs args = parse_dist_args("pingpong", argv,
                                     {{"sizes", "SIZES", "message sizes (default 4K,64K,1M,16M)"},
                                      {"iters", "N", "round trips per size (default 20)"},
                                      {"timeout", "SECONDS", "how long a rank waits for the other (default 300)"},
                                      {"json", nullptr, "print the results as one JSON object"}},
                                     true);
    std::vector<int64_t> sizes;
    std::stringstream ss(args.get("sizes", "4K,64K,1M,16M"));
    std::string item;
    while (std::getline(ss, item, ',')) sizes.push_back(parse_size(item));
    const int iters = args.get_int("iters", 20);
    join_ranks(rank, args, 2, "pingpong", "pingpong");
    dist::ProcessGroup& g = *rank.group;
    const int peer = 1 - rank.rank;
    struct Row {
      int64_t bytes;
      double one_way_ms, gbps;
    };
    std::vector<Row> rows;
    for (int64_t size : sizes) {
      dist::Message m;
      m.value = at::ones({size / 4}, at::kFloat);
      double best = std::numeric_limits<double>::infinity();
      for (int i = 0; i < iters + 2; ++i) {
        if (rank.rank == 0) {
          const auto t0 = Clock::now();
          auto s = g.send(m, peer, "a ping");
          dist::Message back = g.recv(peer, nullptr, "a pong");
          s.wait();
          const double rtt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          if (i >= 2) best = std::min(best, rtt / 2);
        } else {
          dist::Message got = g.recv(peer, nullptr, "a ping");
          g.send(got, peer, "a pong").wait();
        }
      }
      const int64_t bytes = (size / 4) * 4;
      rows.push_back({bytes, best, static_cast<double>(bytes) / best / 1e6});
    }
    g.barrier("the end");
    if (rank.rank != 0) return 0;
    if (args.has("json")) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : rows) j.push_back({{"bytes", r.bytes}, {"one_way_ms", r.one_way_ms}, {"gb_per_s", r.gbps}});
      std::cout << nlohmann::json{{"store", g.store_address()}, {"results", j}}.dump() << "\n";
      return 0;
    }
    std::printf("pingpong between rank 0 and rank 1 (Gloo, store %s), best of %d round trips:\n%12s %14s %10s\n",
                g.store_address().c_str(), iters, "bytes", "one way ms", "GB/s");
    for (const auto& r : rows)
      std::printf("%12s %14.4f %10.3f\n", format_bytes(static_cast<double>(r.bytes)).c_str(), r.one_way_ms, r.gbps);
    return 0;
  } catch (const HelpRequested&) {
    throw;
  } catch (const std::exception& e) {
    return report_rank_error("pingpong", rank, e);
  }
}

}  // namespace

FX_COMMAND("pingpong", "pingpong [--sizes 4K,1M,16M] [--iters N]",
           "measure the link between two ranks (latency, bandwidth) with the pipeline's messages", run_pingpong);

}  // namespace fx::cli
