#pragma once
/// \file
/// Rendezvous and messages between ranks over c10d's ProcessGroupGloo (the
/// engine torch.distributed runs on; libtorch ships it), as torchrun sets
/// them up.
///
/// Rendezvous: every rank reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
/// (and LOCAL_RANK) from its environment (rendezvous_from_env), meets the
/// others through a c10d TCPStore on MASTER_ADDR:MASTER_PORT (rank 0 serves
/// it, unless `fxcpp launch` hosts it already: FXCPP_STORE_HOSTED=1, what
/// torchrun calls TORCHELASTIC_USE_AGENT_STORE) or a c10d FileStore on a
/// shared file (FXCPP_STORE_FILE), and builds one ProcessGroupGloo. Each
/// rank's Gloo device binds the address it reaches MASTER_ADDR from
/// (createDeviceForHostname with that address, never Gloo's default lookup
/// of the machine's hostname), so the same command works on 127.0.0.1 and
/// across machines; FXCPP_LOCAL_ADDR overrides it, GLOO_SOCKET_IFNAME names
/// an interface instead.
///
/// Messages: a value (tensors, tuples, lists, ints, floats, bools, strings,
/// None) goes from one rank to another as a small header (its structure,
/// dtypes, sizes and strides) followed by one Gloo send per tensor, straight
/// from the tensor's memory (a channels_last activation is sent as it is
/// laid out, and arrives so). Messages between two ranks are numbered; each
/// side must send and receive them in the same order (what the pipeline and
/// data-parallel runners do).
///
/// Failures are DistributedError, one line naming this rank, the peer and
/// what was going on: a peer that died (its connection closed), a peer that
/// sent nothing within the timeout, a port in use, a rendezvous that did not
/// complete in time.

#include <fx/error.h>

#include <ATen/core/ivalue.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fx::distributed {

/// A distributed run failed: a lost or silent peer, a bad rendezvous, a
/// remote stage's error. what() is one line.
class DistributedError : public Error {
 public:
  using Error::Error;
  /// A peer lost while `doing` ("receiving microbatch 3's output from rank 2").
  DistributedError(const std::string& what, int lost_rank, std::string doing)
      : Error(what), lost_rank_(lost_rank), doing_(std::move(doing)) {}
  /// The rank whose connection closed, or -1 (another failure).
  int lost_rank() const { return lost_rank_; }
  /// What this rank was doing when it noticed.
  const std::string& doing() const { return doing_; }

 private:
  int lost_rank_ = -1;
  std::string doing_;
};

/// Where and how ranks meet.
struct RendezvousOptions {
  /// MASTER_ADDR: where the store listens (rank 0's machine, or the launcher's).
  std::string master_addr = "127.0.0.1";
  /// MASTER_PORT.
  int master_port = 29500;
  /// RANK: this process, 0 .. world_size - 1.
  int rank = 0;
  /// WORLD_SIZE: how many ranks.
  int world_size = 1;
  /// LOCAL_RANK: the rank among those on this machine (informational).
  int local_rank = 0;
  /// A c10d FileStore on this (shared) file instead of the TCPStore (FXCPP_STORE_FILE).
  std::string store_file;
  /// The TCPStore server runs elsewhere (fxcpp launch hosts it): rank 0 joins as a client.
  bool store_hosted = false;
  /// The address this rank's Gloo device binds (FXCPP_LOCAL_ADDR); empty:
  /// 127.0.0.1 when MASTER_ADDR is a loopback address, else the local
  /// address of the route to MASTER_ADDR.
  std::string local_addr;
  /// GLOO_SOCKET_IFNAME: bind the device to this interface instead of an address.
  std::string interface;
  /// How long the rendezvous, and every wait for a peer, may take before it
  /// is an error (FXCPP_DIST_TIMEOUT, seconds).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

/// Whether the environment holds a rendezvous (RANK and WORLD_SIZE set).
bool rendezvous_env_present();

/// The rendezvous torchrun's environment describes: MASTER_ADDR (default
/// 127.0.0.1), MASTER_PORT (default 29500), RANK, WORLD_SIZE, LOCAL_RANK,
/// and fxcpp's FXCPP_STORE_FILE, FXCPP_STORE_HOSTED, FXCPP_LOCAL_ADDR,
/// GLOO_SOCKET_IFNAME, FXCPP_DIST_TIMEOUT. Throws fx::Error naming the
/// variable that is missing or malformed (a RANK outside [0, WORLD_SIZE) ...).
RendezvousOptions rendezvous_from_env();

/// Turns c10d's and Gloo's own log lines (glog: "[c10d] The server socket
/// has failed to bind ...") off for the process, so a failure is reported
/// once, by DistributedError. Process-wide; the command line calls it.
void quiet_c10d_logging();

/// A TCPStore server, what `fxcpp launch` hosts for its ranks (as torchrun's
/// agent does): port 0 picks a free port, with no window in which another
/// program could take it.
class StoreServer {
 public:
  /// Listens on `addr`:`port` (0: a free port). Throws DistributedError when
  /// the port is in use.
  explicit StoreServer(const std::string& addr = "127.0.0.1", int port = 0,
                       std::chrono::milliseconds timeout = std::chrono::seconds(300));
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  /// The port it listens on.
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What a message is.
enum class MessageKind : int64_t {
  Data = 1,   ///< a value (an activation, an input shard, an output)
  Stop = 2,   ///< no more messages; `id` 1 when the run was aborted
  Error = 3,  ///< a rank failed; `text` says why
};

/// Message::flags: the ranks reset their times before this message (rank 0's
/// reset_times() reaches every rank with the next run).
constexpr int64_t kResetTimes = 1;

/// One message between two ranks.
struct Message {
  MessageKind kind = MessageKind::Data;
  /// What the sender numbers it (the microbatch index in a pipeline run).
  int64_t id = 0;
  /// A second number (how many microbatches the run has).
  int64_t count = 0;
  /// Bits for the receiver (the runners: kResetTimes).
  int64_t flags = 0;
  /// The value (Data).
  c10::IValue value;
  /// Why (Error).
  std::string text;
};

/// Time and bytes of one received message.
struct RecvTiming {
  /// Waiting for the header: the sender had not sent yet (it was computing).
  double wait_ms = 0;
  /// From the header to the last tensor: the transfer itself.
  double transfer_ms = 0;
  /// Bytes of tensor data.
  int64_t bytes = 0;
};

/// A message being sent; its tensors stay alive until wait() returns.
class PendingSend {
 public:
  PendingSend();
  ~PendingSend();
  PendingSend(PendingSend&&) noexcept;
  PendingSend& operator=(PendingSend&&) noexcept;
  /// Blocks until the peer has received it (or throws DistributedError).
  void wait();
  /// As wait(), for at most `limit`: false if the peer has not received it by
  /// then (the send is abandoned). A PendingSend destroyed without a wait is
  /// abandoned too: its buffers are kept alive, never freed under Gloo.
  bool wait_for(std::chrono::milliseconds limit);
  /// Bytes of tensor data.
  int64_t bytes() const;

 private:
  friend class ProcessGroup;
  struct Impl;
  static void abandon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A message being received: its header receive is posted (so the sender's
/// header is taken in while this rank computes); wait() receives the rest.
class PendingRecv {
 public:
  PendingRecv();
  ~PendingRecv();
  PendingRecv(PendingRecv&&) noexcept;
  PendingRecv& operator=(PendingRecv&&) noexcept;
  /// Waits for the whole message; throws DistributedError on a lost or
  /// silent peer, or a malformed header. May run on another thread than the
  /// one that posted it (a rank receives its next input while it computes).
  Message wait(RecvTiming* timing = nullptr);
  /// Makes a wait() in progress (or the next) throw DistributedError at once
  /// (the run is being abandoned); callable from any thread.
  void abort();

 private:
  friend class ProcessGroup;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A collective in flight (an all-reduce of ProcessGroupGloo, run by Gloo's
/// own threads while this rank computes), as torch.distributed's Work.
class PendingCollective {
 public:
  PendingCollective();
  ~PendingCollective();
  PendingCollective(PendingCollective&&) noexcept;
  PendingCollective& operator=(PendingCollective&&) noexcept;
  /// Blocks until every rank has contributed and the result is in the
  /// tensor; throws DistributedError (a lost peer, the timeout).
  void wait();
  /// Whether it is running (posted and not yet waited for).
  bool pending() const;
  /// When Gloo finished it (steady clock); valid after wait().
  std::chrono::steady_clock::time_point finished_at() const;

 private:
  friend class ProcessGroup;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One ProcessGroupGloo, its store, and numbered messages between ranks.
/// Not thread-safe: one thread per rank talks through it.
class ProcessGroup {
 public:
  /// Meets the other ranks (rendezvous) and builds the process group. Throws
  /// DistributedError: the port is in use (rank 0 serving the store), the
  /// store cannot be reached or the others do not come within the timeout.
  static std::shared_ptr<ProcessGroup> create(const RendezvousOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int world_size() const;
  std::chrono::milliseconds timeout() const;
  /// "127.0.0.1:29500" (or the FileStore's path).
  std::string store_address() const;

  /// Starts sending `message` to `dst` (returns at once); `what` names it
  /// in errors ("microbatch 3's activations"). Throws DistributedError for a
  /// value that cannot be sent (a dict, an object ...).
  PendingSend send(const Message& message, int dst, const std::string& what = "a message");
  /// Posts the receive of the next message from `src`.
  PendingRecv post_recv(int src, const std::string& what = "a message");
  /// Receives the next message from `src`.
  Message recv(int src, RecvTiming* timing = nullptr, const std::string& what = "a message");

  /// Sets a key of the store (shared by all ranks).
  void set(const std::string& key, const std::string& value);
  /// Reads a key of the store, waiting up to the timeout for it to be set;
  /// `what` says in the error what the key was waited for.
  std::string get(const std::string& key, const std::string& what);
  /// Whether the key is set.
  bool has(const std::string& key);
  /// Every rank reaches this point (Gloo barrier) or DistributedError.
  void barrier(const std::string& what = "the barrier");

  /// Starts summing `tensor` (dense, contiguous) over every rank in place
  /// (c10d allreduce, SUM; every rank ends with the same bytes) and returns
  /// at once. Every rank must start the same collectives in the same order;
  /// `what` names it in errors ("gradient bucket 2").
  PendingCollective allreduce_sum(const at::Tensor& tensor, const std::string& what);
  /// Makes every rank's `tensor` rank `root`'s (c10d broadcast), waiting for it.
  void broadcast(const at::Tensor& tensor, int root, const std::string& what);

  /// The lowest rank whose connection to this one has closed (it died), or
  /// -1; waits up to `probe` per rank. After a lost peer, it tells the rank
  /// that died first from those that stopped because of it.
  int first_lost_peer(std::chrono::milliseconds probe = std::chrono::milliseconds(50));
  /// The DistributedError for `peer` lost while `doing`.
  DistributedError lost(int peer, const std::string& doing) const;

  /// "rank 1" (for messages).
  std::string who() const;

 private:
  ProcessGroup();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Whether two values are equal bit for bit: the same structure, and tensors
/// of the same dtype, sizes and bytes (NaNs included).
bool bitwise_equal(const c10::IValue& a, const c10::IValue& b);

/// The largest absolute difference between the tensors of two values of the
/// same structure (infinity if the structures differ).
double max_abs_difference(const c10::IValue& a, const c10::IValue& b);

}  // namespace fx::distributed
