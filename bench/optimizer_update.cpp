// The optimizer's update of ResNet-18's parameters (11.7 M, 62 tensors) on the CPU, as the trainer calls it: SGD with
// momentum and weight decay, the gradients checked inside; FP32 (FP32 gradients) and amp-bf16 (BF16 gradients, the
// BF16 compute copy written). Medians of 31 updates after 3, and the bytes a parameter moves over that time.
// usage: ampwb_optimizer_update [THREADS]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_util.h"
#include "core/rng.h"
#include "models/resnet.h"

int main(int argc, char** argv) {
  using namespace ampwb;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  CpuBackend backend({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  Rng rng(1);
  ResNet model(backend, {18, 1000, 3, 64, Stem::Auto}, rng);
  std::printf("%s\n", model.summary().c_str());
  for (const DType grad_type : {DType::F32, DType::BF16}) {
    std::vector<ParamUpdate> updates;
    int64_t count = 0;
    for (Parameter* p : model.parameters()) {
      const Tensor& w = p->value;
      ParamUpdate u;
      u.param = w;
      u.grad = Tensor::zeros(w.shape(), grad_type, w.layout());
      u.state1 = Tensor::zeros(w.shape(), DType::F32, w.layout());
      if (grad_type == DType::BF16) u.copy = Tensor::empty(w.shape(), DType::BF16, w.layout());
      updates.push_back(u);
      count += w.numel();
    }
    SgdParams sgd{0.01f, 0.9f, 5e-4f, false, false};
    sgd.check_gradients = argc > 2 ? std::atoi(argv[2]) != 0 : true;
    std::vector<double> ms;
    for (int i = 0; i < 34; ++i) {
      const auto start = bench::Clock::now();
      backend.sgd_update(updates, sgd);
      if (i >= 3) ms.push_back(bench::seconds_since(start) * 1e3);
    }
    const double bytes = 20.0 * static_cast<double>(count);  // master and momentum both ways, gradient (+ copy)
    std::printf("%-5s gradients: %.3f ms an update (median of %zu), %.1f GB/s at 20 bytes a parameter\n",
                dtype_name(grad_type), bench::median(ms), ms.size(), bytes / bench::median(ms) / 1e6);
  }
}
