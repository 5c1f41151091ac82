// PipelineRunner (GPipe fill-drain) and DataParallelRunner over numbered
// messages of fx::distributed::ProcessGroup (see fx/distributed/runner.h).
#include <fx/distributed/microbatch.h>
#include <fx/distributed/runner.h>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <thread>

namespace fx::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// An exception as one line: its first line, and the node it was executing.
std::string describe(const std::exception& e) {
  std::string msg;
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) msg = c->what_without_backtrace();
  else msg = e.what();
  std::string node;
  const size_t at = msg.find("While executing ");
  if (at != std::string::npos) {
    node = msg.substr(at + 16);
    node = node.substr(0, std::min(node.find(" : "), node.find('\n')));
    msg.erase(at);
  }
  const size_t nl = msg.find('\n');
  if (nl != std::string::npos) msg.resize(nl);
  while (!msg.empty() && (msg.back() == ' ' || msg.back() == '\n')) msg.pop_back();
  if (!node.empty()) msg += " (while executing " + node + ")";
  return msg;
}

Message data(int64_t id, int64_t count, c10::IValue value, int64_t flags = 0) {
  Message m;
  m.kind = MessageKind::Data;
  m.id = id;
  m.count = count;
  m.value = std::move(value);
  m.flags = flags;
  return m;
}

Message stop_message(bool aborted) {
  Message m;
  m.kind = MessageKind::Stop;
  m.id = aborted ? 1 : 0;
  return m;
}

Message error_message(const std::string& text, int64_t id) {
  Message m;
  m.kind = MessageKind::Error;
  m.id = id;
  m.text = text;
  return m;
}

void add(RankTimes& t, const RecvTiming& r) {
  t.recv_wait_ms += r.wait_ms;
  t.recv_transfer_ms += r.transfer_ms;
  t.bytes_in += r.bytes;
}

void wait_all(std::deque<PendingSend>& sends, RankTimes& t) {
  const auto start = Clock::now();
  while (!sends.empty()) {
    t.bytes_out += sends.front().bytes();
    sends.front().wait();
    sends.pop_front();
  }
  t.send_wait_ms += ms_since(start);
}

std::vector<c10::IValue> tuple_items(const c10::IValue& v) {
  if (!v.isTuple()) return {v};
  const auto& e = v.toTupleRef().elements();
  return std::vector<c10::IValue>(e.begin(), e.end());
}

/// A microbatch (or shard) computed since `t0`: its time and count, then the
/// runner's on_microbatch hook.
void count_microbatch(RankTimes& t, Clock::time_point t0, const std::function<void(int64_t)>& on_microbatch) {
  t.compute_ms += ms_since(t0);
  ++t.microbatches;
  if (on_microbatch) on_microbatch(t.microbatches);
}

/// A runner's destructor: on rank 0, stops the other ranks if stop() was not
/// called, swallowing any error.
template <typename Runner>
void stop_if_running(Runner& runner, const std::shared_ptr<ProcessGroup>& group, bool stopped) {
  if (group && group->rank() == 0 && !stopped) {
    try {
      runner.stop();
    } catch (...) {
    }
  }
}

/// A runner's reset_times(): fresh times for this rank; rank 0 has every
/// other rank reset too at the start of its next run.
void reset_rank_times(RankTimes& t, bool& reset_pending, const std::shared_ptr<ProcessGroup>& group) {
  t = RankTimes();
  t.rank = group ? group->rank() : 0;
  reset_pending = group && group->rank() == 0;
}

/// A runner's stop(): only rank 0 stops (else throws `not_rank_0`), and only
/// once. The stop message goes to rank 1 (which passes it on), or with
/// `every_rank` to each other rank, and each send is waited for: after a
/// failure (`aborted`) a peer may be gone or hung, so not for long.
void stop_ranks(const std::shared_ptr<ProcessGroup>& group, bool& stopped, bool aborted, bool every_rank,
                const char* not_rank_0) {
  if (group && group->rank() != 0) throw Error(not_rank_0);
  if (stopped) return;
  stopped = true;
  if (!group) return;
  const int end = every_rank ? group->world_size() : std::min(group->world_size(), 2);
  std::vector<PendingSend> sends;
  for (int r = 1; r < end; ++r) sends.push_back(group->send(stop_message(aborted), r, "the stop message"));
  for (auto& s : sends) s.wait_for(aborted ? std::chrono::milliseconds(5000) : group->timeout());
}

}  // namespace

// ---- RankTimes ---------------------------------------------------------------

std::string RankTimes::to_json() const {
  nlohmann::json j = {{"rank", rank},
                      {"microbatches", microbatches},
                      {"compute_ms", compute_ms},
                      {"recv_wait_ms", recv_wait_ms},
                      {"recv_transfer_ms", recv_transfer_ms},
                      {"send_wait_ms", send_wait_ms},
                      {"bytes_in", bytes_in},
                      {"bytes_out", bytes_out},
                      {"output_wait_ms", output_wait_ms},
                      {"output_transfer_ms", output_transfer_ms},
                      {"wall_ms", wall_ms},
                      {"runs", runs}};
  return j.dump();
}

RankTimes RankTimes::from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    RankTimes t;
    t.rank = j.at("rank").get<int>();
    t.microbatches = j.at("microbatches").get<int64_t>();
    t.compute_ms = j.at("compute_ms").get<double>();
    t.recv_wait_ms = j.at("recv_wait_ms").get<double>();
    t.recv_transfer_ms = j.at("recv_transfer_ms").get<double>();
    t.send_wait_ms = j.at("send_wait_ms").get<double>();
    t.bytes_in = j.at("bytes_in").get<int64_t>();
    t.bytes_out = j.at("bytes_out").get<int64_t>();
    t.output_wait_ms = j.at("output_wait_ms").get<double>();
    t.output_transfer_ms = j.at("output_transfer_ms").get<double>();
    t.wall_ms = j.at("wall_ms").get<double>();
    t.runs = j.at("runs").get<int64_t>();
    return t;
  } catch (const std::exception& e) {
    throw Error(std::string("malformed rank times: ") + e.what());
  }
}

std::vector<RankTimes> gather_times(ProcessGroup& group, const RankTimes& mine, const std::string& key) {
  if (group.rank() != 0) {
    group.set(key + "/" + std::to_string(group.rank()), mine.to_json());
    return {mine};
  }
  std::vector<RankTimes> all = {mine};
  for (int r = 1; r < group.world_size(); ++r)
    all.push_back(RankTimes::from_json(group.get(key + "/" + std::to_string(r), "rank " + std::to_string(r) + "'s times")));
  return all;
}

// ---- PipelineRunner --------------------------------------------------------------

PipelineRunner::PipelineRunner(std::shared_ptr<ProcessGroup> group, PipelineStage stage)
    : group_(std::move(group)), stage_(std::move(stage)) {
  if (!stage_.module) throw Error("PipelineRunner: stage " + std::to_string(stage_.index) + " has no module");
  if (!group_) {
    if (stage_.num_stages != 1 || stage_.index != 0)
      throw Error("PipelineRunner: stage " + std::to_string(stage_.index) + " of " + std::to_string(stage_.num_stages) +
                  " needs a process group");
    return;
  }
  if (stage_.num_stages != group_->world_size())
    throw Error("a pipeline of " + std::to_string(stage_.num_stages) + " stages needs " + std::to_string(stage_.num_stages) +
                " ranks, and WORLD_SIZE is " + std::to_string(group_->world_size()) + " (one stage per rank)");
  if (stage_.index != group_->rank())
    throw Error(group_->who() + " was given stage " + std::to_string(stage_.index) + " (rank k runs stage k)");
  times_.rank = group_->rank();
}

PipelineRunner::~PipelineRunner() { stop_if_running(*this, group_, stopped_); }

void PipelineRunner::reset_times() { reset_rank_times(times_, reset_pending_, group_); }

void PipelineRunner::stop() {
  stop_ranks(group_, stopped_, broken_, /*every_rank=*/false, "PipelineRunner::stop: only rank 0 stops the pipeline");
}

c10::IValue PipelineRunner::run(const std::vector<c10::IValue>& inputs, int64_t microbatches) {
  return run_stream({inputs}, microbatches).at(0);
}

std::vector<c10::IValue> PipelineRunner::run_stream(const std::vector<std::vector<c10::IValue>>& batches,
                                                    int64_t microbatches) {
  if (group_ && group_->rank() != 0) throw Error("PipelineRunner::run: only rank 0 feeds the pipeline (the others serve())");
  if (stopped_ || broken_) throw Error("PipelineRunner::run: the pipeline was stopped");
  if (batches.empty()) throw Error("PipelineRunner::run_stream: no batches");
  torch::NoGradGuard no_grad;
  const auto start = Clock::now();
  // Every batch's microbatches, one after another: the pipeline fills once and drains once.
  std::vector<std::vector<c10::IValue>> mbs;
  std::vector<size_t> batch_end;
  for (const auto& b : batches) {
    for (auto& mb : split_microbatches(b, microbatches)) mbs.push_back(std::move(mb));
    batch_end.push_back(mbs.size());
  }
  const int64_t m = static_cast<int64_t>(mbs.size());
  const int world = group_ ? group_->world_size() : 1;
  std::vector<c10::IValue> outputs;
  if (world == 1) {
    for (auto& mb : mbs) {
      const auto t0 = Clock::now();
      outputs.push_back(stage_.module->forward(std::move(mb)));
      count_microbatch(times_, t0, on_microbatch_);
    }
  } else {
    // The outputs are received on a thread of their own while this one
    // computes and sends, so that they arrive as soon as the last rank sends them.
    std::vector<PendingRecv> results;
    for (int64_t i = 0; i < m; ++i) results.push_back(group_->post_recv(world - 1, "microbatch " + std::to_string(i) + "'s output"));
    std::vector<Message> received(static_cast<size_t>(m));
    std::vector<RecvTiming> timings(static_cast<size_t>(m));
    std::exception_ptr receive_error;
    int64_t received_count = 0;
    std::thread receiver([&] {
      try {
        for (int64_t i = 0; i < m; ++i) {
          received[static_cast<size_t>(i)] = results[static_cast<size_t>(i)].wait(&timings[static_cast<size_t>(i)]);
          received_count = i + 1;
          if (received[static_cast<size_t>(i)].kind != MessageKind::Data) break;
        }
      } catch (...) {
        receive_error = std::current_exception();
      }
    });
    struct Joiner {
      std::thread& t;
      std::vector<PendingRecv>& pending;
      bool abort = true;
      ~Joiner() {
        if (abort)
          for (auto& p : pending) p.abort();
        if (t.joinable()) t.join();
      }
    } joiner{receiver, results};
    std::deque<PendingSend> sends;
    for (int64_t i = 0; i < m; ++i) {
      const auto t0 = Clock::now();
      c10::IValue y;
      try {
        y = stage_.module->forward(std::move(mbs[static_cast<size_t>(i)]));
      } catch (const std::exception& e) {
        broken_ = true;
        const std::string why = "rank 0 (stage 0) failed on microbatch " + std::to_string(i) + ": " + describe(e);
        try {
          wait_all(sends, times_);
          stop();
        } catch (...) {
        }
        throw DistributedError(why);
      }
      count_microbatch(times_, t0, on_microbatch_);
      const int64_t flags = i == 0 && reset_pending_ ? kResetTimes : 0;
      sends.push_back(group_->send(data(i, m, std::move(y), flags), 1, "microbatch " + std::to_string(i) + "'s activations"));
    }
    reset_pending_ = false;
    const auto collect = Clock::now();
    joiner.abort = false;
    receiver.join();
    times_.output_wait_ms += ms_since(collect);  // rank 0 idle, waiting for the last outputs
    for (int64_t i = 0; i < m; ++i) {
      const RecvTiming& t = timings[static_cast<size_t>(i)];
      if (i >= received_count) {
        broken_ = true;
        if (!receive_error) throw DistributedError("rank 0: microbatch " + std::to_string(i) + "'s output never came");
        try {
          std::rethrow_exception(receive_error);
        } catch (const DistributedError& e) {
          // The last rank may have stopped because a rank before it died: name the first one lost.
          if (e.lost_rank() > 0) {
            const int first = group_->first_lost_peer();
            if (first > 0 && first < e.lost_rank()) throw group_->lost(first, e.doing());
          }
          throw;
        }
      }
      Message& msg = received[static_cast<size_t>(i)];
      times_.output_transfer_ms += t.transfer_ms;
      times_.bytes_in += t.bytes;
      if (msg.kind == MessageKind::Error) {
        broken_ = true;
        try {
          wait_all(sends, times_);
          stop();
        } catch (...) {
        }
        throw DistributedError(msg.text);
      }
      if (msg.kind != MessageKind::Data || msg.id != i) {
        broken_ = true;
        throw DistributedError("rank 0: expected microbatch " + std::to_string(i) + "'s output from rank " +
                               std::to_string(world - 1) + ", got " +
                               (msg.kind == MessageKind::Data ? "microbatch " + std::to_string(msg.id) : std::string("a stop")));
      }
      outputs.push_back(std::move(msg.value));
    }
    wait_all(sends, times_);
  }
  std::vector<c10::IValue> out;
  size_t begin = 0;
  for (size_t end : batch_end) {
    out.push_back(concat_microbatches(std::vector<c10::IValue>(outputs.begin() + static_cast<std::ptrdiff_t>(begin),
                                                               outputs.begin() + static_cast<std::ptrdiff_t>(end))));
    begin = end;
  }
  times_.wall_ms += ms_since(start);
  ++times_.runs;
  return out;
}

bool PipelineRunner::serve() {
  const int rank = group_ ? group_->rank() : 0;
  if (rank == 0) throw Error("PipelineRunner::serve: rank 0 feeds the pipeline with run()");
  torch::NoGradGuard no_grad;
  const int world = group_->world_size();
  const int src = rank - 1;
  const int dst = rank == world - 1 ? 0 : rank + 1;
  const bool last = rank == world - 1;
  const std::string sending = last ? "'s output" : "'s activations";
  std::deque<PendingSend> sends;
  bool failed = false;
  // The next input is received on another thread while this one computes
  // the current (its transfer then overlaps the computation).
  PendingRecv next = group_->post_recv(src, "the next microbatch");
  RecvTiming t;
  auto receive = [&next, &t] { return next.wait(&t); };
  std::future<Message> incoming = std::async(std::launch::async, receive);
  struct AbortOnError {
    PendingRecv& next;
    std::future<Message>& incoming;
    ~AbortOnError() {
      if (incoming.valid()) {
        next.abort();
        try {
          incoming.get();
        } catch (...) {
        }
      }
    }
  } guard{next, incoming};
  for (;;) {
    const auto w0 = Clock::now();
    Message msg = incoming.get();
    const double waited = ms_since(w0);
    if (msg.flags & kResetTimes) reset_times();
    times_.recv_wait_ms += waited;
    times_.recv_transfer_ms += t.transfer_ms;
    times_.bytes_in += t.bytes;
    if (msg.kind == MessageKind::Stop) {
      wait_all(sends, times_);
      if (!last) group_->send(msg, dst, "the stop message").wait();
      return !failed && msg.id == 0;
    }
    next = group_->post_recv(src, "the next microbatch");
    incoming = std::async(std::launch::async, receive);
    if (msg.kind == MessageKind::Error) {
      failed = true;
      sends.push_back(group_->send(msg, dst, "an error report"));
      continue;
    }
    if (failed) continue;  // drain until rank 0 stops the pipeline
    const std::string mb = "microbatch " + std::to_string(msg.id);
    const auto t0 = Clock::now();
    c10::IValue y;
    try {
      y = stage_.module->forward(stage_inputs(stage_, msg.value));
    } catch (const std::exception& e) {
      failed = true;
      sends.push_back(group_->send(error_message("rank " + std::to_string(rank) + " (stage " + std::to_string(rank) +
                                                     ") failed on " + mb + ": " + describe(e),
                                                 msg.id),
                                   dst, "an error report"));
      continue;
    }
    count_microbatch(times_, t0, on_microbatch_);
    sends.push_back(group_->send(data(msg.id, msg.count, std::move(y), msg.flags), dst, mb + sending));
    if (msg.id == msg.count - 1) {
      wait_all(sends, times_);  // the run's last microbatch: its sends complete before the next run
      ++times_.runs;
    }
  }
}

// ---- DataParallelRunner ----------------------------------------------------------

DataParallelRunner::DataParallelRunner(std::shared_ptr<ProcessGroup> group, std::shared_ptr<GraphModule> module)
    : group_(std::move(group)), module_(std::move(module)) {
  if (!module_) throw Error("DataParallelRunner: no module");
  times_.rank = group_ ? group_->rank() : 0;
}

DataParallelRunner::~DataParallelRunner() { stop_if_running(*this, group_, stopped_); }

void DataParallelRunner::reset_times() { reset_rank_times(times_, reset_pending_, group_); }

void DataParallelRunner::stop() {
  stop_ranks(group_, stopped_, broken_, /*every_rank=*/true, "DataParallelRunner::stop: only rank 0 stops the others");
}

c10::IValue DataParallelRunner::run(const std::vector<c10::IValue>& inputs) {
  if (group_ && group_->rank() != 0) throw Error("DataParallelRunner::run: only rank 0 scatters the batch (the others serve())");
  if (stopped_ || broken_) throw Error("DataParallelRunner::run: stopped");
  torch::NoGradGuard no_grad;
  const auto start = Clock::now();
  const int world = group_ ? group_->world_size() : 1;
  std::vector<std::vector<c10::IValue>> shards = split_microbatches(inputs, world);
  std::deque<PendingSend> sends;
  std::vector<PendingRecv> results;
  for (int r = 1; r < world; ++r) {
    results.push_back(group_->post_recv(r, "shard " + std::to_string(r) + "'s output"));
    sends.push_back(group_->send(data(r, world, c10::ivalue::Tuple::create(shards[static_cast<size_t>(r)]),
                                      reset_pending_ ? kResetTimes : 0),
                                 r, "shard " + std::to_string(r)));
  }
  reset_pending_ = false;
  std::vector<c10::IValue> outputs;
  const auto t0 = Clock::now();
  try {
    outputs.push_back(module_->forward(std::move(shards[0])));
  } catch (const std::exception& e) {
    broken_ = true;
    const std::string why = "rank 0 failed on shard 0: " + describe(e);
    try {
      for (auto& r : results) r.wait();
      wait_all(sends, times_);
      stop();
    } catch (...) {
    }
    throw DistributedError(why);
  }
  count_microbatch(times_, t0, on_microbatch_);
  std::string error;
  for (int r = 1; r < world; ++r) {
    RecvTiming t;
    Message msg;
    try {
      msg = results[static_cast<size_t>(r - 1)].wait(&t);
    } catch (...) {
      broken_ = true;
      throw;
    }
    times_.output_wait_ms += t.wait_ms;
    times_.output_transfer_ms += t.transfer_ms;
    times_.bytes_in += t.bytes;
    if (msg.kind == MessageKind::Error) {
      if (error.empty()) error = msg.text;
      continue;
    }
    outputs.push_back(std::move(msg.value));
  }
  wait_all(sends, times_);
  if (!error.empty()) {
    broken_ = true;
    try {
      stop();
    } catch (...) {
    }
    throw DistributedError(error);
  }
  c10::IValue out = concat_microbatches(outputs);
  times_.wall_ms += ms_since(start);
  ++times_.runs;
  return out;
}

bool DataParallelRunner::serve() {
  const int rank = group_ ? group_->rank() : 0;
  if (rank == 0) throw Error("DataParallelRunner::serve: rank 0 scatters the batch with run()");
  torch::NoGradGuard no_grad;
  std::deque<PendingSend> sends;
  bool failed = false;
  for (;;) {
    RecvTiming t;
    Message msg = group_->recv(0, &t, "the next shard");
    wait_all(sends, times_);
    if (msg.flags & kResetTimes) reset_times();
    add(times_, t);
    if (msg.kind == MessageKind::Stop) return !failed && msg.id == 0;
    if (msg.kind != MessageKind::Data) continue;
    const auto t0 = Clock::now();
    c10::IValue y;
    try {
      y = module_->forward(tuple_items(msg.value));
    } catch (const std::exception& e) {
      failed = true;
      sends.push_back(group_->send(error_message("rank " + std::to_string(rank) + " failed on its shard: " + describe(e), msg.id),
                                   0, "an error report"));
      continue;
    }
    count_microbatch(times_, t0, on_microbatch_);
    ++times_.runs;
    sends.push_back(group_->send(data(msg.id, msg.count, std::move(y)), 0, "its shard's output"));
  }
}

}  // namespace fx::distributed
