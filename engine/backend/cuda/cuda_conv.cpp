// cuDNN convolutions through the legacy C API: forward, backward data and backward filter. A plan (descriptors,
// algorithm, math type, workspace size) is made once per shape under an explicit key and reused; the workspace size
// is queried for the chosen algorithm before execution and never exceeds the limit. Where the build has
// cudnn-frontend, cuDNN's graph API (cuda_conv_frontend.cpp) runs the passes it is faster on (ConvApi).
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_library_check.h"

namespace ampwb::cuda {
namespace {

const char* dtype_text(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return "f32";
    case CUDNN_DATA_HALF:
      return "f16";
    case CUDNN_DATA_BFLOAT16:
      return "bf16";
    case CUDNN_DATA_FP8_E4M3:
      return "e4m3";
    case CUDNN_DATA_FP8_E5M2:
      return "e5m2";
    default:
      return "other";
  }
}

const char* math_text(ConvMath m) {
  switch (m) {
    case ConvMath::Fp32:
      return "fp32";
    case ConvMath::Tf32:
      return "tf32";
    case ConvMath::TensorOp:
      return "tensor-op";
  }
  return "?";
}

const char* math_type_text(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor-op-allow-conversion";
    case CUDNN_FMA_MATH:
      return "fma";
  }
  return "?";
}

cudnnMathType_t requested_math_type(ConvMath m) {
  switch (m) {
    case ConvMath::Fp32:
      return CUDNN_FMA_MATH;
    case ConvMath::Tf32:
      return CUDNN_DEFAULT_MATH;
    case ConvMath::TensorOp:
      return CUDNN_TENSOR_OP_MATH;
  }
  return CUDNN_FMA_MATH;
}

// Whether an algorithm's math type honours the mode: strict FP32 takes no tensor-core math; no mode lets cuDNN
// convert FP32 data down to FP16 (that would be neither FP32 nor TF32).
bool math_allowed(ConvMath mode, cudnnMathType_t m) {
  if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return mode == ConvMath::TensorOp;
  if (mode == ConvMath::Fp32) return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH;
  return true;
}

}  // namespace

std::string mib(size_t bytes) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

std::string ms_text(float ms) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(3);
  out << ms << " ms";
  return out.str();
}

std::string ConvShape::key(const char* op) const {
  std::ostringstream out;
  out << op << " n" << n << " c" << c << " h" << h << " w" << w << " k" << k << " r" << r << " s" << s << " p" << p
      << " q" << q << " stride" << stride << " pad" << padding << ' ' << dtype_text(dtype)
      << (nhwc ? " nhwc " : " nchw ") << math_text(math);
  if (mixed) out << (fp8_inputs() ? " fp8 " : " widened ") << dtype_text(a_type) << 'x' << dtype_text(b_type);
  if (scaled) out << " scaled";
  return out.str();
}

struct ConvRunner::Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool chosen = false;
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  float ms = -1;  // the chosen algorithm's time as cudnnFind measured it; negative where nothing was timed
  enum class Api { Undecided, Graph, Legacy } api = Api::Undecided;

  ~Plan() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
};

ConvRunner::ConvRunner(cudnnHandle_t handle, const ConvPolicy& policy) : handle_(handle), policy_(policy) {
  if (policy.api == ConvApi::Legacy) return;
  try {
    graph_api_ = std::make_unique<GraphApiConvs>(handle, policy);
  } catch (const Error&) {
    if (policy.api == ConvApi::Graph) throw;  // asked for by name
    policy_.api = ConvApi::Legacy;            // the faster API of one: the legacy API alone
  }
}

ConvRunner::~ConvRunner() = default;

ConvRunner::Plan& ConvRunner::plan(const std::string& key, const ConvShape& s) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const cudnnTensorFormat_t format = s.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, format, s.dtype, s.n, s.c, s.h, s.w));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, format, s.dtype, s.n, s.k, s.p, s.q));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, s.dtype, format, s.k, s.c, s.r, s.s));
  // FP32 accumulation for every data type (PyTorch's choice for FP16 and BF16 too).
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, s.padding, s.padding, s.stride, s.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, requested_math_type(s.math)));
  // cuDNN's own check of the output shape against ours.
  int n = 0, k = 0, pp = 0, q = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &k, &pp, &q));
  if (n != s.n || k != s.k || pp != s.p || q != s.q) {
    std::ostringstream out;
    out << "convolution " << key << ": cuDNN computes an output of " << n << "x" << k << "x" << pp << "x" << q;
    throw Error(out.str());
  }
  return *plans_.emplace(key, std::move(p)).first->second;
}

int choose_timed(const std::vector<TimedCandidate>& candidates, const ConvPolicy& policy) {
  const size_t large_limit = std::max(policy.large_workspace_limit, policy.workspace_limit);
  const TimedCandidate *small = nullptr, *large = nullptr;  // the fastest within each limit
  for (const TimedCandidate& c : candidates) {
    if (c.workspace <= policy.workspace_limit && (!small || c.ms < small->ms)) small = &c;
    if (c.workspace <= large_limit && (!large || c.ms < large->ms)) large = &c;
  }
  const bool large_pays = large && (!small || large->ms * policy.large_workspace_speedup <= small->ms);
  const TimedCandidate* kept = large_pays ? large : small;
  return kept ? static_cast<int>(kept - candidates.data()) : -1;
}

void* ConvRunner::find_workspace(const ScratchFn& scratch, size_t& size) const {
  for (size = std::max(policy_.large_workspace_limit, policy_.workspace_limit); size >= (size_t{1} << 20); size /= 4) {
    try {
      return scratch(size);
    } catch (const Error&) {
      // Out of memory for this much: benchmark with less (algorithms needing more are then not considered).
    }
  }
  size = 0;
  return nullptr;
}

namespace {

// GEMM-based algorithms: FP32 sums of products as the reference computes them. FFT and Winograd transform the data
// first, as PyTorch lets them; ConvPolicy::exact_fp32 leaves them out of strict FP32.
bool gemm_based(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool gemm_based(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool gemm_based(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// Whether a search result may be taken: it succeeded, fits the limit, honours the math mode and the policy.
template <class Perf>
bool acceptable(const Perf& r, size_t limit, ConvMath mode, const ConvPolicy& policy) {
  if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit || !math_allowed(mode, r.mathType)) return false;
  if (policy.deterministic && r.determinism != CUDNN_DETERMINISTIC) return false;
  return !(mode == ConvMath::Fp32 && policy.exact_fp32 && !gemm_based(r.algo));
}

constexpr size_t kNoWorkspace = SIZE_MAX;  // what a workspace query cuDNN refused returns

[[noreturn]] void no_algorithm(const std::string& key, size_t limit) {
  throw Error("cuDNN has no algorithm for convolution " + key + " within a " + mib(limit) +
              " workspace (the data type or layout may be unsupported on this GPU)");
}

// Fixes the plan's algorithm and math type (strict FP32 stays on FMA math whatever the result says).
template <class Perf>
void adopt(cudnnConvolutionDescriptor_t conv, const Perf& r, ConvMath mode, int& algo, cudnnMathType_t& math) {
  algo = static_cast<int>(r.algo);
  math = mode == ConvMath::Fp32 ? CUDNN_FMA_MATH : r.mathType;
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
}

}  // namespace

// One pass's cuDNN calls: how many results a search returns, the timed search (Find*Ex) in a workspace, the
// heuristics (_v7), and an algorithm's workspace under the math type set on the descriptor.
template <class MaxCount, class Find, class Heuristics, class WorkspaceOf>
struct ConvRunner::SearchCalls {
  MaxCount max_count;
  Find find;
  Heuristics heuristics;
  WorkspaceOf workspace_of;
};

template <class Perf, class Calls>
void* ConvRunner::prepare(Plan& p, const std::string& key, ConvMath math, const ScratchFn& scratch,
                          const Calls& calls) {
  if (p.chosen) return p.workspace ? scratch(p.workspace) : nullptr;
  if (capturing_)
    throw Error("a convolution whose algorithm cuDNN has not chosen yet (" + key +
                "): the step is captured once eager steps have run every shape");
  const int max_count = std::max(calls.max_count(), 1);
  int count = 0;
  std::vector<Perf> results(static_cast<size_t>(max_count));
  size_t limit = policy_.workspace_limit;
  void* search_workspace = nullptr;
  if (policy_.benchmark) {
    search_workspace = find_workspace(scratch, limit);
    calls.find(search_workspace, limit, max_count, &count, results.data());
  } else {
    calls.heuristics(max_count, &count, results.data());
  }
  // Results arrive fastest first (Find) or best first (_v7). The heuristics' memory figures are estimates, so each
  // candidate's workspace is asked again under its math type (one that cuDNN will not size under that math type,
  // kNoWorkspace, is passed over). The heuristics' first that fits is kept; of the timed ones, choose_timed's.
  std::vector<TimedCandidate> fits;
  std::vector<int> result_of;  // fits[j] is results[result_of[j]]
  for (int i = 0; i < count && (policy_.benchmark || fits.empty()); ++i) {
    if (!acceptable(results[i], limit, math, policy_)) continue;
    adopt(p.conv, results[i], math, p.algo, p.math);
    const size_t workspace = calls.workspace_of(results[i].algo);
    if (workspace > limit) continue;
    fits.push_back({results[i].time, workspace});
    result_of.push_back(i);
  }
  const int best = policy_.benchmark ? choose_timed(fits, policy_) : fits.empty() ? -1 : 0;
  if (best < 0) no_algorithm(key, limit);
  const auto kept = static_cast<size_t>(best);
  adopt(p.conv, results[result_of[kept]], math, p.algo, p.math);
  p.workspace = fits[kept].workspace;
  if (policy_.benchmark) p.ms = fits[kept].ms;
  p.chosen = true;
  // The first execution reuses the search's workspace rather than holding a second one beside it.
  if (p.workspace == 0) return nullptr;
  return search_workspace ? search_workspace : scratch(p.workspace);
}

template <class Perf, class Calls, class Execute>
void ConvRunner::run(ConvPass pass, Plan& p, const std::string& key, const ConvShape& s, const void* a, const void* b,
                     void* out, const ScratchFn& scratch, const Calls& calls, const Execute& execute) {
  if (graph_api_ && p.api != Plan::Api::Legacy && graph_api_->run(pass, s, a, b, out, scratch, capturing_)) {
    if (p.api == Plan::Api::Graph) return;
    // The shape's first call: with ConvApi::Fastest and timing, the legacy API's fastest algorithm is timed too.
    const TimedCandidate graph = graph_api_->timed(pass, s);
    if (policy_.api == ConvApi::Fastest && graph.ms >= 0) {
      void* workspace = nullptr;
      try {
        workspace = prepare<Perf>(p, key, s.math, scratch, calls);
      } catch (const Error&) {  // no legacy algorithm within the limits: the graph API's engine it is
      }
      // The faster, as choose_timed weighs a larger workspace.
      if (p.chosen && p.ms >= 0 && choose_timed({graph, {p.ms, p.workspace}}, policy_) == 1) {
        graph_api_->decline(pass, s, "faster: " + ms_text(p.ms) + " against the graph API's " + ms_text(graph.ms));
        p.api = Plan::Api::Legacy;
        return execute(workspace);
      }
      p.api = Plan::Api::Graph;
      // out again: the timing left another algorithm's there.
      if (graph_api_->run(pass, s, a, b, out, scratch, capturing_)) return;
      p.api = Plan::Api::Legacy;
      return execute(prepare<Perf>(p, key, s.math, scratch, calls));
    }
    p.api = Plan::Api::Graph;
    return;
  }
  execute(prepare<Perf>(p, key, s.math, scratch, calls));
}

const char* pass_key(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward:
      return "fwd";
    case ConvPass::BackwardData:
      return "bwd-data";
    case ConvPass::BackwardFilter:
      return "bwd-filter";
  }
  return "?";
}

void ConvRunner::forward(const ConvShape& s, const void* x, const void* w, void* y, const ScratchFn& scratch) {
  const std::string key = s.key(pass_key(ConvPass::Forward));
  Plan& p = plan(key, s);
  run<cudnnConvolutionFwdAlgoPerf_t>(
      ConvPass::Forward, p, key, s, x, w, y, scratch,
      SearchCalls{[&] {
                    int n = 0;
                    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle_, &n));
                    return n;
                  },
                  [&](void* space, size_t bytes, int max, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
                    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle_, p.x, x, p.w, w, p.conv, p.y, y, max,
                                                                       count, results, space, bytes));
                  },
                  [&](int max, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
                    CUDNN_CHECK(
                        cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.x, p.w, p.conv, p.y, max, count, results));
                  },
                  [&](cudnnConvolutionFwdAlgo_t algo) {
                    size_t bytes = 0;
                    return cudnnGetConvolutionForwardWorkspaceSize(handle_, p.x, p.w, p.conv, p.y, algo, &bytes) ==
                                   CUDNN_STATUS_SUCCESS
                               ? bytes
                               : kNoWorkspace;
                  }},
      [&](void* ws) {
        const float alpha = 1.0f, beta = 0.0f;
        CUDNN_CHECK(cudnnConvolutionForward(handle_, &alpha, p.x, x, p.w, w, p.conv,
                                            static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), ws, p.workspace, &beta, p.y,
                                            y));
      });
}

void ConvRunner::backward_data(const ConvShape& s, const void* dy, const void* w, void* dx, const ScratchFn& scratch) {
  const std::string key = s.key(pass_key(ConvPass::BackwardData));
  Plan& p = plan(key, s);
  run<cudnnConvolutionBwdDataAlgoPerf_t>(
      ConvPass::BackwardData, p, key, s, dy, w, dx, scratch,
      SearchCalls{[&] {
                    int n = 0;
                    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle_, &n));
                    return n;
                  },
                  [&](void* space, size_t bytes, int max, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
                    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(handle_, p.w, w, p.y, dy, p.conv, p.x, dx,
                                                                            max, count, results, space, bytes));
                  },
                  [&](int max, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
                    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p.w, p.y, p.conv, p.x, max, count,
                                                                            results));
                  },
                  [&](cudnnConvolutionBwdDataAlgo_t algo) {
                    size_t bytes = 0;
                    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, p.w, p.y, p.conv, p.x, algo, &bytes) ==
                                   CUDNN_STATUS_SUCCESS
                               ? bytes
                               : kNoWorkspace;
                  }},
      [&](void* ws) {
        const float alpha = 1.0f, beta = 0.0f;
        CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &alpha, p.w, w, p.y, dy, p.conv,
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), ws, p.workspace,
                                                 &beta, p.x, dx));
      });
}

void ConvRunner::backward_filter(const ConvShape& s, const void* x, const void* dy, void* dw,
                                 const ScratchFn& scratch) {
  const std::string key = s.key(pass_key(ConvPass::BackwardFilter));
  Plan& p = plan(key, s);
  run<cudnnConvolutionBwdFilterAlgoPerf_t>(
      ConvPass::BackwardFilter, p, key, s, x, dy, dw, scratch,
      SearchCalls{[&] {
                    int n = 0;
                    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle_, &n));
                    return n;
                  },
                  [&](void* space, size_t bytes, int max, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
                    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle_, p.x, x, p.y, dy, p.conv, p.w, dw,
                                                                              max, count, results, space, bytes));
                  },
                  [&](int max, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
                    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p.x, p.y, p.conv, p.w, max,
                                                                              count, results));
                  },
                  [&](cudnnConvolutionBwdFilterAlgo_t algo) {
                    size_t bytes = 0;
                    return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, p.x, p.y, p.conv, p.w, algo,
                                                                          &bytes) == CUDNN_STATUS_SUCCESS
                               ? bytes
                               : kNoWorkspace;
                  }},
      [&](void* ws) {
        const float alpha = 1.0f, beta = 0.0f;
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &alpha, p.x, x, p.y, dy, p.conv,
                                                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), ws,
                                                   p.workspace, &beta, p.w, dw));
      });
}

bool ConvRunner::mixed(ConvPass pass, const ConvShape& s, const void* a, const void* b, void* out,
                       const ScratchFn& scratch, const float* scale) {
  if (!GraphApiConvs::compiled()) return false;
  if (!mixed_graph_api_) mixed_graph_api_ = std::make_unique<GraphApiConvs>(handle_, policy_);
  return mixed_graph_api_->run(pass, s, a, b, out, scratch, capturing_, scale);
}

float ConvRunner::mixed_ms(ConvPass pass, const ConvShape& s) const {
  return mixed_graph_api_ ? mixed_graph_api_->timed(pass, s).ms : -1.0f;
}

size_t ConvRunner::plans_cached() const {
  size_t count = graph_api_ ? graph_api_->plans_run() : 0;
  for (const auto& [key, p] : plans_) count += p->chosen && p->api != Plan::Api::Graph;
  return count;
}

std::string ConvRunner::describe_plans() const {
  std::ostringstream out;
  if (graph_api_) out << graph_api_->describe();
  if (mixed_graph_api_) out << mixed_graph_api_->describe();
  for (const auto& [key, p] : plans_) {
    if (!p->chosen) continue;
    out << key << ": " << (p->api == Plan::Api::Graph ? "timed, slower than the graph API: " : "") << "algo " << p->algo
        << " (" << math_type_text(p->math) << "), " << mib(p->workspace) << " workspace";
    if (p->ms >= 0) out << ", " << ms_text(p->ms);
    out << '\n';
  }
  return out.str();
}

}  // namespace ampwb::cuda
