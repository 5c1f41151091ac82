// Rendezvous (torchrun's environment, TCPStore, FileStore) and messages of
// structured values between ranks (threads of this process, 127.0.0.1).
#include "dist_test_util.h"

#include <cstdlib>

namespace {

using namespace dist_test;

/// Sets environment variables for a test and restores them after.
struct Env {
  std::map<std::string, std::optional<std::string>> saved;
  void set(const std::string& k, const std::string& v) {
    remember(k);
    ::setenv(k.c_str(), v.c_str(), 1);
  }
  void unset(const std::string& k) {
    remember(k);
    ::unsetenv(k.c_str());
  }
  void remember(const std::string& k) {
    if (saved.count(k)) return;
    const char* v = std::getenv(k.c_str());
    saved[k] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  ~Env() {
    for (auto& [k, v] : saved) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Rendezvous, ReadsTorchrunsEnvironment) {
  Env env;
  env.set("MASTER_ADDR", "10.1.2.3");
  env.set("MASTER_PORT", "29501");
  env.set("RANK", "2");
  env.set("WORLD_SIZE", "4");
  env.set("LOCAL_RANK", "0");
  env.set("FXCPP_DIST_TIMEOUT", "7");
  env.unset("FXCPP_STORE_FILE");
  env.unset("FXCPP_STORE_HOSTED");
  env.unset("TORCHELASTIC_USE_AGENT_STORE");
  ASSERT_TRUE(dist::rendezvous_env_present());
  const dist::RendezvousOptions o = dist::rendezvous_from_env();
  EXPECT_EQ(o.master_addr, "10.1.2.3");
  EXPECT_EQ(o.master_port, 29501);
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.local_rank, 0);
  EXPECT_EQ(o.timeout, std::chrono::seconds(7));
  EXPECT_FALSE(o.store_hosted);
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");  // torchrun's agent hosts the store
  EXPECT_TRUE(dist::rendezvous_from_env().store_hosted);
}

TEST(Rendezvous, MissingOrBadVariablesAreOneLine) {
  Env env;
  env.set("WORLD_SIZE", "2");
  env.unset("RANK");
  EXPECT_EQ(error_of([] { dist::rendezvous_from_env(); }),
            "RANK is not set (the rendezvous needs MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)");
  env.set("RANK", "2");
  EXPECT_EQ(error_of([] { dist::rendezvous_from_env(); }), "RANK='2' is not an integer in [0, 1]");
  env.set("RANK", "1");
  env.set("MASTER_PORT", "http");
  EXPECT_EQ(error_of([] { dist::rendezvous_from_env(); }), "MASTER_PORT='http' is not an integer in [1, 65535]");
}

TEST(Rendezvous, PortInUseIsOneClearError) {
  dist::quiet_c10d_logging();
  Listener busy;  // some other program listens there
  dist::RendezvousOptions o;
  o.master_port = busy.port;
  o.world_size = 2;
  o.timeout = std::chrono::seconds(5);
  const std::string expected = "MASTER_PORT " + std::to_string(busy.port) +
                               " on 127.0.0.1 is in use (another rendezvous or program listens there): choose another port";
  EXPECT_EQ(error_of([&] { dist::ProcessGroup::create(o); }), expected);
  EXPECT_EQ(error_of([&] { dist::StoreServer("127.0.0.1", busy.port); }), expected);
}

TEST(Rendezvous, NobodyThereTimesOut) {
  dist::quiet_c10d_logging();
  dist::RendezvousOptions o;
  o.master_port = free_port();
  o.rank = 1;
  o.world_size = 2;
  o.timeout = std::chrono::milliseconds(700);
  const std::string e = error_of([&] { dist::ProcessGroup::create(o); });
  EXPECT_NE(e.find("rank 1: no rendezvous at 127.0.0.1:" + std::to_string(o.master_port) + " within 0.7 s"), std::string::npos) << e;
}

TEST(Messages, StructuredValuesCrossRanksAsTheyAre) {
  torch::manual_seed(3);
  at::Tensor plain = at::randn({2, 3});
  at::Tensor channels_last = at::randn({2, 4, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor transposed = at::randn({4, 5}).t();  // dense, permuted strides
  at::Tensor sliced = at::randn({6, 6}).slice(1, 0, 6, 2);  // not dense: sent contiguous
  c10::List<at::Tensor> tensor_list({at::arange(5, at::kLong), at::ones({2}, at::kBool)});
  c10::List<int64_t> ints({3, 4, 5});
  const c10::IValue value = c10::ivalue::Tuple::create(
      {plain, channels_last, transposed, sliced, tensor_list, ints, int64_t{-7}, 2.5, true, c10::IValue(),
       std::string("why not the fast path"), at::empty({0, 3}), at::randn({}).to(at::kDouble),
       c10::ivalue::Tuple::create({at::randn({1}).to(at::kHalf), std::string("")})});
  run_ranks(2, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
    if (rank == 0) {
      dist::Message m;
      m.id = 5;
      m.count = 9;
      m.value = value;
      g->send(m, 1).wait();
      dist::Message back = g->recv(1);
      EXPECT_TRUE(dist::bitwise_equal(back.value, value));
      return;
    }
    dist::RecvTiming t;
    dist::Message m = g->recv(0, &t);
    EXPECT_EQ(m.kind, dist::MessageKind::Data);
    EXPECT_EQ(m.id, 5);
    EXPECT_EQ(m.count, 9);
    EXPECT_TRUE(dist::bitwise_equal(m.value, value));
    const std::vector<c10::IValue> e(m.value.toTupleRef().elements().begin(), m.value.toTupleRef().elements().end());
    EXPECT_TRUE(e[1].toTensor().is_contiguous(at::MemoryFormat::ChannelsLast));  // laid out as sent
    EXPECT_EQ(e[2].toTensor().strides(), transposed.strides());
    EXPECT_TRUE(e[3].toTensor().is_contiguous());
    EXPECT_TRUE(e[4].isTensorList());
    EXPECT_TRUE(e[5].isIntList());
    EXPECT_EQ(e[10].toStringRef(), "why not the fast path");
    EXPECT_GT(t.bytes, 0);
    g->send(m, 0).wait();
  });
}

TEST(Messages, LongHeadersAndManyMessagesInFlight) {
  std::vector<c10::IValue> many;
  for (int i = 0; i < 40; ++i) many.emplace_back(at::full({i + 1, 2}, static_cast<double>(i)));
  const c10::IValue value = c10::ivalue::Tuple::create(many);  // > 56 header words: a second header piece
  run_ranks(2, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
    if (rank == 0) {
      std::vector<dist::PendingSend> sends;
      for (int i = 0; i < 6; ++i) {
        dist::Message m;
        m.id = i;
        m.value = i % 2 ? value : c10::IValue(at::full({3}, static_cast<double>(i)));
        sends.push_back(g->send(m, 1));
      }
      for (auto& s : sends) s.wait();
      return;
    }
    std::vector<dist::PendingRecv> posted;
    for (int i = 0; i < 6; ++i) posted.push_back(g->post_recv(0));  // all posted before any arrives
    for (int i = 0; i < 6; ++i) {
      dist::Message m = posted[static_cast<size_t>(i)].wait();
      EXPECT_EQ(m.id, i);
      EXPECT_TRUE(dist::bitwise_equal(m.value, i % 2 ? value : c10::IValue(at::full({3}, static_cast<double>(i)))));
    }
  });
}

TEST(Messages, ValuesThatCannotCrossAreNamed) {
  run_ranks(2, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
    if (rank != 0) return;
    c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
    d.insert(std::string("a"), at::ones({1}));
    dist::Message m;
    m.value = d;
    const std::string e = error_of([&] { g->send(m, 1, "stage 0's outputs"); });
    EXPECT_EQ(e, "rank 0: stage 0's outputs: cannot send a value of type Dict[str, Tensor] between ranks (tensors, "
                 "tuples, lists, numbers, bools, strings and None can)");
  });
}

TEST(Messages, FileStoreRendezvous) {
  TempDir dir;
  dist::quiet_c10d_logging();
  std::vector<std::thread> threads;
  std::vector<std::string> got(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        dist::RendezvousOptions o;
        o.rank = r;
        o.world_size = 2;
        o.store_file = dir / "store";
        o.timeout = std::chrono::seconds(20);
        auto g = dist::ProcessGroup::create(o);
        if (r == 0) {
          dist::Message m;
          m.value = at::arange(4);
          g->send(m, 1).wait();
          g->set("greeting", "hello");
        } else {
          const int64_t sum = g->recv(0).value.toTensor().sum().item<int64_t>();
          got[1] = std::to_string(sum) + " " + g->get("greeting", "rank 0");
        }
        g->barrier();
      } catch (const std::exception& e) {
        got[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got[0], "");
  EXPECT_EQ(got[1], "6 hello");
}

TEST(Messages, LostPeerIsNamed) {
  std::vector<std::string> errors;
  run_ranks(
      2,
      [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
        if (rank == 1) {
          g->recv(0);
          return;  // its process group is destroyed: its connections close, as a killed rank's do
        }
        dist::Message m;
        m.value = at::ones({4});
        g->send(m, 1).wait();
        g->recv(1, nullptr, "microbatch 0's output");
      },
      std::chrono::seconds(20), &errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0],
            "rank 0: lost rank 1 while receiving microbatch 0's output from rank 1 (its connection closed: the process "
            "ended or was killed)");
  EXPECT_EQ(errors[1], "");
}

TEST(Messages, SilentPeerTimesOut) {
  std::vector<std::string> errors;
  const auto start = std::chrono::steady_clock::now();
  run_ranks(
      2,
      [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
        if (rank == 0) {
          g->recv(1, nullptr, "microbatch 0's output");
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // alive, but sends nothing
        }
      },
      std::chrono::seconds(1), &errors);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(errors[0],
            "rank 0: rank 1 did not answer within 1 s while receiving microbatch 0's output from rank 1 (it hangs, or "
            "the timeout is too short)");
  EXPECT_LT(s, 10.0);
}

TEST(Compare, BitwiseEqualityIsExact) {
  at::Tensor a = at::tensor({1.0f, std::nanf(""), -0.0f});
  EXPECT_TRUE(dist::bitwise_equal(a, a.clone()));
  EXPECT_FALSE(dist::bitwise_equal(a, at::tensor({1.0f, std::nanf(""), 0.0f})));  // -0 is not 0 bit for bit
  EXPECT_FALSE(dist::bitwise_equal(a, a.to(at::kDouble)));
  EXPECT_DOUBLE_EQ(dist::max_abs_difference(at::tensor({1.0, 2.0}), at::tensor({1.5, 2.0})), 0.5);
  EXPECT_TRUE(dist::bitwise_equal(c10::ivalue::Tuple::create({int64_t{1}, std::string("s")}),
                                  c10::ivalue::Tuple::create({int64_t{1}, std::string("s")})));
}

}  // namespace
