// oneDNN's implementations of a 1x1 convolution, side by side, on
// ResNet-50's 1x1 shapes (channels_last, bias, ReLU, and the residual sum
// where the model has one): brgconv_1x1 (what oneDNN picks first, and so
// what fx::optimize_for_inference runs), jit_1x1 and the generic jit
// convolution (the next implementations oneDNN offers for the same
// descriptor), and a brgemm matmul over the NHWC rows ([N*H*W, IC] x
// [IC, OC]). Issue 24 asked why fxcpp's 1x1 convolutions trail ONNX
// Runtime's MLAS kernels: these rows say what choosing another oneDNN
// kernel would gain (README "fxcpp vs ONNX Runtime"). One thread; the
// weights are the layout each primitive asks for; buffers stay allocated
// across iterations (at batch 8 they exceed the caches anyway).
//
//   OMP_NUM_THREADS=1 build/fx_bench --benchmark_filter=OneDnnConv1x1
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <string>

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Shape {
  int64_t in, out, size;
  bool sum;  // the block's last 1x1 convolution adds the residual
};
// ResNet-50's 1x1 convolutions (stride 1), once per distinct shape.
constexpr Shape kShapes[] = {{64, 256, 56, true},  {256, 64, 56, false},   {128, 512, 28, true},
                             {512, 128, 28, false}, {256, 1024, 14, true}, {1024, 256, 14, false},
                             {512, 2048, 7, true},  {2048, 512, 7, false}};
const char* const kImpl[] = {"brgconv_1x1", "jit_1x1", "jit", "matmul"};

void OneDnnConv1x1(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  const int64_t n = state.range(1), impl = state.range(2);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  dnnl::post_ops ops;
  if (s.sum) ops.append_sum(1.f);
  ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::primitive p;
  dnnl::memory::desc src, wei, dst, bias;
  std::string name;
  if (impl < 3) {
    bias = dnnl::memory::desc({s.out}, dt::f32, tag::a);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl::memory::desc({n, s.in, s.size, s.size}, dt::f32, tag::nhwc),
        dnnl::memory::desc({s.out, s.in, 1, 1}, dt::f32, tag::any), bias,
        dnnl::memory::desc({n, s.out, s.size, s.size}, dt::f32, tag::nhwc), {1, 1}, {0, 0}, {0, 0});
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    while ((name = pd.impl_info_str()).rfind(std::string(kImpl[impl]) + ":", 0) != 0)
      if (!pd.next_impl()) {
        state.SkipWithError((std::string("oneDNN offers no ") + kImpl[impl]).c_str());
        return;
      }
    p = dnnl::convolution_forward(pd);
    src = pd.src_desc(), wei = pd.weights_desc(), dst = pd.dst_desc();
  } else {
    const int64_t rows = n * s.size * s.size;
    dnnl::matmul::desc d(dnnl::memory::desc({rows, s.in}, dt::f32, tag::ab),
                         dnnl::memory::desc({s.in, s.out}, dt::f32, tag::any),
                         dnnl::memory::desc({1, s.out}, dt::f32, tag::ab),
                         dnnl::memory::desc({rows, s.out}, dt::f32, tag::ab));
    dnnl::matmul::primitive_desc pd(d, attr, eng);
    name = std::string("matmul ") + pd.impl_info_str();
    p = dnnl::matmul(pd);
    src = pd.src_desc(), wei = pd.weights_desc(), dst = pd.dst_desc(), bias = pd.bias_desc();
  }
  dnnl::memory m_src(src, eng), m_wei(wei, eng), m_dst(dst, eng), m_bias(bias, eng);
  for (dnnl::memory* m : {&m_src, &m_wei, &m_dst, &m_bias})
    std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
  for (auto _ : state) {
    p.execute(stream, {{DNNL_ARG_SRC, m_src}, {DNNL_ARG_WEIGHTS, m_wei}, {DNNL_ARG_BIAS, m_bias}, {DNNL_ARG_DST, m_dst}});
    stream.wait();
  }
  const double flops = 2.0 * n * s.size * s.size * s.in * s.out;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::to_string(s.in) + "->" + std::to_string(s.out) + " @" + std::to_string(s.size) +
                 (s.sum ? " +sum " : " ") + name);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t batch : {1, 8})
    for (int64_t shape = 0; shape < static_cast<int64_t>(std::size(kShapes)); ++shape)
      for (int64_t impl = 0; impl < 4; ++impl) b->Args({shape, batch, impl});
}

BENCHMARK(OneDnnConv1x1)->ArgNames({"shape", "batch", "impl"})->Apply(Shapes)->Unit(benchmark::kMillisecond)
    ->MinTime(0.2)->UseRealTime();

}  // namespace
