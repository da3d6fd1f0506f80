// The CUDA backend's own behaviour, beside the op comparisons every backend gets in test_backend_ops.cpp: cuDNN
// plans cached once per shape, uploads waited for by their first use, the loss scaler on GPU tensors, device
// descriptions, memory accounting and out-of-memory reporting, host tensors refused. These run only where a CUDA
// GPU is usable and skip (GTEST_SKIP, with the reason) elsewhere. The tests at the end run everywhere: how a build
// with CUDA behaves on a machine without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "amp/loss_scaler.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_libraries.h"
#include "core/fp8.h"
#include "nn/layer.h"
#include "op_harness.h"
#include "optim/optimizer.h"
#include "gpu_required.h"

namespace ampwb {
namespace {
using testing::host_random;

constexpr const char* kNoGpu =
    "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices): GPU tests skipped";

bool have_gpu() { return cuda_device_count() > 0; }

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << kNoGpu

// One backend for the whole program: the caching allocator is per device, and its blocks are reused in stream
// order of one backend's compute stream.
CudaBackend& gpu() {
  static CudaBackend* backend = new CudaBackend();  // only ever created after have_gpu()
  return *backend;
}

Tensor to_gpu(const Tensor& host) { return on_device(gpu(), host); }
Tensor to_host(const Tensor& dev) { return on_host(gpu(), dev); }

// ---- Convolution plans and uploads -------------------------------------------------------------------------------

TEST(CudaConvPlans, MadeOncePerShape) {
  SKIP_WITHOUT_GPU();
  Rng rng(12);
  const ConvParams p{1, 1};
  const Tensor x = host_random({2, 3, 8, 8}, rng, DType::F16, Layout::NHWC);
  const Tensor dy = host_random({2, 8, 8, 8}, rng, DType::F16, Layout::NHWC);
  Tensor dw = Tensor::empty({8, 3, 3, 3}, DType::F32, Layout::NCHW, gpu().device());
  const size_t plans_before = gpu().conv_plans_cached();
  for (int i = 0; i < 3; ++i) gpu().conv2d_backward_weights(to_gpu(x), to_gpu(dy), dw, p);
  EXPECT_LE(gpu().conv_plans_cached(), plans_before + 1) << "one plan per shape, made once";
  EXPECT_FALSE(gpu().conv_plans().empty());
}

// A timed candidate with a workspace over the limit is kept only where it is much faster (no GPU needed).
TEST(CudaConvPlans, ALargerWorkspaceIsTakenOnlyWhereItPays) {
  cuda::ConvPolicy policy;
  policy.workspace_limit = 256;
  policy.large_workspace_limit = 4096;
  policy.large_workspace_speedup = 1.25f;
  // Fastest first within the limit, whatever the order.
  EXPECT_EQ(cuda::choose_timed({{3.0f, 0}, {2.0f, 256}, {2.5f, 100}}, policy), 1);
  // 1.2x faster with a larger workspace: not worth the memory; 40x faster (a strided backward-data pass): taken.
  EXPECT_EQ(cuda::choose_timed({{1.2f, 0}, {1.0f, 1024}}, policy), 0);
  EXPECT_EQ(cuda::choose_timed({{130.0f, 0}, {3.0f, 1024}, {2.9f, 8192}}, policy), 1);
  EXPECT_EQ(cuda::choose_timed({{1.25f, 0}, {1.0f, 1024}}, policy), 1);  // the threshold itself pays
  // Nothing within the limit: the fastest within the larger one; nothing within either: none.
  EXPECT_EQ(cuda::choose_timed({{5.0f, 2048}, {4.0f, 4096}}, policy), 1);
  EXPECT_EQ(cuda::choose_timed({{1.0f, 8192}}, policy), -1);
  EXPECT_EQ(cuda::choose_timed({}, policy), -1);
}

// --deterministic as the backend sets it up: cuDNN's heuristics choose every pass, deterministic algorithms and engines
// only, so that the next process chooses the same ones. Timing would show in the plans as each choice's time.
TEST(CudaConvPlans, DeterministicOnesAreChosenWithoutTiming) {
  SKIP_WITHOUT_GPU();
  CudaBackendOptions options;
  options.deterministic = true;
  CudaBackend backend(options);
  Rng rng(13);
  const ConvParams p{1, 1};
  for (const DType t : {DType::F32, DType::F16}) {  // as MadeOncePerShape
    const Tensor x = on_device(backend, host_random({2, 3, 8, 8}, rng, t, Layout::NHWC));
    const Tensor dy = on_device(backend, host_random({2, 8, 8, 8}, rng, t, Layout::NHWC));
    Tensor dw = Tensor::empty({8, 3, 3, 3}, DType::F32, Layout::NCHW, backend.device());
    backend.conv2d_backward_weights(x, dy, dw, p);
  }
  backend.synchronize();
  const std::string plans = backend.conv_plans();
  EXPECT_FALSE(plans.empty());
  EXPECT_EQ(plans.find(" ms"), std::string::npos) << "timed:\n" << plans;
}

// ---- cuDNN's graph API (cudnn-frontend) ----------------------------------------------------------------------

// ResNet's convolution kinds: the 16-bit stem (input channels padded to 8), a 3x3 stride-1 and a 1x1 stride-2 one.
std::vector<cuda::ConvShape> graph_api_shapes(cudnnDataType_t dtype, bool nhwc, cuda::ConvMath math) {
  auto shape = [&](int n, int c, int hw, int k, int rs, int stride, int padding) {
    cuda::ConvShape s;
    s.n = n, s.c = c, s.h = s.w = hw, s.k = k, s.r = s.s = rs, s.stride = stride, s.padding = padding;
    s.p = s.q = (hw + 2 * padding - rs) / stride + 1;
    s.dtype = dtype, s.nhwc = nhwc, s.math = math;
    return s;
  };
  return {shape(2, 8, 32, 16, 7, 2, 3), shape(2, 16, 8, 16, 3, 1, 1), shape(2, 16, 8, 32, 1, 2, 0)};
}

constexpr cuda::ConvPass kPasses[] = {cuda::ConvPass::Forward, cuda::ConvPass::BackwardData,
                                      cuda::ConvPass::BackwardFilter};

// Runs without a GPU: the frontend checks each pass's graph on the host, so a wrong dimension or stride is found
// before any GPU runs it.
TEST(CudaGraphApi, EveryPassDtypeAndLayoutMakesAValidGraph) {
  if (!cuda::GraphApiConvs::compiled()) GTEST_SKIP() << "built without cudnn-frontend (scripts/install-deps.sh)";
  for (const auto dtype : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16})
    for (const bool nhwc : {true, false})
      for (const cuda::ConvShape& s :
           graph_api_shapes(dtype, nhwc, dtype == CUDNN_DATA_FLOAT ? cuda::ConvMath::Fp32 : cuda::ConvMath::TensorOp))
        for (const auto pass : kPasses) EXPECT_EQ(cuda::GraphApiConvs::validate(pass, s), "") << s.key("graph");
  // And it does check: an output one pixel too wide is refused.
  cuda::ConvShape wrong = graph_api_shapes(CUDNN_DATA_HALF, true, cuda::ConvMath::TensorOp)[1];
  wrong.q += 1;
  EXPECT_NE(cuda::GraphApiConvs::validate(cuda::ConvPass::Forward, wrong), "");
}

// Every pass of every shape (FP32, FP16, BF16, NHWC) on a runner of the given policy against the legacy API's
// GEMM-based algorithms, same inputs: in FP32 within 1e-5 of the largest output (two FP32 sums of the same products in
// different orders), 1e-4 where the policy allows FFT and Winograd (their transforms round the inputs and products
// first, an error that grows with the tile: Lavin & Gray, 2016); one rounding of the output type in FP16 and BF16.
// Each pass runs twice: `runs` counts the passes and shapes, `repeated_alike` those whose two results were the same
// bits. Returns the runner's plans.
std::string compare_with_exact_legacy(const cuda::ConvPolicy& policy, size_t& runs, size_t& repeated_alike) {
  gpu();  // the device set up
  cudnnHandle_t handle = nullptr;
  EXPECT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
  std::vector<void*> blocks;
  const cuda::ScratchFn scratch = [&](size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    blocks.push_back(p);
    return p;
  };
  std::string plans;
  runs = repeated_alike = 0;
  {
    cuda::ConvPolicy exact;
    exact.api = cuda::ConvApi::Legacy;
    exact.exact_fp32 = true;
    cuda::ConvRunner legacy(handle, exact), tested(handle, policy);
    Rng rng(31);
    for (const auto& [dtype, t] : {std::pair{CUDNN_DATA_FLOAT, DType::F32}, std::pair{CUDNN_DATA_HALF, DType::F16},
                                   std::pair{CUDNN_DATA_BFLOAT16, DType::BF16}})
      for (const cuda::ConvShape& s :
           graph_api_shapes(dtype, true, t == DType::F32 ? cuda::ConvMath::Fp32 : cuda::ConvMath::TensorOp)) {
        // Host tensors of the right sizes, flat (the runner reads raw NHWC/KRSC memory).
        const Tensor x = host_random({int64_t{s.n} * s.c * s.h * s.w}, rng, t);
        const Tensor w = host_random({int64_t{s.k} * s.c * s.r * s.s}, rng, t);
        const Tensor dy = host_random({int64_t{s.n} * s.k * s.p * s.q}, rng, t);
        const Tensor gx = to_gpu(x), gw = to_gpu(w), gdy = to_gpu(dy);
        for (const auto pass : kPasses) {
          const Tensor& like = pass == cuda::ConvPass::Forward ? dy : pass == cuda::ConvPass::BackwardData ? x : w;
          Tensor out_legacy = to_gpu(like), out = to_gpu(like), again = to_gpu(like);
          // The runners use the handle's own stream, not the backend's: the uploads are waited for here, and the
          // results before they are read back.
          CUDA_CHECK(cudaDeviceSynchronize());
          auto run = [&](cuda::ConvRunner& r, Tensor& result) {
            if (pass == cuda::ConvPass::Forward) r.forward(s, gx.data(), gw.data(), result.data(), scratch);
            if (pass == cuda::ConvPass::BackwardData) r.backward_data(s, gdy.data(), gw.data(), result.data(), scratch);
            if (pass == cuda::ConvPass::BackwardFilter)
              r.backward_filter(s, gx.data(), gdy.data(), result.data(), scratch);
          };
          run(legacy, out_legacy);
          run(tested, out);
          run(tested, again);
          CUDA_CHECK(cudaDeviceSynchronize());
          for (void* p : blocks) cudaFree(p);  // the scratch of the runs, done
          blocks.clear();
          ++runs;
          const std::vector<float> a = to_float_vector(to_host(out_legacy)), b = to_float_vector(to_host(out));
          repeated_alike += to_float_vector(to_host(again)) == b;
          double largest = 0, worst = 0;
          for (size_t i = 0; i < a.size(); ++i) {
            largest = std::max(largest, std::fabs(double{a[i]}));
            worst = std::max(worst, std::fabs(double{a[i]} - double{b[i]}));
          }
          const double bound = t == DType::F32 ? (policy.exact_fp32 ? 1e-5 : 1e-4) : t == DType::F16 ? 2e-3 : 1.6e-2;
          EXPECT_LE(worst, bound * largest) << s.key("conv") << " pass " << static_cast<int>(pass);
        }
      }
    EXPECT_EQ(tested.plans_cached(), runs) << "every pass and shape planned once:\n" << tested.describe_plans();
    plans = tested.describe_plans();
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  for (void* p : blocks) cudaFree(p);
  cudnnDestroy(handle);
  return plans;
}

// The graph API alone (ConvApi::Graph), GEMM-based in FP32 like the legacy API it is compared with: it must have
// run every pass (a silent fall-back to the legacy API fails).
TEST(CudaGraphApi, ConvolutionsMatchTheLegacyApi) {
  SKIP_WITHOUT_GPU();
  if (!cuda::GraphApiConvs::compiled()) GTEST_SKIP() << "built without cudnn-frontend (scripts/install-deps.sh)";
  cuda::ConvPolicy policy;
  policy.api = cuda::ConvApi::Graph;
  policy.exact_fp32 = true;
  policy.runtime_compiled = false;  // seconds of NVRTC each: TheFasterApiRunsEachPass builds them
  size_t runs = 0, alike = 0;
  const std::string plans = compare_with_exact_legacy(policy, runs, alike);
  EXPECT_EQ(plans.find("legacy API"), std::string::npos) << "the graph API refused some:\n" << plans;
  std::printf("%s", plans.c_str());
}

// The backend's default policy (PyTorch's: both APIs timed per shape, FFT, Winograd, non-deterministic and
// runtime-compiled engines allowed): each pass and shape runs on the one API it chose, and the timing says why.
TEST(CudaGraphApi, TheFasterApiRunsEachPass) {
  SKIP_WITHOUT_GPU();
  if (!cuda::GraphApiConvs::compiled()) GTEST_SKIP() << "built without cudnn-frontend (scripts/install-deps.sh)";
  size_t runs = 0, alike = 0;
  const std::string plans = compare_with_exact_legacy(cuda::ConvPolicy{}, runs, alike);
  std::istringstream lines(plans);
  size_t graph = 0, legacy = 0;
  for (std::string line; std::getline(lines, line);) {
    graph += line.find(": graph API, engine") != std::string::npos;
    legacy += line.find(": legacy API (faster: ") != std::string::npos;
    if (line.find("graph API, engine") != std::string::npos || line.find("slower than") != std::string::npos) {
      EXPECT_NE(line.find(" ms"), std::string::npos) << "timed, so its time is shown: " << line;
    }
  }
  EXPECT_EQ(graph + legacy, runs) << "each pass on the graph API or, timed faster, the legacy API:\n" << plans;
  std::printf("%s", plans.c_str());
}

// --deterministic as the backend sets it: deterministic algorithms and engines only, chosen without timing, so every
// pass repeats bit for bit.
TEST(CudaGraphApi, DeterministicPassesRepeatBitForBit) {
  SKIP_WITHOUT_GPU();
  cuda::ConvPolicy policy;
  policy.deterministic = true;
  policy.benchmark = false;
  policy.runtime_compiled = false;  // as the bundle's checks run the backend (AMPWB_CUDNN_RUNTIME_COMPILED=0)
  if (!cuda::GraphApiConvs::compiled()) policy.api = cuda::ConvApi::Legacy;
  size_t runs = 0, alike = 0;
  const std::string plans = compare_with_exact_legacy(policy, runs, alike);
  EXPECT_EQ(alike, runs) << plans;
}

// amp-fp8's three convolution passes as graphs (FP8 inputs, FP32 output, NHWC), checked on the host, as one node and
// with the pointwise epilogue tried where one node finds no engine: E4M3 by E4M3 forward, E5M2 gradients by E4M3
// weights and by E4M3 inputs; each pass on FP8 values widened to FP16, where a pass has no FP8 engine; and the
// forward and backward-data passes scaled into each floating output type (conv2d_forward_scaled, its factor a scalar
// passed by value).
TEST(CudaGraphApi, Fp8PassesMakeValidGraphs) {
  if (!cuda::GraphApiConvs::compiled()) GTEST_SKIP() << "built without cudnn-frontend (scripts/install-deps.sh)";
  for (const bool epilogue : {false, true})
    for (cuda::ConvShape s : graph_api_shapes(CUDNN_DATA_FLOAT, true, cuda::ConvMath::TensorOp)) {
      s.mixed = true;
      s.a_type = s.b_type = CUDNN_DATA_FP8_E4M3;
      EXPECT_EQ(cuda::GraphApiConvs::validate(cuda::ConvPass::Forward, s, epilogue), "") << s.key("fwd");
      s.a_type = CUDNN_DATA_FP8_E5M2;  // dy, w
      EXPECT_EQ(cuda::GraphApiConvs::validate(cuda::ConvPass::BackwardData, s, epilogue), "") << s.key("bwd-data");
      s.a_type = CUDNN_DATA_FP8_E4M3, s.b_type = CUDNN_DATA_FP8_E5M2;  // x, dy
      EXPECT_EQ(cuda::GraphApiConvs::validate(cuda::ConvPass::BackwardFilter, s, epilogue), "") << s.key("bwd-filter");
      s.a_type = s.b_type = CUDNN_DATA_HALF;
      EXPECT_FALSE(s.fp8_inputs());
      EXPECT_NE(s.key("bwd-data").find(" widened f16xf16"), std::string::npos) << s.key("bwd-data");
      for (const auto pass : {cuda::ConvPass::Forward, cuda::ConvPass::BackwardData, cuda::ConvPass::BackwardFilter})
        EXPECT_EQ(cuda::GraphApiConvs::validate(pass, s, epilogue), "") << s.key("widened");
      cuda::ConvShape scaled = s;
      scaled.scaled = true;
      scaled.a_type = scaled.b_type = CUDNN_DATA_FP8_E4M3;
      for (const cudnnDataType_t out : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16}) {
        scaled.dtype = out;
        EXPECT_EQ(cuda::GraphApiConvs::validate(cuda::ConvPass::Forward, scaled), "") << scaled.key("fwd");
        scaled.a_type = CUDNN_DATA_FP8_E5M2;
        EXPECT_EQ(cuda::GraphApiConvs::validate(cuda::ConvPass::BackwardData, scaled), "") << scaled.key("bwd-data");
        scaled.a_type = scaled.b_type = CUDNN_DATA_HALF;  // widened, where the pass has no FP8 engine
        EXPECT_EQ(cuda::GraphApiConvs::validate(cuda::ConvPass::BackwardData, scaled), "") << scaled.key("bwd-data");
        scaled.a_type = scaled.b_type = CUDNN_DATA_FP8_E4M3;
      }
    }
  // And the epilogue is checked too: an output one pixel too wide is refused.
  cuda::ConvShape wrong = graph_api_shapes(CUDNN_DATA_FLOAT, true, cuda::ConvMath::TensorOp)[1];
  wrong.mixed = true;
  wrong.a_type = wrong.b_type = CUDNN_DATA_FP8_E4M3;
  wrong.q += 1;
  EXPECT_NE(cuda::GraphApiConvs::validate(cuda::ConvPass::Forward, wrong, true), "");
}

// ---- FP8 (amp-fp8) ------------------------------------------------------------------------------------------

// Where the GPU has FP8 tensor cores (compute capability 8.9 and later, Capabilities::fp8); others skip, saying so.
#define SKIP_WITHOUT_FP8()                                                                                     \
  SKIP_WITHOUT_GPU();                                                                                          \
  if (const Capabilities caps = gpu().capabilities(); !caps.fp8.native)                                        \
  GTEST_SKIP() << test::kDoesNotApply << "the backend declares no FP8 compute on " << caps.device_name << ": " \
               << caps.fp8.how

// Host values that are exactly FP8 values of `format`, as FP32: random, rounded.
Tensor fp8_values(Shape shape, Rng& rng, Fp8Format format, Layout layout = Layout::NCHW) {
  Tensor t = host_random(std::move(shape), rng, DType::F32, layout, 4.0);
  float* v = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = round_to_fp8(format, v[i]);
  return t;
}
// That FP32 tensor on the GPU in FP8 storage (exact), and as it is.
Tensor fp8_on_gpu(const Tensor& host, Fp8Format format) {
  Tensor t = Tensor::empty(host.shape(), format == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2, host.layout(),
                           gpu().device());
  gpu().convert(to_gpu(host), t);
  return t;
}

// Hopper's FP8 tensor cores add their products (exact) in an accumulator narrower than FP32, about 13 bits of
// mantissa, promoted to FP32 every few blocks of the sum (cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM says as much).
// So each output is held to 2^-10 of the sum of its products' magnitudes, `magnitude` (the float64 reference on |a|
// and |b|), from the float64 reference `exact`: a wrong layout, scale or operand misses it many times over.
// rounding: the relative error of got's own rounding (BF16's, say), beyond the accumulation's.
void expect_within_fp8_accumulation(const Tensor& got, const ref::Array& exact, const ref::Array& magnitude,
                                    const std::string& what, double rounding = 0) {
  const ref::Array g = ref::from_tensor(to_host(got));
  ASSERT_EQ(g.shape, exact.shape) << what;
  size_t misses = 0;
  for (size_t i = 0; i < g.v.size(); ++i)
    if (std::fabs(g.v[i] - exact.v[i]) > 0x1p-10 * magnitude.v[i] + rounding * std::fabs(exact.v[i]) + 1e-30 &&
        misses++ < 3)
      ADD_FAILURE() << what << ", element " << i << ": " << g.v[i] << " against " << exact.v[i]
                    << ", the products' magnitudes summing to " << magnitude.v[i];
  EXPECT_EQ(misses, 0u) << what;
}

ref::Array magnitudes(ref::Array a) {
  for (double& v : a.v) v = std::fabs(v);
  return a;
}

ref::Array times(ref::Array a, double factor) {
  for (double& v : a.v) v *= factor;
  return a;
}

// Largest |a - b| over the largest |b|.
double relative_max_error(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = to_float_vector(to_host(a)), y = to_float_vector(to_host(b));
  double largest = 0, worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    largest = std::max(largest, std::fabs(double{y[i]}));
    worst = std::max(worst, std::fabs(double{x[i]} - double{y[i]}));
  }
  return largest > 0 ? worst / largest : worst;
}

// A cast into FP8 storage holds what the CPU's cast into FP32 holds, bit for bit, and sees the same amax and counts:
// from FP32 and BF16 in whole packs of eight (the packed kernel), and from FP32 of a size that is not.
TEST(CudaFp8, ScaledCastIntoFp8StorageMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(41);
  CpuBackend cpu({1});
  for (const auto& [shape, dtype] :
       {std::pair<Shape, DType>{{4, 16, 8, 8}, DType::F32}, std::pair<Shape, DType>{{4, 16, 8, 8}, DType::BF16},
        std::pair<Shape, DType>{{3, 5, 7, 3}, DType::F32}})
    for (const Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
      const Tensor x = host_random(shape, rng, dtype, Layout::NHWC, 300.0);
      SCOPED_TRACE(x.describe());
      // Values of about 300 scaled past each format's largest finite value (448 and 57344), so that some saturate.
      const ScaledCast cast{format == Fp8Format::E4M3 ? 3.0f : 300.0f, true, format};
      Tensor want = Tensor::empty(x.shape(), DType::F32, x.layout());
      Tensor cpu_stats = Tensor::empty({kFp8CastStatsBytes}, DType::U8);
      cpu.scaled_cast(x, want, cast, cpu_stats);
      Tensor got = Tensor::empty(x.shape(), format == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2, x.layout(),
                                 gpu().device());
      Tensor gpu_stats = Tensor::empty({kFp8CastStatsBytes}, DType::U8, Layout::NCHW, gpu().device());
      gpu().scaled_cast(to_gpu(x), got, cast, gpu_stats);
      Tensor got32 = Tensor::empty(x.shape(), DType::F32, x.layout(), gpu().device());
      gpu().convert(got, got32);
      const std::vector<float> a = to_float_vector(want), b = to_float_vector(to_host(got32));
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << fp8_format_name(format) << " element " << i;
      Fp8CastStats on_cpu, on_gpu;
      std::memcpy(&on_cpu, cpu_stats.data(), sizeof on_cpu);
      std::memcpy(&on_gpu, to_host(gpu_stats).data(), sizeof on_gpu);
      EXPECT_EQ(on_gpu.amax, on_cpu.amax);
      EXPECT_EQ(on_gpu.saturated, on_cpu.saturated);
      EXPECT_EQ(on_gpu.underflowed, on_cpu.underflowed);
      EXPECT_GT(on_cpu.saturated, 0) << "the scale clips some values: the counts are tested";
    }
}

// The three convolution passes on FP8 operands (E4M3 inputs and weights, E5M2 gradients) against the float64
// reference of the same values, within the FP8 tensor cores' accumulation. And cuDNN's graph API must have run them on
// FP8 (on its first call a pass runs both ways, the FP8 one last).
TEST(CudaFp8, ConvolutionsOnFp8MatchTheFp32ConvolutionsOfTheirValues) {
  SKIP_WITHOUT_FP8();
  Rng rng(43);
  struct Case {
    int64_t c, k, kernel;
    ConvParams p;
  };
  for (const Case& cs : {Case{64, 64, 3, {1, 1}}, Case{64, 128, 1, {2, 0}}}) {
    const int64_t n = 8, hw = 16, out = (hw + 2 * cs.p.padding - cs.kernel) / cs.p.stride + 1;
    const Tensor x = fp8_values({n, cs.c, hw, hw}, rng, Fp8Format::E4M3, Layout::NHWC);
    const Tensor w = fp8_values({cs.k, cs.c, cs.kernel, cs.kernel}, rng, Fp8Format::E4M3, Layout::NHWC);
    const Tensor dy = fp8_values({n, cs.k, out, out}, rng, Fp8Format::E5M2, Layout::NHWC);
    const Tensor x8 = fp8_on_gpu(x, Fp8Format::E4M3), w8 = fp8_on_gpu(w, Fp8Format::E4M3),
                 dy8 = fp8_on_gpu(dy, Fp8Format::E5M2);
    auto f32 = [](const Tensor& like) {
      return Tensor::empty(like.shape(), DType::F32, like.layout(), gpu().device());
    };
    Tensor y8 = f32(dy), dx8 = f32(x), dw8 = f32(w);
    gpu().conv2d_forward(x8, w8, y8, cs.p);
    gpu().conv2d_backward_data(dy8, w8, dx8, cs.p);
    gpu().conv2d_backward_weights(x8, dy8, dw8, cs.p);
    const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
    const int stride = static_cast<int>(cs.p.stride), pad = static_cast<int>(cs.p.padding);
    const std::string shape = ", " + std::to_string(cs.c) + "->" + std::to_string(cs.k);
    const ref::Array want_y = ref::conv2d_forward(rx, rw, stride, pad),
                     magnitude_y = ref::conv2d_forward(magnitudes(rx), magnitudes(rw), stride, pad);
    const ref::Array want_dx = ref::conv2d_backward_data(rdy, rw, x.shape(), stride, pad),
                     magnitude_dx = ref::conv2d_backward_data(magnitudes(rdy), magnitudes(rw), x.shape(), stride, pad);
    expect_within_fp8_accumulation(y8, want_y, magnitude_y, "forward" + shape);
    expect_within_fp8_accumulation(dx8, want_dx, magnitude_dx, "backward data" + shape);
    // Scaled into BF16 as amp-fp8's layers run them (in the convolution's epilogue where cuDNN has an engine for it):
    // a power of two as the factor, exact, so that only BF16's rounding is added (2^-9 of the sum, taken as 2^-8).
    constexpr float kFactor = 0.25f;
    Tensor y16 = Tensor::empty(dy.shape(), DType::BF16, Layout::NHWC, gpu().device()),
           dx16 = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC, gpu().device());
    gpu().conv2d_forward_scaled(x8, w8, y16, cs.p, kFactor);
    gpu().conv2d_backward_data_scaled(dy8, w8, dx16, cs.p, kFactor);
    expect_within_fp8_accumulation(y16, times(want_y, kFactor), times(magnitude_y, kFactor),
                                   "forward scaled into bf16" + shape, 0x1p-8);
    expect_within_fp8_accumulation(dx16, times(want_dx, kFactor), times(magnitude_dx, kFactor),
                                   "backward data scaled into bf16" + shape, 0x1p-8);
    expect_within_fp8_accumulation(
        dw8, ref::conv2d_backward_weights(rx, rdy, w.shape(), stride, pad),
        ref::conv2d_backward_weights(magnitudes(rx), magnitudes(rdy), w.shape(), stride, pad),
        "backward filter" + shape);
  }
  const std::string plans = gpu().conv_plans();
  for (const char* pass : {"fwd ", "bwd-data ", "bwd-filter "}) {
    bool on_fp8 = false;
    std::istringstream lines(plans);
    for (std::string line; std::getline(lines, line);)
      on_fp8 = on_fp8 || (line.rfind(pass, 0) == 0 && line.find(" fp8 ") != std::string::npos &&
                          line.find("graph API, engine") != std::string::npos);
    EXPECT_TRUE(on_fp8) << pass << "ran on no FP8 engine:\n" << plans;
  }
  // Each pass's way (FP8 or widened to FP16) was chosen on its first call, which ran the FP8 engine last where there
  // is one, so that the results above are its.
  EXPECT_NE(plans.find("amp-fp8's pass"), std::string::npos) << plans;
  std::printf("%s", plans.c_str());
}

// A linear layer's three products on FP8 operands against the float64 reference of the same values, within the FP8
// tensor cores' accumulation (cuBLASLt's FP8 form, its operands transposed for the gradients), and the bias gradient
// summed from the FP8 gradient as from the FP32 one. cuBLASLt must have run the products on FP8.
TEST(CudaFp8, LinearProductsOnFp8MatchTheFp32ProductsOfTheirValues) {
  SKIP_WITHOUT_FP8();
  Rng rng(47);
  const int64_t N = 32, I = 64, O = 48;
  const Tensor x = fp8_values({N, I}, rng, Fp8Format::E4M3), w = fp8_values({O, I}, rng, Fp8Format::E4M3);
  const Tensor dy = fp8_values({N, O}, rng, Fp8Format::E5M2), b = host_random({O}, rng, DType::F32);
  const Tensor x8 = fp8_on_gpu(x, Fp8Format::E4M3), w8 = fp8_on_gpu(w, Fp8Format::E4M3),
               dy8 = fp8_on_gpu(dy, Fp8Format::E5M2);
  auto f32 = [](Shape shape) { return Tensor::empty(std::move(shape), DType::F32, Layout::NCHW, gpu().device()); };
  Tensor y8 = f32({N, O});
  gpu().linear_forward(x8, w8, to_gpu(b), y8);
  const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
  const ref::Array rb = ref::from_tensor(b);
  expect_within_fp8_accumulation(y8, ref::linear_forward(rx, rw, rb),
                                 ref::linear_forward(magnitudes(rx), magnitudes(rw), magnitudes(rb)), "forward");
  Tensor dx8 = f32({N, I}), dx32 = f32({N, I}), dw8 = f32({O, I}), dw32 = f32({O, I}), db8 = f32({O}), db32 = f32({O});
  gpu().linear_backward(dy8, x8, w8, dx8, dw8, db8);
  gpu().linear_backward(to_gpu(dy), to_gpu(x), to_gpu(w), dx32, dw32, db32);
  const ref::LinearGrads exact = ref::linear_backward(rdy, rx, rw),
                         magnitude = ref::linear_backward(magnitudes(rdy), magnitudes(rx), magnitudes(rw));
  expect_within_fp8_accumulation(dx8, exact.dx, magnitude.dx, "input gradient");
  expect_within_fp8_accumulation(dw8, exact.dw, magnitude.dw, "weight gradient");
  EXPECT_LE(relative_max_error(db8, db32), 1e-5) << "bias gradient";
  // cuBLASLt planned the three products on FP8: the forward's E4M3 by E4M3, the gradients' two E4M3 by E5M2.
  const std::string plans = gpu().matmul_plans();
  auto planned = [&](const std::string& types) {
    size_t count = 0;
    for (size_t at = plans.find(types + " fp32-accumulate: cuBLASLt"); at != std::string::npos;
         at = plans.find(types + " fp32-accumulate: cuBLASLt", at + 1))
      ++count;
    return count;
  };
  EXPECT_EQ(planned("e4m3xe4m3->f32"), 1u) << plans;
  EXPECT_EQ(planned("e4m3xe5m2->f32"), 2u) << plans;
}

TEST(CudaConvert, UploadIsWaitedForByItsFirstUse) {
  SKIP_WITHOUT_GPU();
  Rng rng(19);
  for (int i = 0; i < 4; ++i) {
    const Tensor batch = host_random({8, 3, 32, 32}, rng, DType::F16, Layout::NHWC);
    const Tensor dev = gpu().upload(batch);
    Tensor y = Tensor::empty(batch.shape(), DType::F16, Layout::NHWC, gpu().device());
    gpu().relu_forward(dev, y);  // the first use waits for the copy
    const std::vector<float> want = to_float_vector(batch), got = to_float_vector(to_host(y));
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], want[k] > 0 ? want[k] : 0.0f) << "batch " << i;
  }
}

// ---- Loss scaler ----------------------------------------------------------------------------------------------

TEST(CudaLossScaler, DynamicScalingSkipsOverflowsAndUnscalesOnTheGpu) {
  SKIP_WITHOUT_GPU();
  LossScaleConfig c;
  c.growth_interval = 2;
  LossScaler scaler(c);
  Parameter p("w", tensor_from_floats({2.0f}, {1}));
  p.value = to_gpu(p.value);
  p.grad = to_gpu(tensor_from_floats({0.0f}, {1}));
  Sgd sgd(gpu(), {OptimizerKind::Sgd, 0.0f});  // no momentum: no optimizer state
  const std::vector<bool> finite = {false, true, true, true, false, true};
  const std::vector<double> after = {32768, 32768, 65536, 65536, 32768, 32768};
  for (size_t i = 0; i < finite.size(); ++i) {
    const float g = finite[i] ? scaler.scale() * 0.5f : std::numeric_limits<float>::infinity();
    gpu().convert(tensor_from_floats({g}, {1}), p.grad);
    const float before = to_float_vector(to_host(p.value))[0];
    const bool stepped = scaler.step(gpu(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); });
    EXPECT_EQ(stepped, finite[i]) << "step " << i;
    const float now = to_float_vector(to_host(p.value))[0];
    if (stepped) {
      EXPECT_EQ(now, before - 0.5f) << "unscaled gradient 0.5 at step " << i;
    } else {
      EXPECT_EQ(now, before) << "a skipped step leaves the weight alone";
    }
    scaler.update();
    EXPECT_EQ(scaler.state().scale, after[i]) << "step " << i;
  }
}

// ---- Loss -------------------------------------------------------------------------------------------------------

// A row with a NaN logit, the label's or another's, is no correct answer on the GPU either, as on the CPU
// (Confusion.NaNLogitsAreNoCorrectAnswer).
TEST(CudaLoss, NaNLogitsAreNoCorrectAnswer) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor logits = to_gpu(tensor_from_floats({nan, nan, nan, /**/ 1, nan, 0, /**/ 0, 4, 1}, {3, 3}));
  const Tensor labels = to_gpu(tensor_from_floats({0, 0, 1}, {3}, DType::I32));
  Tensor dlogits = Tensor::empty({3, 3}, DType::F32, Layout::NCHW, gpu().device());
  gpu().softmax_cross_entropy(logits, labels, 0.0f, GradScale(1.0f), dlogits);
  EXPECT_EQ(gpu().read_scalars().correct, 1) << "the third sample alone";
}

// ---- Device, memory, errors -------------------------------------------------------------------------------------

TEST(CudaDevice, DescriptionMemoryAccountingAndOutOfMemory) {
  SKIP_WITHOUT_GPU();
  const std::string d = gpu().description();
  EXPECT_EQ(d.rfind("cuda:0 (", 0), 0u) << d;
  EXPECT_NE(d.find(cuda_devices().at(0).name), std::string::npos) << d;
  EXPECT_NE(d.find("GiB"), std::string::npos) << d;
  EXPECT_NE(d.find("cuDNN 9."), std::string::npos) << d;
  EXPECT_TRUE(gpu().supports(Op::Conv2d, DType::F16));
  EXPECT_TRUE(gpu().supports(Op::Conv2d, DType::BF16));
  EXPECT_FALSE(gpu().supports(Op::SgdUpdate, DType::F16));

  Allocator& allocator = allocator_for(gpu().device());
  allocator.reset_peak();
  const size_t live = allocator.stats().live_bytes;
  {
    Tensor a = Tensor::empty({64 << 20}, DType::U8, Layout::NCHW, gpu().device());
    EXPECT_GE(allocator.stats().live_bytes, live + (64u << 20));
  }
  EXPECT_EQ(allocator.stats().live_bytes, live);
  EXPECT_GE(allocator.stats().peak_live_bytes, live + (64u << 20));
  EXPECT_GE(allocator.stats().cached_bytes, 64u << 20) << "freed blocks are kept for reuse";
  EXPECT_EQ(gpu().memory_stats().peak_live_bytes, allocator.stats().peak_live_bytes);

  try {
    Tensor huge = Tensor::empty({int64_t{1} << 50}, DType::U8, Layout::NCHW, gpu().device());  // 1 PiB
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of GPU memory"), std::string::npos) << what;
    EXPECT_NE(what.find("smaller batch size"), std::string::npos) << what;
  }
  // The backend still works after the failure.
  const Tensor x = tensor_from_floats({-1.0f, 2.0f}, {2});
  Tensor y = Tensor::empty({2}, DType::F32, Layout::NCHW, gpu().device());
  gpu().relu_forward(to_gpu(x), y);
  EXPECT_EQ(to_float_vector(to_host(y)), (std::vector<float>{0.0f, 2.0f}));
}

TEST(CudaDevice, HostTensorsAreRefusedByNameAndAutoPicksTheGpu) {
  SKIP_WITHOUT_GPU();
  const Tensor host = tensor_from_floats({1.0f}, {1});
  Tensor out = Tensor::empty({1}, DType::F32, Layout::NCHW, gpu().device());
  try {
    gpu().relu_forward(host, out);
    FAIL() << "a host tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not on cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(make_backend(DeviceChoice::automatic())->device(), Device::cuda(0));
  EXPECT_THROW(make_backend(DeviceChoice::cuda(cuda_device_count())), Error);
}

// ---- Without a GPU (these run on every machine of a CUDA build) ---------------------------------------------------

TEST(CudaWithoutGpu, CudaIsRefusedClearlyAndAutoPicksTheCpu) {
  if (have_gpu())
    GTEST_SKIP() << test::kDoesNotApply << "a GPU is present: the no-GPU behaviour cannot be observed here";
  for (const char* name : {"cuda", "cuda:0", "cuda:1"}) {
    try {
      make_backend(parse_device(name));
      FAIL() << name << " accepted without a GPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no usable CUDA GPU"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(make_backend(DeviceChoice::automatic(), {1})->device(), Device::cpu());
  EXPECT_THROW(CudaBackend{}, Error);
  try {
    Tensor::empty({4}, DType::F32, Layout::NCHW, Device::cuda(0));
    FAIL() << "a CUDA tensor was allocated without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a usable CUDA device"), std::string::npos) << e.what();
  }
}

TEST(CudaWithoutGpu, MalformedDeviceNamesAreRefusedByName) {
  for (const char* name : {"cuda:", "cuda:x", "cuda0", "cuda:-1", "cudaa"}) {
    try {
      make_backend(parse_device(name));
      FAIL() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown device"), std::string::npos) << name << ": " << e.what();
    }
  }
}

TEST(CudaCheck, FailedCallsAreReportedWithTheCallAndTheError) {
  // Runs with or without a GPU: device 9999 never exists (and without a driver the call fails anyway).
  try {
    CUDA_CHECK(cudaSetDevice(9999));
    FAIL() << "cudaSetDevice(9999) succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA call cudaSetDevice(9999) failed: cudaError"), std::string::npos) << what;
    EXPECT_NE(what.find("test_cuda_ops.cpp"), std::string::npos) << what;
  }
  // With a GPU the failed call's error is cleared; without a driver the runtime's error 35 stays (sticky).
  if (have_gpu()) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed call's error is cleared";
  }
}

}  // namespace
}  // namespace ampwb
