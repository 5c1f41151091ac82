// Rendezvous (torchrun's environment, c10d TCPStore / FileStore), one
// ProcessGroupGloo, and numbered messages of structured values between ranks.
#include <fx/distributed/process_group.h>

#include "distributed/wire_format.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/exception.h>

#include <c10/util/Exception.h>
#include <glog/logging.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace fx::distributed {
using namespace wire;  // the messages' encoding (wire_format.h)
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- environment ---------------------------------------------------------

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, int fallback, int min, int max) {
  const char* v = env(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long n = std::stol(v, &used);
    if (used != std::strlen(v) || n < min || n > max) throw std::invalid_argument("");
    return static_cast<int>(n);
  } catch (const std::exception&) {
    throw Error(std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(min) + ", " +
                std::to_string(max) + "]");
  }
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

/// The local address of the route to `host` (a UDP "connect" sends nothing).
std::string route_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    throw DistributedError("cannot resolve MASTER_ADDR '" + host + "'");
  std::string out;
  for (addrinfo* a = res; a && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = {0};
      const void* src = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, src, buf, sizeof buf)) out = buf;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  if (out.empty())
    throw DistributedError("cannot find the local address that reaches MASTER_ADDR '" + host +
                           "' (set FXCPP_LOCAL_ADDR to this machine's address)");
  return out;
}

/// The message of any exception, without libtorch's backtrace, on one line.
std::string first_line(const std::exception& e) {
  std::string msg;
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) msg = c->what_without_backtrace();
  else msg = e.what();
  const size_t nl = msg.find('\n');
  if (nl != std::string::npos) msg.resize(nl);
  return msg;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

std::string seconds_text(std::chrono::milliseconds t) {
  std::ostringstream os;
  os << static_cast<double>(t.count()) / 1000.0 << " s";
  return os.str();
}

// ---- c10d logging --------------------------------------------------------

}  // namespace

bool rendezvous_env_present() { return env("RANK") || env("WORLD_SIZE"); }

RendezvousOptions rendezvous_from_env() {
  RendezvousOptions o;
  if (!env("WORLD_SIZE")) throw Error("WORLD_SIZE is not set (the rendezvous needs MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)");
  if (!env("RANK")) throw Error("RANK is not set (the rendezvous needs MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)");
  o.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 16);
  o.rank = env_int("RANK", 0, 0, o.world_size - 1);
  o.local_rank = env_int("LOCAL_RANK", o.rank, 0, 1 << 16);
  if (const char* a = env("MASTER_ADDR")) o.master_addr = a;
  o.master_port = env_int("MASTER_PORT", 29500, 1, 65535);
  if (const char* f = env("FXCPP_STORE_FILE")) o.store_file = f;
  if (const char* h = env("FXCPP_STORE_HOSTED")) o.store_hosted = std::string(h) == "1";
  if (const char* h = env("TORCHELASTIC_USE_AGENT_STORE")) o.store_hosted = o.store_hosted || std::string(h) == "True";
  if (const char* l = env("FXCPP_LOCAL_ADDR")) o.local_addr = l;
  if (const char* i = env("GLOO_SOCKET_IFNAME")) o.interface = i;
  o.timeout = std::chrono::seconds(env_int("FXCPP_DIST_TIMEOUT", 300, 1, 86400));
  return o;
}

void quiet_c10d_logging() { FLAGS_minloglevel = google::GLOG_FATAL; }

// ---- StoreServer -----------------------------------------------------------

namespace {

[[noreturn]] void port_in_use(const std::string& addr, int port) {
  throw DistributedError("MASTER_PORT " + std::to_string(port) + " on " + addr +
                         " is in use (another rendezvous or program listens there): choose another port");
}

c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& addr, int port, bool server,
                                                 std::chrono::milliseconds timeout, const std::string& who) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = server;
  o.waitWorkers = false;
  o.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(addr, o);
  } catch (const std::exception& e) {
    const std::string msg = first_line(e);
    if (contains(msg, "Address already in use") || contains(msg, "failed to listen")) port_in_use(addr, port);
    if (dynamic_cast<const c10d::TimeoutError*>(&e) || contains(msg, "timed out") || contains(msg, "Timeout"))
      throw DistributedError(who + ": no rendezvous at " + addr + ":" + std::to_string(port) + " within " +
                             seconds_text(timeout) + " (is rank 0 or fxcpp launch running there, with the same MASTER_ADDR and MASTER_PORT?)");
    throw DistributedError(who + ": cannot reach the rendezvous at " + addr + ":" + std::to_string(port) + ": " + msg);
  }
}

}  // namespace

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreServer::StoreServer(const std::string& addr, int port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->store = make_tcp_store(addr, port, true, timeout, "store server");
}
StoreServer::~StoreServer() = default;
int StoreServer::port() const { return impl_->store->getPort(); }

// ---- PendingSend / PendingRecv ---------------------------------------------

namespace {

/// What a send or receive needs to report errors.
struct Context {
  int rank = 0;
  std::chrono::milliseconds timeout{0};
};

std::string lost_text(int me, int peer, const std::string& what) {
  return "rank " + std::to_string(me) + ": lost rank " + std::to_string(peer) + " while " + what +
         " (its connection closed: the process ended or was killed)";
}

bool is_closed(const std::string& msg) {
  return contains(msg, "closed") || contains(msg, "reset") || contains(msg, "Broken pipe") || contains(msg, "EOF") ||
         contains(msg, "Connection refused");
}

[[noreturn]] void fail(const Context& c, int peer, const std::string& what, const std::exception& e) {
  if (dynamic_cast<const DistributedError*>(&e)) throw;
  const std::string msg = first_line(e);
  const std::string me = "rank " + std::to_string(c.rank);
  const std::string other = "rank " + std::to_string(peer);
  if (is_closed(msg)) throw DistributedError(lost_text(c.rank, peer, what), peer, what);
  if (contains(msg, "imed out") || contains(msg, "imeout"))
    throw DistributedError(me + ": " + other + " did not answer within " + seconds_text(c.timeout) + " while " + what +
                           " (it hangs, or the timeout is too short)");
  throw DistributedError(me + ": " + what + " failed (" + other + "): " + msg);
}

void wait_work(const c10::intrusive_ptr<c10d::Work>& work, const Context& c, int peer, const std::string& what) {
  try {
    if (!work->wait(c.timeout)) throw std::runtime_error("timed out");
  } catch (const std::exception& e) {
    fail(c, peer, what, e);
  }
}

}  // namespace

struct PendingSend::Impl {
  Context context;
  int peer = 0;
  std::string what;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::vector<at::Tensor> keep;  // header words and the tensors, alive until sent
  int64_t bytes = 0;
  bool waited = false;
};

/// Sends abandoned by a failed run: their works and buffers stay alive until
/// the process ends, so Gloo never reads memory that was freed (and the
/// failing process never waits for a peer that may be gone).
void PendingSend::abandon(std::unique_ptr<Impl> send) {
  static std::mutex mutex;
  static auto* graveyard = new std::vector<std::unique_ptr<Impl>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  graveyard->push_back(std::move(send));
}

PendingSend::PendingSend() = default;
PendingSend::~PendingSend() {
  if (impl_ && !impl_->waited) abandon(std::move(impl_));
}
PendingSend::PendingSend(PendingSend&&) noexcept = default;
PendingSend& PendingSend::operator=(PendingSend&& other) noexcept {
  if (this != &other) {
    PendingSend old(std::move(*this));
    impl_ = std::move(other.impl_);
  }
  return *this;
}
void PendingSend::wait() {
  if (!impl_ || impl_->waited) return;
  impl_->waited = true;
  try {
    for (const auto& w : impl_->works)
      wait_work(w, impl_->context, impl_->peer, "sending " + impl_->what + " to rank " + std::to_string(impl_->peer));
  } catch (...) {
    abandon(std::move(impl_));
    throw;
  }
}

bool PendingSend::wait_for(std::chrono::milliseconds limit) {
  if (!impl_ || impl_->waited) return true;
  Context c = impl_->context;
  c.timeout = limit;
  const std::string what = "sending " + impl_->what + " to rank " + std::to_string(impl_->peer);
  try {
    for (const auto& w : impl_->works) wait_work(w, c, impl_->peer, what);
  } catch (const DistributedError& e) {
    abandon(std::move(impl_));
    if (e.lost_rank() >= 0) throw;
    return false;  // not received within the limit
  }
  impl_->waited = true;
  return true;
}
int64_t PendingSend::bytes() const { return impl_ ? impl_->bytes : 0; }

struct PendingRecv::Impl {
  Context context;
  c10d::ProcessGroupGloo* pg = nullptr;
  int peer = 0;
  uint64_t seq = 0;
  std::string what;
  at::Tensor header;
  c10::intrusive_ptr<c10d::Work> header_work;
  bool done = false;
  std::atomic<bool> aborted{false};
};

PendingRecv::PendingRecv() = default;
PendingRecv::~PendingRecv() = default;
PendingRecv::PendingRecv(PendingRecv&&) noexcept = default;
PendingRecv& PendingRecv::operator=(PendingRecv&&) noexcept = default;

void PendingRecv::abort() {
  if (!impl_ || impl_->aborted.exchange(true)) return;
  try {
    impl_->header_work->abort();
  } catch (...) {
  }
}

Message PendingRecv::wait(RecvTiming* timing) {
  if (!impl_ || impl_->done) throw Error("PendingRecv::wait: nothing to receive (already received)");
  impl_->done = true;
  Impl& r = *impl_;
  const std::string what = "receiving " + r.what + " from rank " + std::to_string(r.peer);
  const auto start = Clock::now();
  auto abandoned = [&] {
    return DistributedError("rank " + std::to_string(r.context.rank) + ": abandoned " + what + " (the run failed)");
  };
  if (r.aborted) throw abandoned();
  try {
    wait_work(r.header_work, r.context, r.peer, what);
  } catch (const DistributedError&) {
    if (r.aborted) throw abandoned();
    throw;
  }
  if (r.aborted) throw abandoned();
  const double wait_ms = ms_since(start);
  const auto transfer_start = Clock::now();
  const int64_t* h = r.header.data_ptr<int64_t>();
  if (h[0] != kMagic || h[1] != kVersion)
    throw DistributedError("rank " + std::to_string(r.context.rank) + ": rank " + std::to_string(r.peer) +
                           " sent a message of another format while " + what + " (a different fxcpp version?)");
  Message m;
  const int64_t kind = h[2];
  if (kind != static_cast<int64_t>(MessageKind::Data) && kind != static_cast<int64_t>(MessageKind::Stop) &&
      kind != static_cast<int64_t>(MessageKind::Error))
    throw DistributedError("malformed message header (kind " + std::to_string(kind) + ") while " + what);
  m.kind = static_cast<MessageKind>(kind);
  m.id = h[3];
  m.count = h[4];
  m.flags = h[8];
  const int64_t words = h[5], ntensors = h[6], text_words = h[7];
  if (words < 0 || ntensors < 0 || ntensors > kMaxPieces || text_words < 0 || text_words > words)
    throw DistributedError("malformed message header while " + what);
  std::vector<int64_t> encoding(h + kFixedWords, h + kFixedWords + std::min(words, kInlineWords));
  if (words > kInlineWords) {
    at::Tensor rest = at::empty({words - kInlineWords}, at::kLong);
    std::vector<at::Tensor> v{rest};
    try {
      wait_work(r.pg->recv(v, r.peer, tag_of(r.seq, 1)), r.context, r.peer, what);
    } catch (const DistributedError&) {
      throw;
    }
    const int64_t* p = rest.data_ptr<int64_t>();
    encoding.insert(encoding.end(), p, p + (words - kInlineWords));
  }
  std::vector<at::Tensor> buffers;
  Decoder d{encoding.data(), encoding.data() + encoding.size(), &buffers};
  if (text_words > 0) m.text = d.string();
  m.value = d.value();
  if (static_cast<int64_t>(buffers.size()) != ntensors)
    throw DistributedError("malformed message header (tensor count) while " + what);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  int64_t bytes = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].numel() == 0) continue;
    std::vector<at::Tensor> v{flat_view(buffers[i])};
    bytes += buffers[i].numel() * static_cast<int64_t>(buffers[i].element_size());
    try {
      works.push_back(r.pg->recv(v, r.peer, tag_of(r.seq, static_cast<int64_t>(i) + 2)));
    } catch (const std::exception& e) {
      fail(r.context, r.peer, what, e);
    }
  }
  for (const auto& w : works) wait_work(w, r.context, r.peer, what);
  if (timing) {
    timing->wait_ms = wait_ms;
    timing->transfer_ms = ms_since(transfer_start);
    timing->bytes = bytes;
  }
  return m;
}

// ---- ProcessGroup ------------------------------------------------------------

struct ProcessGroup::Impl {
  RendezvousOptions options;
  c10::intrusive_ptr<c10d::Store> store;  // the shared store
  c10::intrusive_ptr<c10d::Store> keys;   // fxcpp's keys in it
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::vector<uint64_t> send_seq, recv_seq;
  Context context() const { return Context{options.rank, options.timeout}; }
};

ProcessGroup::ProcessGroup() : impl_(std::make_unique<Impl>()) {}
ProcessGroup::~ProcessGroup() = default;

std::shared_ptr<ProcessGroup> ProcessGroup::create(const RendezvousOptions& o) {
  if (o.world_size < 1) throw Error("world size " + std::to_string(o.world_size) + " (WORLD_SIZE must be at least 1)");
  if (o.rank < 0 || o.rank >= o.world_size)
    throw Error("rank " + std::to_string(o.rank) + " is outside [0, " + std::to_string(o.world_size) + ") (RANK, WORLD_SIZE)");
  std::shared_ptr<ProcessGroup> group(new ProcessGroup());
  Impl& g = *group->impl_;
  g.options = o;
  const std::string who = "rank " + std::to_string(o.rank);
  if (!o.store_file.empty()) {
    try {
      g.store = c10::make_intrusive<c10d::FileStore>(o.store_file, o.world_size);
    } catch (const std::exception& e) {
      throw DistributedError(who + ": cannot open the FileStore " + o.store_file + ": " + first_line(e));
    }
    g.store->setTimeout(o.timeout);
  } else {
    g.store = make_tcp_store(o.master_addr, o.master_port, o.rank == 0 && !o.store_hosted, o.timeout, who);
  }
  g.keys = c10::make_intrusive<c10d::PrefixStore>("fxcpp", g.store);
  auto pg_options = c10d::ProcessGroupGloo::Options::create(o.timeout);
  try {
    if (!o.interface.empty()) {
      pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(o.interface));
    } else {
      std::string local = o.local_addr;
      if (local.empty()) local = is_loopback(o.master_addr) ? "127.0.0.1" : route_address(o.master_addr, o.master_port);
      pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
    }
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(who + ": cannot make the Gloo device: " + first_line(e));
  }
  try {
    g.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", g.store), o.rank,
                                                       o.world_size, pg_options);
  } catch (const std::exception& e) {
    const std::string msg = first_line(e);
    if (contains(msg, "imeout") || contains(msg, "imed out"))
      throw DistributedError(who + ": the other ranks did not all join within " + seconds_text(o.timeout) +
                             " (WORLD_SIZE=" + std::to_string(o.world_size) + ")");
    throw DistributedError(who + ": cannot connect to the other ranks: " + msg);
  }
  g.send_seq.assign(static_cast<size_t>(o.world_size), 0);
  g.recv_seq.assign(static_cast<size_t>(o.world_size), 0);
  return group;
}

int ProcessGroup::rank() const { return impl_->options.rank; }
int ProcessGroup::world_size() const { return impl_->options.world_size; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->options.timeout; }
std::string ProcessGroup::who() const { return "rank " + std::to_string(rank()); }
std::string ProcessGroup::store_address() const {
  if (!impl_->options.store_file.empty()) return impl_->options.store_file;
  return impl_->options.master_addr + ":" + std::to_string(impl_->options.master_port);
}

PendingSend ProcessGroup::send(const Message& message, int dst, const std::string& what) {
  if (dst < 0 || dst >= world_size() || dst == rank())
    throw Error(who() + ": cannot send to rank " + std::to_string(dst));
  std::vector<int64_t> encoding;
  std::vector<at::Tensor> tensors;
  int64_t text_words = 0;
  if (!message.text.empty()) {
    encode_string(message.text, encoding);
    text_words = static_cast<int64_t>(encoding.size());
  }
  try {
    encode(message.value, encoding, tensors);
  } catch (const DistributedError& e) {
    throw DistributedError(who() + ": " + what + ": " + e.what());
  }
  if (static_cast<int64_t>(tensors.size()) > kMaxPieces)
    throw DistributedError(who() + ": " + what + " holds " + std::to_string(tensors.size()) + " tensors; at most " +
                           std::to_string(kMaxPieces) + " can cross in one message");
  const uint64_t seq = impl_->send_seq[static_cast<size_t>(dst)]++;
  PendingSend out;
  out.impl_ = std::make_unique<PendingSend::Impl>();
  PendingSend::Impl& s = *out.impl_;
  s.context = impl_->context();
  s.peer = dst;
  s.what = what;
  at::Tensor header = at::zeros({kHeaderWords}, at::kLong);
  int64_t* h = header.data_ptr<int64_t>();
  h[0] = kMagic;
  h[1] = kVersion;
  h[2] = static_cast<int64_t>(message.kind);
  h[3] = message.id;
  h[4] = message.count;
  h[5] = static_cast<int64_t>(encoding.size());
  h[6] = static_cast<int64_t>(tensors.size());
  h[7] = text_words;
  h[8] = message.flags;
  std::copy(encoding.begin(), encoding.begin() + std::min<int64_t>(kInlineWords, h[5]), h + kFixedWords);
  auto post = [&](const at::Tensor& t, int64_t piece) {
    std::vector<at::Tensor> v{t};
    try {
      s.works.push_back(impl_->pg->send(v, dst, tag_of(seq, piece)));
    } catch (const std::exception& e) {
      fail(s.context, dst, "sending " + what + " to rank " + std::to_string(dst), e);
    }
    s.keep.push_back(t);
  };
  post(header, 0);
  if (h[5] > kInlineWords) {
    at::Tensor rest = at::empty({h[5] - kInlineWords}, at::kLong);
    std::copy(encoding.begin() + kInlineWords, encoding.end(), rest.data_ptr<int64_t>());
    post(rest, 1);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel() == 0) continue;
    s.bytes += tensors[i].numel() * static_cast<int64_t>(tensors[i].element_size());
    post(flat_view(tensors[i]), static_cast<int64_t>(i) + 2);
    s.keep.push_back(tensors[i]);
  }
  return out;
}

PendingRecv ProcessGroup::post_recv(int src, const std::string& what) {
  if (src < 0 || src >= world_size() || src == rank())
    throw Error(who() + ": cannot receive from rank " + std::to_string(src));
  PendingRecv out;
  out.impl_ = std::make_unique<PendingRecv::Impl>();
  PendingRecv::Impl& r = *out.impl_;
  r.context = impl_->context();
  r.pg = impl_->pg.get();
  r.peer = src;
  r.seq = impl_->recv_seq[static_cast<size_t>(src)]++;
  r.what = what;
  r.header = at::empty({kHeaderWords}, at::kLong);
  std::vector<at::Tensor> v{r.header};
  try {
    r.header_work = impl_->pg->recv(v, src, tag_of(r.seq, 0));
  } catch (const std::exception& e) {
    fail(r.context, src, "receiving " + what + " from rank " + std::to_string(src), e);
  }
  return out;
}

Message ProcessGroup::recv(int src, RecvTiming* timing, const std::string& what) {
  return post_recv(src, what).wait(timing);
}

void ProcessGroup::set(const std::string& key, const std::string& value) {
  try {
    impl_->keys->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw DistributedError(who() + ": cannot write '" + key + "' to the store at " + store_address() + ": " +
                           first_line(e));
  }
}

std::string ProcessGroup::get(const std::string& key, const std::string& what) {
  try {
    const std::vector<uint8_t> v = impl_->keys->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    const std::string msg = first_line(e);
    if (contains(msg, "imeout") || contains(msg, "imed out"))
      throw DistributedError(who() + ": waited " + seconds_text(timeout()) + " for " + what);
    throw DistributedError(who() + ": lost the store at " + store_address() + " while waiting for " + what + " (" +
                           msg + ")");
  }
}

bool ProcessGroup::has(const std::string& key) {
  try {
    return impl_->keys->check({key});
  } catch (const std::exception& e) {
    throw DistributedError(who() + ": lost the store at " + store_address() + ": " + first_line(e));
  }
}

void ProcessGroup::barrier(const std::string& what) {
  try {
    auto work = impl_->pg->barrier();
    if (!work->wait(timeout())) throw std::runtime_error("timed out");
  } catch (const std::exception& e) {
    const std::string msg = first_line(e);
    if (contains(msg, "imeout") || contains(msg, "imed out"))
      throw DistributedError(who() + ": the other ranks did not reach " + what + " within " + seconds_text(timeout()));
    throw DistributedError(who() + ": " + what + " failed (a rank was lost: " + msg + ")");
  }
}

int ProcessGroup::first_lost_peer(std::chrono::milliseconds probe) {
  for (int r = 0; r < world_size(); ++r) {
    if (r == rank()) continue;
    at::Tensor t = at::empty({1}, at::kLong);
    std::vector<at::Tensor> v{t};
    try {
      auto work = impl_->pg->recv(v, r, tag_of(kSeqMask, kProbePiece));
      try {
        work->wait(probe);
      } catch (const std::exception& e) {
        if (is_closed(first_line(e))) return r;
        try {
          work->abort();
        } catch (...) {
        }
      }
    } catch (const std::exception& e) {
      if (is_closed(first_line(e))) return r;
    }
  }
  return -1;
}

DistributedError ProcessGroup::lost(int peer, const std::string& doing) const {
  return DistributedError(lost_text(rank(), peer, doing), peer, doing);
}

// ---- collectives ---------------------------------------------------------------

struct PendingCollective::Impl {
  ProcessGroup* group = nullptr;
  std::string what;
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor tensor;  // alive until Gloo is done with it
  std::shared_ptr<std::atomic<int64_t>> finished = std::make_shared<std::atomic<int64_t>>(0);
  bool waited = false;
};

PendingCollective::PendingCollective() = default;
PendingCollective::~PendingCollective() {
  // Never free a tensor under Gloo: a collective not waited for (a failed step) is kept.
  if (impl_ && !impl_->waited) {
    static std::mutex mutex;
    static auto* graveyard = new std::vector<std::unique_ptr<Impl>>();  // never destroyed
    std::lock_guard<std::mutex> lock(mutex);
    graveyard->push_back(std::move(impl_));
  }
}
PendingCollective::PendingCollective(PendingCollective&&) noexcept = default;
PendingCollective& PendingCollective::operator=(PendingCollective&& other) noexcept {
  PendingCollective old(std::move(*this));
  impl_ = std::move(other.impl_);
  return *this;
}

bool PendingCollective::pending() const { return impl_ && !impl_->waited; }

std::chrono::steady_clock::time_point PendingCollective::finished_at() const {
  const int64_t ns = impl_ ? impl_->finished->load() : 0;
  return Clock::time_point(std::chrono::nanoseconds(ns));
}

namespace {

[[noreturn]] void collective_failed(ProcessGroup& group, const std::string& what, const std::exception& e) {
  if (dynamic_cast<const DistributedError*>(&e)) throw;
  const std::string msg = first_line(e);
  if (is_closed(msg)) {
    const int peer = group.first_lost_peer();
    if (peer >= 0) throw group.lost(peer, what);
    throw DistributedError(group.who() + ": lost a rank while " + what + " (" + msg + ")");
  }
  if (contains(msg, "imed out") || contains(msg, "imeout"))
    throw DistributedError(group.who() + ": the other ranks did not join " + what + " within " +
                           seconds_text(group.timeout()) + " (a rank hangs, or the timeout is too short)");
  throw DistributedError(group.who() + ": " + what + " failed: " + msg);
}

}  // namespace

void PendingCollective::wait() {
  if (!impl_ || impl_->waited) return;
  Impl& c = *impl_;
  try {
    if (!c.work->wait(c.group->timeout())) throw std::runtime_error("timed out");
  } catch (const std::exception& e) {
    collective_failed(*c.group, c.what, e);  // impl_ stays unwaited: kept alive by the destructor
  }
  c.waited = true;
  if (c.finished->load() == 0) c.finished->store(Clock::now().time_since_epoch().count());
  c.tensor = at::Tensor();
}

PendingCollective ProcessGroup::allreduce_sum(const at::Tensor& tensor, const std::string& what) {
  PendingCollective out;
  out.impl_ = std::make_unique<PendingCollective::Impl>();
  auto& c = *out.impl_;
  c.group = this;
  c.what = what;
  c.tensor = tensor;
  std::vector<at::Tensor> v{tensor};
  try {
    c.work = impl_->pg->allreduce(v);
  } catch (const std::exception& e) {
    c.waited = true;
    collective_failed(*this, what, e);
  }
  // Gloo's thread records when it is done (the all-reduce's end, not when this rank looks).
  auto finished = c.finished;
  c.work->getFuture()->addCallback(
      [finished](c10::ivalue::Future&) { finished->store(Clock::now().time_since_epoch().count()); });
  return out;
}

void ProcessGroup::broadcast(const at::Tensor& tensor, int root, const std::string& what) {
  std::vector<at::Tensor> v{tensor};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  try {
    if (!impl_->pg->broadcast(v, o)->wait(timeout())) throw std::runtime_error("timed out");
  } catch (const std::exception& e) {
    collective_failed(*this, what, e);
  }
}

}  // namespace fx::distributed
