// cuBLASLt matrix products for the linear layers: one plan (operation and layout descriptors, the heuristic's
// algorithm) per shape, type and compute mode, cached under an explicit key; the workspace is the runner's fixed
// 32 MiB, passed to the heuristic as the limit.
#include <sstream>

#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_library_check.h"

namespace ampwb::cuda {
namespace {
const char* type_text(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F:
      return "f32";
    case CUDA_R_16F:
      return "f16";
    case CUDA_R_16BF:
      return "bf16";
    case CUDA_R_8F_E4M3:
      return "e4m3";
    case CUDA_R_8F_E5M2:
      return "e5m2";
    default:
      return "other";
  }
}
}  // namespace

std::string MatmulShape::key() const {
  std::ostringstream out;
  out << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N') << " m" << m << " n" << n << " k" << k << " lda" << lda
      << " ldb" << ldb << " ldd" << ldd << ' ' << type_text(a_type) << 'x' << type_text(b_type) << "->"
      << type_text(d_type) << (compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? " tf32" : " fp32-accumulate");
  return out.str();
}

struct MatmulRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

MatmulRunner::MatmulRunner(cublasLtHandle_t handle) : handle_(handle) {}
MatmulRunner::~MatmulRunner() = default;

MatmulRunner::Plan* MatmulRunner::plan(const MatmulShape& s, size_t workspace_bytes) {
  const std::string key = s.key();
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, s.compute, CUDA_R_32F));  // FP32 alpha and beta
  const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Stored shapes (column-major): A is (m x k) or, transposed, (k x m); likewise B (k x n) or (n x k).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, s.a_type, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, s.b_type, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, s.d_type, s.m, s.n, s.ldd));
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                  &workspace_bytes, sizeof(workspace_bytes));
  const cublasStatus_t heuristic =
      set == CUBLAS_STATUS_SUCCESS
          ? cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->d, p->d, preference, 1, &result, &found)
          : set;
  cublasLtMatmulPreferenceDestroy(preference);
  // No algorithm: cuBLASLt answers NOT_SUPPORTED, or success with none found.
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED || (heuristic == CUBLAS_STATUS_SUCCESS && found == 0)) {
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  CUBLAS_CHECK(heuristic);
  p->algo = result.algo;
  return plans_.emplace(key, std::move(p)).first->second.get();
}

std::string MatmulRunner::describe() const {
  std::ostringstream out;
  for (const auto& [key, p] : plans_) out << key << (p ? ": cuBLASLt\n" : ": no algorithm\n");
  return out.str();
}

bool MatmulRunner::has_algorithm(const MatmulShape& s, size_t workspace_bytes) {
  return plan(s, workspace_bytes) != nullptr;
}

void MatmulRunner::run(const MatmulShape& s, const void* a, const void* b, void* d, float beta, void* workspace,
                       size_t workspace_bytes, cudaStream_t stream) {
  if (s.m == 0 || s.n == 0) return;
  const Plan* p = plan(s, workspace_bytes);
  if (!p) throw Error("cuBLASLt has no algorithm for the matrix product " + s.key());
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p->op, &alpha, a, p->a, b, p->b, &beta, d, p->d, d, p->d, &p->algo, workspace,
                              workspace_bytes, stream));
}

}  // namespace ampwb::cuda
