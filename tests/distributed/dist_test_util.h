#pragma once
// Helpers of the distributed tests: a small resnet-like model, ranks as
// threads of this process (each with its own ProcessGroupGloo over a TCPStore
// on 127.0.0.1), and the fxcpp command line run as child processes.

#include "fx_paths.h"

#include <fx/distributed.h>
#include <fx/graph_module.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dist_test {

namespace dist = fx::distributed;

/// A resnet-like GraphModule: a stem, `blocks` residual blocks of two
/// convolutions with batch norm, global pooling and a classifier (27 call
/// nodes for 3 blocks), in eval mode, weights from `seed`.
inline std::shared_ptr<fx::GraphModule> small_resnet(int seed = 0, int blocks = 3, int64_t channels = 8) {
  torch::manual_seed(seed);
  auto root = std::make_shared<torch::nn::Module>("SmallResNet");
  auto bn = [&](const std::string& name) {
    torch::nn::BatchNorm2d b(channels);
    b->running_mean.uniform_(-0.2, 0.2);
    b->running_var.uniform_(0.5, 1.5);
    b->weight.data().uniform_(0.5, 1.5);
    b->bias.data().uniform_(-0.2, 0.2);
    root->register_module(name, b.ptr());
  };
  auto conv = [&](const std::string& name, int64_t in) {
    root->register_module(name, torch::nn::Conv2d(torch::nn::Conv2dOptions(in, channels, 3).padding(1).bias(false)).ptr());
  };
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  conv("conv1", 3);
  bn("bn1");
  fx::Node* h = g->call_function("aten::relu", {g->call_module("bn1", {g->call_module("conv1", {x})})});
  for (int b = 0; b < blocks; ++b) {
    const std::string p = "layer" + std::to_string(b);
    conv(p + "_conv_a", channels);
    bn(p + "_bn_a");
    conv(p + "_conv_b", channels);
    bn(p + "_bn_b");
    fx::Node* a = g->call_function("aten::relu", {g->call_module(p + "_bn_a", {g->call_module(p + "_conv_a", {h})})});
    fx::Node* c = g->call_module(p + "_bn_b", {g->call_module(p + "_conv_b", {a})});
    h = g->call_function("aten::relu", {g->call_function("aten::add", {c, h})});
  }
  fx::Node* pooled = g->call_function("aten::adaptive_avg_pool2d", {h, fx::Argument::list({int64_t{1}, int64_t{1}})});
  fx::Node* flat = g->call_function("aten::flatten", {pooled, int64_t{1}});
  root->register_module("fc", torch::nn::Linear(channels, 10).ptr());
  g->output(g->call_module("fc", {flat}));
  root->eval();
  return std::make_shared<fx::GraphModule>(root, g);
}

/// A batch of `n` images for small_resnet.
inline at::Tensor images(int64_t n, int seed = 1, int64_t size = 12) {
  torch::manual_seed(seed);
  return at::randn({n, 3, size, size});
}

/// Runs fn(rank, group) on `world` threads, each a rank with its own
/// ProcessGroup over a TCPStore this function hosts on 127.0.0.1 (a free
/// port). Rethrows the first exception of any rank (after all finished).
inline void run_ranks(int world, const std::function<void(int, std::shared_ptr<dist::ProcessGroup>)>& fn,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30), std::vector<std::string>* errors = nullptr) {
  dist::quiet_c10d_logging();
  dist::StoreServer store("127.0.0.1", 0, timeout);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> failures(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        dist::RendezvousOptions o;
        o.master_addr = "127.0.0.1";
        o.master_port = store.port();
        o.rank = r;
        o.world_size = world;
        o.store_hosted = true;
        o.timeout = timeout;
        auto group = dist::ProcessGroup::create(o);
        fn(r, group);
      } catch (...) {
        failures[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (errors) {
    for (auto& f : failures) {
      if (!f) {
        errors->push_back("");
        continue;
      }
      try {
        std::rethrow_exception(f);
      } catch (const std::exception& e) {
        errors->push_back(e.what());
      }
    }
    return;
  }
  for (auto& f : failures)
    if (f) std::rethrow_exception(f);
}

/// A TCP port on 127.0.0.1 that is free now (bound to port 0, then released).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A socket listening on 127.0.0.1 (a port in use); closed by the destructor.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

/// A child process of the fxcpp command line (or any program).
struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // stdout and stderr together
  std::string output;
  int status = 0;
  double seconds = 0;
  std::chrono::steady_clock::time_point start;
};

inline std::string fxcpp_path() { return std::string(FX_BINARY_DIR) + "/fxcpp"; }

/// Starts `args` (args[0] "fxcpp" means the built command line) with the
/// extra environment `env` ("NAME=value").
inline Child start(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
  if (!args.empty() && args[0] == "fxcpp") args[0] = fxcpp_path();
  int pipefd[2];
  if (::pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
  Child c;
  c.start = std::chrono::steady_clock::now();
  c.pid = ::fork();
  if (c.pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    ::setenv("FXCPP_NO_PROGRESS", "1", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    for (const std::string& e : env) {
      const size_t eq = e.find('=');
      ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  ::close(pipefd[1]);
  c.out_fd = pipefd[0];
  return c;
}

/// Waits for the child (killing it after `limit`), collecting its output.
inline void finish(Child& c, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = c.start + limit;
  ::fcntl(c.out_fd, F_SETFL, O_NONBLOCK);
  char buf[4096];
  bool exited = false;
  while (true) {
    ssize_t n;
    while ((n = ::read(c.out_fd, buf, sizeof buf)) > 0) c.output.append(buf, static_cast<size_t>(n));
    if (!exited && ::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
      exited = true;
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
    }
    if (exited && n == 0) break;  // exited and the pipe is drained (EOF)
    if (!exited && std::chrono::steady_clock::now() > deadline) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &c.status, 0);
      exited = true;
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
      c.output += "\n[test: killed after the time limit]";
    }
    if (exited && n < 0) {
      // nothing more right now: children of the child may still hold the pipe
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (std::chrono::steady_clock::now() > deadline + std::chrono::seconds(5)) break;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(c.out_fd);
}

/// Runs `args` to the end: its output, exit status and time.
inline Child run(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                 std::chrono::seconds limit = std::chrono::seconds(60)) {
  Child c = start(args, env);
  finish(c, limit);
  return c;
}

inline int exit_status(const Child& c) {
  return WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status);
}

/// The non-empty lines of `text`.
inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    if (nl > start) out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

/// A fresh temporary directory (removed with its files by the destructor).
struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/fxcpp-dist-test-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

}  // namespace dist_test
