#include "backend/cpu/winograd.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/convert16.h"
#include "core/error.h"
#include "core/simd.h"

namespace ampwb::cpu_detail {

namespace {

constexpr int kPoints = 16;  // a 4x4 input tile gives a 2x2 output tile; one matrix product per point
// At most 256 x 256 channels: the transformed weights and the weight gradient's sum (16 x 4 bytes per channel pair
// each, 4 MiB there) grow with the pairs; at 512 x 512 (ResNet's last stage, whose backward pass runs at the step's
// peak memory) they would raise the peak for a convolution over 7x7 images only 1.2x faster.
constexpr int64_t kMaxChannelPairs = 256 * 256;
// Images of at least 12x12 pixels: on smaller ones a batch's activations are small next to the transformed weights
// and the scratch, and at ResNet-20's last stage (64 channels, 8x8) the data gradient runs at the step's peak
// memory, which Winograd raised by 1.1 MiB (0.6%); at 14x14 and above (ResNet-18) the peaks were unchanged.
constexpr int64_t kMinImageSide = 12;
// Tiles per chunk, the unit one thread transforms and multiplies: the best of 32, 64 and 128 at 128 to 512 channels
// on Zen 1 (their transformed input and products, 16 x 64 x channels each, stay within L2 up to 256 channels).
constexpr int64_t kTiles = 64;

// The 16 transformed input points B^T d B of one tile, channel by channel, with
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]; d[a][b] is the tile's pixel in row a, column b (zeros outside the
// image), v the first point's channels, the next point `point_stride` floats on.
[[gnu::always_inline]] inline void transform_input_body(const float* const d[4][4], float* v, int64_t point_stride,
                                                        int64_t channels) {
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) {
    float e[4][4];  // B^T d: the rows combined
    for (int b = 0; b < 4; ++b) {
      const float d0 = d[0][b][c], d1 = d[1][b][c], d2 = d[2][b][c], d3 = d[3][b][c];
      e[0][b] = d0 - d2;
      e[1][b] = d1 + d2;
      e[2][b] = d2 - d1;
      e[3][b] = d1 - d3;
    }
    for (int a = 0; a < 4; ++a) {  // (B^T d) B: the columns
      v[(a * 4 + 0) * point_stride + c] = e[a][0] - e[a][2];
      v[(a * 4 + 1) * point_stride + c] = e[a][1] + e[a][2];
      v[(a * 4 + 2) * point_stride + c] = e[a][2] - e[a][1];
      v[(a * 4 + 3) * point_stride + c] = e[a][1] - e[a][3];
    }
  }
}

// The 2x2 output tile A^T m A from the 16 products m of one tile, A^T = [1 1 1 0; 0 1 -1 -1]; y[a][b] is the
// output pixel in row a, column b (a scratch pixel where the tile overhangs the image).
[[gnu::always_inline]] inline void transform_output_body(const float* m, int64_t point_stride, float* const y[2][2],
                                                         int64_t channels) {
#pragma omp simd
  for (int64_t k = 0; k < channels; ++k) {
    float f[2][4];  // A^T m: the rows combined
    for (int b = 0; b < 4; ++b) {
      const float m0 = m[(0 * 4 + b) * point_stride + k], m1 = m[(1 * 4 + b) * point_stride + k];
      const float m2 = m[(2 * 4 + b) * point_stride + k], m3 = m[(3 * 4 + b) * point_stride + k];
      f[0][b] = m0 + m1 + m2;
      f[1][b] = m1 - m2 - m3;
    }
    for (int a = 0; a < 2; ++a) {  // (A^T m) A: the columns
      y[a][0][k] = f[a][0] + f[a][1] + f[a][2];
      y[a][1][k] = f[a][1] - f[a][2] - f[a][3];
    }
  }
}

// The same loops compiled for AVX2 and for any x86-64: only additions, subtractions (no products to fuse), so both
// give the same bits.
void transform_input(const float* const d[4][4], float* v, int64_t point_stride, int64_t channels) {
  transform_input_body(d, v, point_stride, channels);
}
[[gnu::target("avx2")]] void transform_input_avx2(const float* const d[4][4], float* v, int64_t point_stride,
                                                  int64_t channels) {
  transform_input_body(d, v, point_stride, channels);
}
void transform_output(const float* m, int64_t point_stride, float* const y[2][2], int64_t channels) {
  transform_output_body(m, point_stride, y, channels);
}
[[gnu::target("avx2")]] void transform_output_avx2(const float* m, int64_t point_stride, float* const y[2][2],
                                                   int64_t channels) {
  transform_output_body(m, point_stride, y, channels);
}

// The 16 points A dy A^T of one output tile's gradient (the adjoint of transform_output), channel by channel;
// dy[a][b] is the gradient at output row a, column b (zeros where the tile overhangs the image).
[[gnu::always_inline]] inline void transform_gradient_body(const float* const dy[2][2], float* g, int64_t point_stride,
                                                           int64_t channels) {
#pragma omp simd
  for (int64_t k = 0; k < channels; ++k) {
    float e[4][2];  // A dy: the rows
    for (int b = 0; b < 2; ++b) {
      const float d0 = dy[0][b][k], d1 = dy[1][b][k];
      e[0][b] = d0;
      e[1][b] = d0 + d1;
      e[2][b] = d0 - d1;
      e[3][b] = -d1;
    }
    for (int a = 0; a < 4; ++a) {  // (A dy) A^T: the columns
      g[(a * 4 + 0) * point_stride + k] = e[a][0];
      g[(a * 4 + 1) * point_stride + k] = e[a][0] + e[a][1];
      g[(a * 4 + 2) * point_stride + k] = e[a][0] - e[a][1];
      g[(a * 4 + 3) * point_stride + k] = -e[a][1];
    }
  }
}
void transform_gradient(const float* const dy[2][2], float* g, int64_t point_stride, int64_t channels) {
  transform_gradient_body(dy, g, point_stride, channels);
}
[[gnu::target("avx2")]] void transform_gradient_avx2(const float* const dy[2][2], float* g, int64_t point_stride,
                                                     int64_t channels) {
  transform_gradient_body(dy, g, point_stride, channels);
}

// u (16, K, C): G g G^T for every kernel g = w[k][c] (3x3), G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]; with
// flip, g is w[k][c] turned by 180 degrees, as the data gradient needs.
Tensor transform_weights(const Tensor& w, bool flip, int threads) {
  const int64_t K = w.n(), C = w.c();
  // Element (k, c, r, s) at k * 9C + c * channel_stride + r * row_stride + s * column_stride (OIHW or OHWI).
  const bool ohwi = w.layout() == Layout::NHWC;
  const int64_t channel_stride = ohwi ? 1 : 9, row_stride = ohwi ? 3 * C : 3, column_stride = ohwi ? C : 1;
  Tensor u = Tensor::empty({kPoints, K, C}, DType::F32);
  const float* weights = w.data_as<const float>();
  float* transformed = u.data_as<float>();
  const int64_t point_stride = K * C;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t k = 0; k < K; ++k) {
    const float* kernels = weights + k * 9 * C;
    float* out = transformed + k * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float g[3][3], gg[4][3];
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s)
          g[flip ? 2 - r : r][flip ? 2 - s : s] = kernels[c * channel_stride + r * row_stride + s * column_stride];
      for (int s = 0; s < 3; ++s) {  // G g
        gg[0][s] = g[0][s];
        gg[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
        gg[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
        gg[3][s] = g[2][s];
      }
      for (int a = 0; a < 4; ++a) {  // (G g) G^T
        out[(a * 4 + 0) * point_stride + c] = gg[a][0];
        out[(a * 4 + 1) * point_stride + c] = 0.5f * (gg[a][0] + gg[a][1] + gg[a][2]);
        out[(a * 4 + 2) * point_stride + c] = 0.5f * (gg[a][0] - gg[a][1] + gg[a][2]);
        out[(a * 4 + 3) * point_stride + c] = gg[a][2];
      }
    }
  }
  return u;
}

// An NHWC tensor's pixels (its channels' values) as FP32: FP32 ones in place, FP16 and BF16 ones widened into a
// buffer by the converters the FP16/BF16 emulation widens whole tensors with, so the result has the same bits as
// widening first, without the FP32 copy of the tensor.
class PixelReader {
 public:
  explicit PixelReader(const Tensor& t) : data_(t.data()), dtype_(t.dtype()), channels_(t.c()) {}
  const float* read(int64_t pixel, float* buffer) const {
    if (dtype_ == DType::F32) return static_cast<const float*>(data_) + pixel * channels_;
    widen_16bit(dtype_, static_cast<const uint16_t*>(data_) + pixel * channels_, buffer, channels_);
    return buffer;
  }

 private:
  const void* data_;
  DType dtype_;
  int64_t channels_;
};

// Where an NHWC output's pixels are computed: FP32 ones in place, FP16 and BF16 ones in a buffer, rounded into the
// tensor by store() (as the emulation rounds its FP32 result).
class PixelWriter {
 public:
  explicit PixelWriter(const Tensor& t) : data_(t.data()), dtype_(t.dtype()), channels_(t.c()) {}
  float* target(int64_t pixel, float* buffer) const {
    return dtype_ == DType::F32 ? static_cast<float*>(data_) + pixel * channels_ : buffer;
  }
  void store(int64_t pixel, const float* computed) const {
    if (dtype_ == DType::F32) return;
    round_to_16bit(dtype_, computed, static_cast<uint16_t*>(data_) + pixel * channels_, channels_);
  }

 private:
  void* data_;
  DType dtype_;
  int64_t channels_;
};

// How an NHWC image batch (N,H,W) splits into 2x2 output tiles, tile t = (n, i, j) in row-major order: its output
// rows 2i and 2i+1 (and columns likewise) read input rows 2i-1 to 2i+2 (padding 1).
struct Tiling {
  int64_t N, H, W, tiles_h, tiles_w, count;
  explicit Tiling(const Tensor& image)
      : N(image.n()),
        H(image.h()),
        W(image.w()),
        tiles_h((H + 1) / 2),
        tiles_w((W + 1) / 2),
        count(N * tiles_h * tiles_w) {}

  // The index of the pixel `size` x `size` window of tile t holds in row a, column b, starting at the tile's output
  // pixel shifted by `shift` (-1: the input window, 0: the output tile); -1 outside the image.
  template <int size>
  void window(int64_t t, int shift, int64_t (&pixel)[size][size]) const {
    const int64_t n = t / (tiles_h * tiles_w), top = 2 * (t / tiles_w % tiles_h) + shift;
    const int64_t left = 2 * (t % tiles_w) + shift;
    for (int a = 0; a < size; ++a)
      for (int b = 0; b < size; ++b) {
        const int64_t h = top + a, w = left + b;
        pixel[a][b] = h >= 0 && h < H && w >= 0 && w < W ? (n * H + h) * W + w : -1;
      }
  }
  // d[a][b]: tile t's 4x4 input window (`zeros` outside the image), 16-bit pixels widened into `buffer`.
  void input_window(int64_t t, const PixelReader& image, int64_t channels, const float* zeros, float* buffer,
                    const float* d[4][4]) const {
    int64_t pixel[4][4];
    window(t, -1, pixel);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        d[a][b] = pixel[a][b] < 0 ? zeros : image.read(pixel[a][b], buffer + (a * 4 + b) * channels);
  }
  // dy[a][b]: tile t's 2x2 output gradient (`zeros` past the image's edge), 16-bit pixels widened into `buffer`.
  void output_window(int64_t t, const PixelReader& image, int64_t channels, const float* zeros, float* buffer,
                     const float* dy[2][2]) const {
    int64_t pixel[2][2];
    window(t, 0, pixel);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        dy[a][b] = pixel[a][b] < 0 ? zeros : image.read(pixel[a][b], buffer + (a * 2 + b) * channels);
  }
};

// out (N,Cout,H,W) NHWC = the 3x3 convolution (padding 1) of in (N,Cin,H,W) NHWC with the transformed weights u:
// (16, Cout, Cin) when out_major (the forward pass), (16, Cin, Cout) otherwise (the data gradient).
void convolve(const Tensor& in, const Tensor& u, bool out_major, Tensor& out, int threads) {
  const int64_t Cin = in.c(), Cout = out.c();
  const Tiling tiling(in);
  const int64_t chunks = (tiling.count + kTiles - 1) / kTiles;
  // Per thread: the chunk's transformed input v (16, kTiles, Cin) and products m (16, kTiles, Cout), a pixel of
  // zeros (the padding), a tile's 16-bit input window widened and its output before rounding, and a pixel for
  // outputs past the image's edge.
  const int64_t v_size = kPoints * kTiles * Cin, m_size = kPoints * kTiles * Cout;
  const int64_t per_thread = v_size + m_size + Cin + kPoints * Cin + 4 * Cout + Cout;
  Tensor scratch = Tensor::empty({threads, per_thread}, DType::F32);
  const PixelReader input(in);
  const PixelWriter output(out);
  const float* weights = u.data_as<const float>();
  const bool avx2 = simd_level() >= SimdLevel::Avx2;
  std::atomic<bool> gemm_failed{false};
  // Every chunk is one thread's, and its matrix products run on that thread alone (oneDNN's sgemm does not start
  // threads inside a parallel region), so the bits do not depend on the thread count.
#pragma omp parallel num_threads(threads)
  {
    float* v = scratch.data_as<float>() + omp_get_thread_num() * per_thread;
    float* m = v + v_size;
    float* zeros = m + m_size;
    float* window = zeros + Cin;
    float* tile = window + kPoints * Cin;
    float* outside = tile + 4 * Cout;
    std::fill(zeros, zeros + Cin, 0.0f);
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t first = chunk * kTiles, count = std::min(kTiles, tiling.count - first);
      for (int64_t t = 0; t < count; ++t) {
        const float* d[4][4];
        tiling.input_window(first + t, input, Cin, zeros, window, d);
        (avx2 ? transform_input_avx2 : transform_input)(d, v + t * Cin, kTiles * Cin, Cin);
      }
      for (int point = 0; point < kPoints; ++point) {
        const auto status =
            dnnl::sgemm('N', out_major ? 'T' : 'N', count, Cout, Cin, 1.0f, v + point * kTiles * Cin, Cin,
                        weights + point * Cin * Cout, out_major ? Cin : Cout, 0.0f, m + point * kTiles * Cout, Cout);
        if (status != dnnl::status::success) gemm_failed = true;
      }
      for (int64_t t = 0; t < count; ++t) {
        int64_t pixel[2][2];
        tiling.window(first + t, 0, pixel);
        float* y[2][2];
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            y[a][b] = pixel[a][b] < 0 ? outside : output.target(pixel[a][b], tile + (a * 2 + b) * Cout);
        (avx2 ? transform_output_avx2 : transform_output)(m + t * Cout, kTiles * Cout, y, Cout);
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            if (pixel[a][b] >= 0) output.store(pixel[a][b], y[a][b]);
      }
    }
  }
  AMPWB_CHECK(!gemm_failed, "oneDNN's sgemm failed in the Winograd convolution of " << in.describe());
}

// w as FP32: itself, or 16-bit weights widened (the same converters as the emulation's).
Tensor fp32_weights(const Tensor& w, int threads) {
  if (w.dtype() == DType::F32) return w;
  Tensor wide = Tensor::empty(w.shape(), DType::F32, w.layout());
  widen_16bit(w.dtype(), w.data_as<const uint16_t>(), wide.data_as<float>(), w.numel(), threads);
  return wide;
}

// dw (K,C,3,3) = G^T du G for every (k, c), du (16, K, C) the weight gradient in the transformed domain,
// G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1] (the adjoint of transform_weights).
void untransform_weight_gradient(const float* du, Tensor& dw, int threads) {
  const int64_t K = dw.n(), C = dw.c();
  const bool ohwi = dw.layout() == Layout::NHWC;
  const int64_t channel_stride = ohwi ? 1 : 9, row_stride = ohwi ? 3 * C : 3, column_stride = ohwi ? C : 1;
  float* gradients = dw.data_as<float>();
  const int64_t point_stride = K * C;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t k = 0; k < K; ++k) {
    const float* in = du + k * C;
    float* kernels = gradients + k * 9 * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float t[3][4];  // G^T du: the rows
      for (int b = 0; b < 4; ++b) {
        const float u0 = in[(0 * 4 + b) * point_stride + c], u1 = in[(1 * 4 + b) * point_stride + c];
        const float u2 = in[(2 * 4 + b) * point_stride + c], u3 = in[(3 * 4 + b) * point_stride + c];
        t[0][b] = u0 + 0.5f * (u1 + u2);
        t[1][b] = 0.5f * (u1 - u2);
        t[2][b] = 0.5f * (u1 + u2) + u3;
      }
      for (int r = 0; r < 3; ++r) {  // (G^T du) G: the columns
        float* row = kernels + c * channel_stride + r * row_stride;
        row[0 * column_stride] = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
        row[1 * column_stride] = 0.5f * (t[r][1] - t[r][2]);
        row[2 * column_stride] = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
      }
    }
  }
}

}  // namespace

bool winograd_fits(const Tensor& in, const Tensor& w, const Tensor& out, ConvParams p) {
  auto floating = [](const Tensor& t) { return is_floating(t.dtype()); };
  return floating(in) && floating(w) && floating(out) && in.layout() == Layout::NHWC && out.layout() == Layout::NHWC &&
         w.h() == 3 && w.w() == 3 && p.stride == 1 && p.padding == 1 && in.c() >= 64 && out.c() >= 64 &&
         in.c() * out.c() <= kMaxChannelPairs && std::min(in.h(), in.w()) >= kMinImageSide;
}

void winograd_forward(const Tensor& x, const Tensor& w, Tensor& y, int threads) {
  AMPWB_CHECK(x.c() == w.c() && y.c() == w.n() && y.n() == x.n() && y.h() == x.h() && y.w() == x.w(),
              "winograd_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  convolve(x, transform_weights(fp32_weights(w, threads), false, threads), true, y, threads);
}

void winograd_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, int threads) {
  AMPWB_CHECK(
      x.c() == dw.c() && dy.c() == dw.n() && dy.n() == x.n() && dy.h() == x.h() && dy.w() == x.w() && dw.h() == 3 &&
          dw.w() == 3,
      "winograd_backward_weights shapes: x " << x.describe() << " dy " << dy.describe() << " dw " << dw.describe());
  const int64_t C = x.c(), K = dy.c();
  const Tiling tiling(x);
  // Chunks of up to 256 tiles (long sums per matrix product), their transforms within 4 MiB.
  const int64_t chunk_tiles = std::min<int64_t>(256, (int64_t{1} << 20) / (kPoints * (C + K)));
  // The chunk's transformed input v (16, chunk_tiles, C) and output gradient g (16, chunk_tiles, K), the sum du
  // (16, K, C) of g^T v over the chunks, and a pixel of zeros for the padding.
  const int64_t v_size = kPoints * chunk_tiles * C, g_size = kPoints * chunk_tiles * K, du_size = kPoints * K * C;
  // Per thread, a tile's 16-bit input window and output gradient widened.
  const int64_t per_thread = kPoints * C + 4 * K;
  Tensor scratch = Tensor::empty({v_size + g_size + du_size + std::max(C, K) + threads * per_thread}, DType::F32);
  float* v = scratch.data_as<float>();
  float* g = v + v_size;
  float* du = g + g_size;
  float* zeros = du + du_size;
  std::fill(du, zeros + std::max(C, K), 0.0f);
  const PixelReader input(x), gradient(dy);
  const bool avx2 = simd_level() >= SimdLevel::Avx2;
  std::atomic<bool> gemm_failed{false};
  // The threads share each chunk: its tiles' transforms, then its 16 matrix products, each point's sum on one thread.
  // Every point's sum adds the chunks in order, so the bits do not depend on the thread count.
#pragma omp parallel num_threads(threads)
  {
    float* window = zeros + std::max(C, K) + omp_get_thread_num() * per_thread;
    float* gradient_window = window + kPoints * C;
    for (int64_t first = 0; first < tiling.count; first += chunk_tiles) {
      const int64_t count = std::min(chunk_tiles, tiling.count - first);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < count; ++t) {
        const float* d[4][4];
        tiling.input_window(first + t, input, C, zeros, window, d);
        (avx2 ? transform_input_avx2 : transform_input)(d, v + t * C, chunk_tiles * C, C);
        const float* tile_gradient[2][2];
        tiling.output_window(first + t, gradient, K, zeros, gradient_window, tile_gradient);
        (avx2 ? transform_gradient_avx2 : transform_gradient)(tile_gradient, g + t * K, chunk_tiles * K, K);
      }
#pragma omp for schedule(static)
      for (int point = 0; point < kPoints; ++point) {  // du (K, C) += g^T (K, count) v (count, C)
        const auto status = dnnl::sgemm('T', 'N', K, C, count, 1.0f, g + point * chunk_tiles * K, K,
                                        v + point * chunk_tiles * C, C, 1.0f, du + point * K * C, C);
        if (status != dnnl::status::success) gemm_failed = true;
      }
    }
  }
  AMPWB_CHECK(!gemm_failed, "oneDNN's sgemm failed in the Winograd weight gradient of " << x.describe());
  if (dw.dtype() == DType::F32) return untransform_weight_gradient(du, dw, threads);
  Tensor wide = Tensor::empty(dw.shape(), DType::F32, dw.layout());  // rounded once, as the emulation does
  untransform_weight_gradient(du, wide, threads);
  round_to_16bit(dw.dtype(), wide.data_as<const float>(), dw.data_as<uint16_t>(), dw.numel(), threads);
}

void winograd_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, int threads) {
  AMPWB_CHECK(
      dy.c() == w.n() && dx.c() == w.c() && dx.n() == dy.n() && dx.h() == dy.h() && dx.w() == dy.w(),
      "winograd_backward_data shapes: dy " << dy.describe() << " w " << w.describe() << " dx " << dx.describe());
  convolve(dy, transform_weights(fp32_weights(w, threads), true, threads), false, dx, threads);
}

}  // namespace ampwb::cpu_detail
