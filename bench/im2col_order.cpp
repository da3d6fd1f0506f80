// im2col into OIHW-ordered rows, as the products of small-image convolutions take them
// (cpu_backend_gemm_conv.cpp): the engine's loop now, which points at a row's input pixels and writes the row
// front to back, against the loop it replaced, which wrote tap by tap at a stride of R*S elements (kept here as it
// was). ResNet-18's 3x3 shapes at 64 px, batch 32, 16-bit and 32-bit elements; best of 20 runs each (the loop now
// with its allocation of the patches, the old one into patches made once), on THREADS threads (default 2).
// usage: ampwb_im2col_order [THREADS]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend_impl.h"
#include "bench_util.h"

namespace {
using namespace ampwb;

template <class Element>
void tap_by_tap(const Tensor& x, Tensor& patches, int64_t R, int64_t S, ConvParams p, int64_t P, int64_t Q,
                int threads) {
  const int64_t H = x.h(), W = x.w(), C = x.c(), rows = x.n() * P * Q, columns = C * R * S;
  const auto* in = static_cast<const Element*>(x.data());
  auto* patch = static_cast<Element*>(patches.data());
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t n = row / (P * Q), out_h = row / Q % P, out_w = row % Q;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t h = out_h * p.stride - p.padding + r, w = out_w * p.stride - p.padding + s;
        const bool inside = h >= 0 && h < H && w >= 0 && w < W;
        const Element* pixel = inside ? in + ((n * H + h) * W + w) * C : nullptr;
        Element* tap = patch + row * columns + r * S + s;
        for (int64_t c = 0; c < C; ++c) tap[c * R * S] = inside ? pixel[c] : Element{0};
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  struct Shape {
    int64_t size, channels, stride;
  };
  std::printf("%-22s %12s %12s %8s %12s %12s %8s\n", "3x3, batch 32", "16-bit was", "16-bit now", "same", "32-bit was",
              "32-bit now", "same");
  for (const Shape& s : {Shape{2, 512, 1}, Shape{4, 256, 1}, Shape{4, 256, 2}, Shape{8, 128, 2}}) {
    const ConvParams p{static_cast<int>(s.stride), 1};
    const int64_t P = (s.size + 2 - 3) / s.stride + 1;
    char name[64];
    std::snprintf(name, sizeof name, "%ldx%ld %ld ch, stride %ld", static_cast<long>(s.size), static_cast<long>(s.size),
                  static_cast<long>(s.channels), static_cast<long>(s.stride));
    std::printf("%-22s", name);
    for (DType type : {DType::BF16, DType::F32}) {
      Tensor x = Tensor::empty({32, s.channels, s.size, s.size}, type, Layout::NHWC);
      auto* bytes = static_cast<unsigned char*>(x.data());
      for (int64_t i = 0; i < static_cast<int64_t>(x.nbytes()); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
      Tensor was = Tensor::empty({32 * P * P, s.channels * 9}, type), now;
      const double was_ms = bench::best_ms(
          [&] {
            if (type == DType::F32)
              tap_by_tap<uint32_t>(x, was, 3, 3, p, P, P, threads);
            else
              tap_by_tap<uint16_t>(x, was, 3, 3, p, P, P, threads);
          },
          20);
      const double now_ms = bench::best_ms([&] { now = cpu_detail::im2col(x, 3, 3, true, p, P, P, threads); }, 20);
      const bool same = std::memcmp(was.data(), now.data(), was.nbytes()) == 0;
      std::printf(" %9.3f ms %9.3f ms %8s", was_ms, now_ms, same ? "yes" : "NO");
    }
    std::printf("\n");
  }
}
