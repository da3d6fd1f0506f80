// What cuDNN's graph API (through cudnn-frontend) can fuse on this GPU, before the engine is built on it: for some
// ResNet convolutions in FP16 and BF16 NHWC, the convolution alone against the convolution with the batch norm's
// statistics (sum and sum of squares per output channel, "genstats") in the same kernel, and against the whole
// forward pattern a fused ResNet would use (the previous batch norm's scale, shift and ReLU applied to the input,
// then the convolution and the statistics). For each: whether cuDNN supports it, with or without runtime-compiled
// engines (NVRTC), how long its plans took to build, the fastest of the first 8 engines, and the statistics
// against float64 sums of the output as stored. Run on a lent GPU: gpu-bundle/run ampwb_graph_api_probe.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend loads its libraries itself (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING)
}

namespace fe = cudnn_frontend;
namespace {

#define CHECK_CUDA(call)                                                     \
  do {                                                                       \
    cudaError_t e = (call);                                                  \
    if (e != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

struct Case {
  const char* name;
  int64_t n, c, hw, k, rs, stride, padding;
  int64_t pq() const { return (hw + 2 * padding - rs) / stride + 1; }
};

enum class Pattern { Conv, ConvStats, ScaleBiasReluConvStats };
const char* pattern_name(Pattern p) {
  return p == Pattern::Conv ? "conv" : p == Pattern::ConvStats ? "conv+genstats" : "sbr+conv+genstats";
}

std::vector<int64_t> nhwc(int64_t c, int64_t h, int64_t w) { return {c * h * w, 1, c * w, c}; }

struct Built {
  std::shared_ptr<fe::graph::Graph> graph = std::make_shared<fe::graph::Graph>();
  std::shared_ptr<fe::graph::Tensor_attributes> x, w, y, scale, bias, sum, sq_sum;
  std::string error;
  double build_seconds = 0;
};

Built build(const Case& c, fe::DataType_t type, Pattern pattern, bool runtime_compiled, cudnnHandle_t handle) {
  Built b;
  auto& g = *b.graph;
  g.set_io_data_type(type)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t pq = c.pq();
  b.x = g.tensor(
      fe::graph::Tensor_attributes().set_name("x").set_dim({c.n, c.c, c.hw, c.hw}).set_stride(nhwc(c.c, c.hw, c.hw)));
  b.w = g.tensor(
      fe::graph::Tensor_attributes().set_name("w").set_dim({c.k, c.c, c.rs, c.rs}).set_stride(nhwc(c.c, c.rs, c.rs)));
  auto input = b.x;
  if (pattern == Pattern::ScaleBiasReluConvStats) {
    auto channel = [&](const char* name) {
      return g.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_dim({1, c.c, 1, 1})
                          .set_stride({c.c, 1, c.c, c.c})
                          .set_data_type(fe::DataType_t::FLOAT));
    };
    b.scale = channel("scale");
    b.bias = channel("bias");
    auto scaled = g.pointwise(b.x, b.scale, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
    auto shifted = g.pointwise(scaled, b.bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
    input = g.pointwise(shifted, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  }
  b.y = g.conv_fprop(input, b.w,
                     fe::graph::Conv_fprop_attributes()
                         .set_padding({c.padding, c.padding})
                         .set_stride({c.stride, c.stride})
                         .set_dilation({1, 1}));
  b.y->set_output(true).set_stride(nhwc(c.k, pq, pq)).set_data_type(type);
  if (pattern != Pattern::Conv) {
    auto [sum, sq_sum] = g.genstats(b.y, fe::graph::Genstats_attributes());
    b.sum = sum, b.sq_sum = sq_sum;
    for (auto& t : {sum, sq_sum})
      t->set_output(true).set_dim({1, c.k, 1, 1}).set_stride({c.k, 1, c.k, c.k}).set_data_type(fe::DataType_t::FLOAT);
  }
  const auto start = std::chrono::steady_clock::now();
  auto step = [&](fe::error_t status, const char* what) {
    if (status.is_bad() && b.error.empty()) b.error = std::string(what) + ": " + status.get_message();
    return b.error.empty();
  };
  if (step(g.validate(), "validate") && step(g.build_operation_graph(handle), "build_operation_graph") &&
      step(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans")) {
    g.deselect_numeric_notes({fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                              fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION, fe::NumericalNote_t::NONDETERMINISTIC});
    if (!runtime_compiled) g.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
    g.deselect_workspace_greater_than(int64_t{256} << 20);
    if (step(g.check_support(handle), "check_support"))
      step(g.build_plans(handle, fe::BuildPlanPolicy_t::ALL), "build_plans");
  }
  b.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return b;
}

void fill(void* p, size_t count, fe::DataType_t type, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  if (type == fe::DataType_t::FLOAT) {
    std::vector<float> v(count);
    for (auto& e : v) e = dist(rng);
    CHECK_CUDA(cudaMemcpy(p, v.data(), count * 4, cudaMemcpyHostToDevice));
  } else if (type == fe::DataType_t::HALF) {
    std::vector<__half> v(count);
    for (auto& e : v) e = __float2half(dist(rng));
    CHECK_CUDA(cudaMemcpy(p, v.data(), count * 2, cudaMemcpyHostToDevice));
  } else {
    std::vector<__nv_bfloat16> v(count);
    for (auto& e : v) e = __float2bfloat16(dist(rng));
    CHECK_CUDA(cudaMemcpy(p, v.data(), count * 2, cudaMemcpyHostToDevice));
  }
}

std::vector<double> download(const void* p, size_t count, fe::DataType_t type) {
  std::vector<double> out(count);
  if (type == fe::DataType_t::FLOAT) {
    std::vector<float> v(count);
    CHECK_CUDA(cudaMemcpy(v.data(), p, count * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = v[i];
  } else if (type == fe::DataType_t::HALF) {
    std::vector<__half> v(count);
    CHECK_CUDA(cudaMemcpy(v.data(), p, count * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = __half2float(v[i]);
  } else {
    std::vector<__nv_bfloat16> v(count);
    CHECK_CUDA(cudaMemcpy(v.data(), p, count * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = __bfloat162float(v[i]);
  }
  return out;
}

void probe(const Case& c, fe::DataType_t type, Pattern pattern, bool runtime_compiled, cudnnHandle_t handle,
           cudaStream_t stream) {
  const char* type_name = type == fe::DataType_t::HALF ? "f16" : "bf16";
  std::printf("%-24s %-4s %-18s %-8s ", c.name, type_name, pattern_name(pattern),
              runtime_compiled ? "+nvrtc" : "precomp");
  Built b = build(c, type, pattern, runtime_compiled, handle);
  if (!b.error.empty()) {
    std::printf("unsupported (%.2f s): %s\n", b.build_seconds, b.error.substr(0, 300).c_str());
    return;
  }
  const int64_t pq = c.pq();
  const size_t xs = c.n * c.c * c.hw * c.hw, ws = c.k * c.c * c.rs * c.rs, ys = c.n * c.k * pq * pq;
  std::mt19937 rng(7);
  void *x, *w, *y, *scale = nullptr, *bias = nullptr, *sums = nullptr, *space = nullptr;
  CHECK_CUDA(cudaMalloc(&x, xs * 2));
  CHECK_CUDA(cudaMalloc(&w, ws * 2));
  CHECK_CUDA(cudaMalloc(&y, ys * 2));
  CHECK_CUDA(cudaMalloc(&sums, 2 * c.k * 4));
  fill(x, xs, type, rng, -1, 1);
  fill(w, ws, type, rng, -0.1f, 0.1f);
  std::unordered_map<int64_t, void*> pack{{b.x->get_uid(), x}, {b.w->get_uid(), w}, {b.y->get_uid(), y}};
  if (b.sum) pack[b.sum->get_uid()] = sums, pack[b.sq_sum->get_uid()] = static_cast<float*>(sums) + c.k;
  if (b.scale) {
    CHECK_CUDA(cudaMalloc(&scale, c.c * 4));
    CHECK_CUDA(cudaMalloc(&bias, c.c * 4));
    fill(scale, c.c, fe::DataType_t::FLOAT, rng, 0.5f, 1.5f);
    fill(bias, c.c, fe::DataType_t::FLOAT, rng, -0.5f, 0.5f);
    pack[b.scale->get_uid()] = scale, pack[b.bias->get_uid()] = bias;
  }
  const int64_t space_bytes = b.graph->get_autotune_workspace_size();
  if (space_bytes) CHECK_CUDA(cudaMalloc(&space, space_bytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  float best = 0;
  int64_t best_index = -1, timed = 0;
  for (int64_t i = 0; i < b.graph->get_execution_plan_count() && timed < 8; ++i) {
    if (b.graph->execute_plan_at_index(handle, pack, space, i).is_bad()) continue;
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int run = 0; run < 5; ++run) (void)b.graph->execute_plan_at_index(handle, pack, space, i);
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    ms /= 5;
    ++timed;
    if (best_index < 0 || ms < best) best = ms, best_index = i;
  }
  std::string engine = "-";
  if (best_index >= 0) (void)b.graph->get_plan_name_at_index(best_index, engine);
  std::printf("%.3f ms (%lld of %lld plans ran, built in %.2f s, %s)", best, static_cast<long long>(timed),
              static_cast<long long>(b.graph->get_execution_plan_count()), b.build_seconds, engine.c_str());
  if (b.sum && best_index >= 0) {
    // The statistics of the output as stored (rounded to its type), in float64, against cuDNN's.
    (void)b.graph->execute_plan_at_index(handle, pack, space, best_index);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const std::vector<double> out = download(y, ys, type), got = download(sums, 2 * c.k, fe::DataType_t::FLOAT);
    std::vector<double> sum(c.k), sq(c.k);
    for (size_t i = 0; i < ys; ++i) sum[i % c.k] += out[i], sq[i % c.k] += out[i] * out[i];
    double worst_sum = 0, worst_sq = 0, largest_sum = 0;
    for (int64_t k = 0; k < c.k; ++k) {
      largest_sum = std::max(largest_sum, std::fabs(sum[k]));
      worst_sum = std::max(worst_sum, std::fabs(got[k] - sum[k]));
      worst_sq = std::max(worst_sq, std::fabs(got[c.k + k] - sq[k]) / sq[k]);
    }
    std::printf("; sums vs float64 of y: %.2e of the largest sum, sums of squares %.2e relative",
                worst_sum / largest_sum, worst_sq);
  }
  std::printf("\n");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (void* p : {x, w, y, scale, bias, sums, space})
    if (p) cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  fe::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
  if (!fe::cudnn_dlhandle) fe::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudnnHandle_t handle;
  if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed (no GPU?)\n");
    return 1;
  }
  cudnnSetStream(handle, stream);
  cudaDeviceProp props{};
  CHECK_CUDA(cudaGetDeviceProperties(&props, 0));
  std::printf("%s, sm_%d%d, cuDNN %zu, cudnn-frontend %d, batch %lld\n", props.name, props.major, props.minor,
              cudnnGetVersion(), CUDNN_FRONTEND_VERSION, static_cast<long long>(n));
  const Case cases[] = {
      {"r50 1x1 64->256 @56", n, 64, 56, 256, 1, 1, 0},
      {"r50 3x3 64->64 @56", n, 64, 56, 64, 3, 1, 1},
      {"r50 3x3 256->256 @14", n, 256, 14, 256, 3, 1, 1},
      {"r18 3x3 128->128 @28", n, 128, 28, 128, 3, 1, 1},
  };
  for (const Case& c : cases)
    for (const auto type : {fe::DataType_t::HALF, fe::DataType_t::BFLOAT16}) {
      probe(c, type, Pattern::Conv, false, handle, stream);
      probe(c, type, Pattern::ConvStats, false, handle, stream);
      probe(c, type, Pattern::ConvStats, true, handle, stream);
      probe(c, type, Pattern::ScaleBiasReluConvStats, true, handle, stream);
    }
  cudnnDestroy(handle);
  return 0;
}
