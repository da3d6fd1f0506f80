// The CPU backend's own kernels and the rules that choose between them (Winograd, convolutions as matrix products,
// the direct weight gradient, the stem kernel, weight layouts, the SIMD paths of batch norm and the optimizers):
// checked against oneDNN, the float64 reference or each other bit for bit. The op harness (test_backend_ops.cpp)
// checks every backend's ops; these check what only the CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/batchnorm_chunked.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/direct_weight_gradient.h"
#include "backend/cpu/stem_convolution.h"
#include "backend/cpu/weight_layouts.h"
#include "core/allocator.h"
#include "core/convert16.h"
#include "core/simd.h"
#include "op_harness.h"
#include "simd_limit.h"

namespace ampwb::testing {
namespace {

TEST(CpuBackend, DescribesItsOneDnnAndIsa) {
  std::string why;
  Backend* b = backend_for("cpu", why);
  ASSERT_NE(b, nullptr) << why;
  // "cpu (AMD EPYC, oneDNN 2.6.3, avx512_core_bf16, 2 threads, ...)": the CPU's model, oneDNN's version, the ISA.
  const std::string d = b->description();
  const size_t onednn = d.find("oneDNN 2.");
  ASSERT_NE(onednn, std::string::npos) << d;
  const std::string model = b->capabilities().device_name;
  EXPECT_EQ(d.rfind("cpu (" + (model == "unknown CPU" ? "" : model + ", ") + "oneDNN 2.", 0), 0u) << d;
  const size_t isa = d.find(", ", onednn) + 2;
  EXPECT_EQ(d.substr(isa, d.find(',', isa) - isa), b->capabilities().isa) << d;
  EXPECT_FALSE(b->capabilities().tf32.available) << "TF32 is a GPU format: the tf32 op cases skip on the CPU";
}

// The CPU's Winograd path (backend/cpu/winograd.h) against oneDNN's direct convolution from the same inputs: within
// the FP32 bound of each other, and the same bits whatever the thread count and with or without AVX2. (The op cases
// above check it against the float64 reference.)
TEST(CpuBackend, WinogradAgreesWithTheDirectConvolutionWhateverItsThreadsOrSimd) {
  Rng rng(17);
  const Tensor x = host_random({3, 64, 13, 12}, rng, DType::F32, Layout::NHWC);
  const Tensor w = host_random({72, 64, 3, 3}, rng, DType::F32, Layout::NHWC);
  const Tensor dy = host_random({3, 72, 13, 12}, rng, DType::F32, Layout::NHWC);
  struct Results {
    std::vector<float> y, dx, dw;
  };
  auto convolve = [&](int threads, bool winograd) {
    CpuBackend b({threads, CpuBf16::Auto, false, winograd ? ConvAlgorithm::Winograd : ConvAlgorithm::Direct});
    Tensor y = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
    Tensor dx = Tensor::empty(x.shape(), DType::F32, Layout::NHWC);
    Tensor dw = Tensor::empty(w.shape(), DType::F32, Layout::NHWC);
    b.conv2d_forward(x, w, y, {1, 1});
    b.conv2d_backward_data(dy, w, dx, {1, 1});
    b.conv2d_backward_weights(x, dy, dw, {1, 1});
    return Results{to_float_vector(y), to_float_vector(dx), to_float_vector(dw)};
  };
  const Results direct = convolve(2, false), two = convolve(2, true), one = convolve(1, true);
  const Results scalar = [&] {
    test::SimdLimit scalar_only(SimdLevel::Scalar);
    return convolve(2, true);
  }();

  EXPECT_LE(compare(two.y, direct.y, false).error, 1e-5);
  EXPECT_LE(compare(two.dx, direct.dx, false).error, 1e-5);
  EXPECT_LE(compare(two.dw, direct.dw, false).error, 1e-5);
  EXPECT_NE(two.y, direct.y) << "the same bits as the direct convolution: was the Winograd path taken?";
  EXPECT_NE(two.dw, direct.dw);
  EXPECT_EQ(two.y, one.y);
  EXPECT_EQ(two.dx, one.dx);
  EXPECT_EQ(two.dw, one.dw);
  EXPECT_EQ(two.y, scalar.y);
  EXPECT_EQ(two.dx, scalar.dx);
  EXPECT_EQ(two.dw, scalar.dw);
}

// Measured: each pass of each shape runs by the algorithm its first call timed faster, every call alike: its bits are
// the direct convolution's or Winograd's, and the same on the second call as on the first (the first call's output
// is the chosen algorithm's, not the last one timed). FP32 and emulated FP16; a shape Winograd does not fit is the
// direct convolution's.
TEST(CpuBackend, MeasuredConvAlgorithmKeepsOneChoicePerPassAndShape) {
  for (DType dtype : {DType::F32, DType::F16}) {
    for (int64_t channels : {64, 32}) {  // 32: below Winograd's range
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::to_string(channels) + " channels");
      Rng rng(23);
      const Tensor x = host_random({2, channels, 14, 14}, rng, dtype, Layout::NHWC);
      const Tensor w = host_random({channels, channels, 3, 3}, rng, dtype, Layout::NHWC);
      const Tensor dy = host_random({2, channels, 14, 14}, rng, dtype, Layout::NHWC);
      using Passes = std::array<std::vector<uint8_t>, 3>;  // y, dx, dw
      auto convolve = [&](CpuBackend& b) {
        Tensor y = Tensor::empty(dy.shape(), dtype, Layout::NHWC), dx = Tensor::empty(x.shape(), dtype, Layout::NHWC);
        Tensor dw = Tensor::empty(w.shape(), dtype, Layout::NHWC);
        b.conv2d_forward(x, w, y, {1, 1});
        b.conv2d_backward_data(dy, w, dx, {1, 1});
        b.conv2d_backward_weights(x, dy, dw, {1, 1});
        return Passes{bytes_of(b, y), bytes_of(b, dx), bytes_of(b, dw)};
      };
      CpuBackend direct_backend({2, CpuBf16::Emulated, false, ConvAlgorithm::Direct});
      CpuBackend winograd_backend({2, CpuBf16::Emulated, false, ConvAlgorithm::Winograd});
      CpuBackend measured({2, CpuBf16::Emulated, false, ConvAlgorithm::Measured});
      const Passes direct = convolve(direct_backend), winograd = convolve(winograd_backend);
      const Passes first = convolve(measured), second = convolve(measured);
      for (size_t pass = 0; pass < 3; ++pass) {
        EXPECT_TRUE(first[pass] == direct[pass] || first[pass] == winograd[pass]) << "pass " << pass;
        EXPECT_EQ(first[pass], second[pass]) << "pass " << pass << ": one algorithm per pass and shape";
        if (channels == 32) {
          EXPECT_EQ(first[pass], direct[pass]) << "pass " << pass;
        }
      }
      if (channels == 64) {
        EXPECT_NE(direct[0], winograd[0]) << "the two algorithms' bits differ here";
      }
    }
  }
  EXPECT_NE(CpuBackend({1, CpuBf16::Auto, false, ConvAlgorithm::Measured}).description().find("measured per shape"),
            std::string::npos);
}

// Convolutions as matrix products (im2col, oneDNN's matmul, col2im for the input's gradient) against the float64
// reference, on the shapes ResNets have: 3x3 of stride 1 and 2, 1x1 of stride 1 (its input is the product's own
// matrix) and 2 (downsampling), and the 7x7 stem with 3 channels. FP32 within 1e-5 of the largest value;
// 16-bit results within one rounding of it (FP32 accumulation, rounded once), in weights of both layouts. BF16 runs on
// oneDNN's BF16 matmul where the CPU has one, else in the engine's emulation, as FP16 does everywhere.
TEST(CpuBackend, ConvolutionsAsMatrixProductsMatchTheReference) {
  struct Shape4 {
    int64_t n, c, h, w, k, kernel;
    int stride, padding;
  };
  const Shape4 shapes[] = {{2, 24, 7, 6, 40, 3, 1, 1},
                           {2, 16, 9, 9, 24, 3, 2, 1},
                           {3, 32, 5, 5, 48, 1, 1, 0},
                           {2, 32, 6, 6, 64, 1, 2, 0},
                           {2, 3, 15, 15, 16, 7, 2, 3}};
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (Layout weights_layout : {Layout::NCHW, Layout::NHWC})
      for (const Shape4& s : shapes) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (weights_layout == Layout::NCHW ? " OIHW" : " OHWI") + ", " +
                     std::to_string(s.c) + "->" + std::to_string(s.k) + " channels, " + std::to_string(s.kernel) + "x" +
                     std::to_string(s.kernel) + " stride " + std::to_string(s.stride));
        Rng rng(31);
        const ConvParams p{s.stride, s.padding};
        const int64_t P = (s.h + 2 * s.padding - s.kernel) / s.stride + 1,
                      Q = (s.w + 2 * s.padding - s.kernel) / s.stride + 1;
        const Tensor x = host_random({s.n, s.c, s.h, s.w}, rng, dtype, Layout::NHWC);
        const Tensor w = host_random({s.k, s.c, s.kernel, s.kernel}, rng, dtype, weights_layout);
        const Tensor dy = host_random({s.n, s.k, P, Q}, rng, dtype, Layout::NHWC);
        CpuBackend gemm({2, CpuBf16::Native, false, ConvAlgorithm::Gemm});
        CpuBackend direct({2, CpuBf16::Native, false, ConvAlgorithm::Direct});
        auto passes = [&](CpuBackend& b) {
          Tensor y = device_nan(b, dy.shape(), dtype, Layout::NHWC), dx = device_nan(b, x.shape(), dtype, Layout::NHWC);
          Tensor dw = device_nan(b, w.shape(), dtype, weights_layout);
          b.conv2d_forward(x, w, y, p);
          b.conv2d_backward_data(dy, w, dx, p);
          b.conv2d_backward_weights(x, dy, dw, p);
          return std::array{to_float_vector(y), to_float_vector(dx), to_float_vector(dw)};
        };
        const auto got = passes(gemm), theirs = passes(direct);
        const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
        const ref::Array want[] = {ref::conv2d_forward(rx, rw, p.stride, p.padding),
                                   ref::conv2d_backward_data(rdy, rw, x.shape(), p.stride, p.padding),
                                   ref::conv2d_backward_weights(rx, rdy, w.shape(), p.stride, p.padding)};
        const double bound = dtype == DType::F32 ? 1e-5 : dtype == DType::BF16 ? 0x1p-8 + 1e-5 : 0x1p-11 + 1e-5;
        bool any_bits_differ = false;
        for (size_t pass = 0; pass < 3; ++pass) {
          std::vector<float> rounded(want[pass].v.size());
          for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = round_to(dtype, want[pass].v[i]);
          EXPECT_LE(compare(got[pass], rounded, false).error, bound) << "pass " << pass;
          any_bits_differ = any_bits_differ || got[pass] != theirs[pass];
        }
        if (dtype == DType::F32 && s.c * s.kernel * s.kernel >= 200) {
          EXPECT_TRUE(any_bits_differ) << "the bits of oneDNN's convolutions: was the product taken?";
        }
      }
  EXPECT_NE(CpuBackend({1, CpuBf16::Auto, false, ConvAlgorithm::Gemm}).description().find("matrix products"),
            std::string::npos);
}

// Each pass of a convolution (forward, backward data, weight gradient) as `automatic` runs it gives the bits of the
// path as_product names for it: the products of `gemm` (or another algorithm's, as the caller names it) or oneDNN's
// convolutions of `direct`. A pass whose two paths give the same bits tells nothing; at least one must differ.
// dy_arrives_wide: auto's backward passes get dy widened to FP32, as Conv2d hands an emulated dtype's gradient over.
// Which path a pass's bits must come from: the product over im2col, oneDNN's convolution, or (weight gradients) the
// direct kernel.
enum class Path { Product, OneDnn, Direct };

void expect_passes_follow_the_rule(CpuBackend& automatic, CpuBackend& gemm, CpuBackend& direct, const Tensor& x,
                                   const Tensor& w, const Tensor& dy, ConvParams p, std::array<Path, 3> expected,
                                   bool dy_arrives_wide = false) {
  auto passes = [&](CpuBackend& b, const Tensor& dy_given) {
    Tensor y = Tensor::empty(dy.shape(), x.dtype(), Layout::NHWC),
           dx = Tensor::empty(x.shape(), x.dtype(), Layout::NHWC);
    Tensor dw = Tensor::empty(w.shape(), w.dtype());
    b.conv2d_forward(x, w, y, p);
    b.conv2d_backward_data(dy_given, w, dx, p);
    b.conv2d_backward_weights(x, dy_given, dw, p);
    return std::array{to_float_vector(y), to_float_vector(dx), to_float_vector(dw)};
  };
  Tensor wide_dy = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
  automatic.convert(dy, wide_dy);
  const auto got = passes(automatic, dy_arrives_wide ? wide_dy : dy), products = passes(gemm, dy),
             onednn = passes(direct, dy);
  std::vector<float> kernel;  // the direct weight gradient's bits, where the rule names it
  if (expected[2] == Path::Direct) {
    Tensor dw = Tensor::empty(w.shape(), w.dtype());
    cpu_detail::direct_weight_gradient(x, dy, dw, p, 2);
    kernel = to_float_vector(dw);
  }
  int told_apart = 0;
  for (size_t pass = 0; pass < 3; ++pass) {
    const bool by_kernel = expected[pass] == Path::Direct;
    // The same sums either way (e.g. oneDNN's sgemm, 1x1 kernels) tell nothing.
    if (products[pass] == onednn[pass] && (!by_kernel || kernel == products[pass])) continue;
    ++told_apart;
    EXPECT_EQ(got[pass], by_kernel                         ? kernel
                         : expected[pass] == Path::Product ? products[pass]
                                                           : onednn[pass])
        << "pass " << pass;
  }
  EXPECT_GE(told_apart, 1) << "the paths gave the same bits: nothing checked";
}

void expect_passes_follow_the_rule(CpuBackend& automatic, CpuBackend& gemm, CpuBackend& direct, const Tensor& x,
                                   const Tensor& w, const Tensor& dy, ConvParams p, std::array<bool, 3> as_product,
                                   bool dy_arrives_wide = false) {
  auto path = [](bool product) { return product ? Path::Product : Path::OneDnn; };
  expect_passes_follow_the_rule(automatic, gemm, direct, x, w, dy, p,
                                {path(as_product[0]), path(as_product[1]), path(as_product[2])}, dy_arrives_wide);
}

// auto's rule on AVX-512: FP32 and emulated FP16 convolutions whose output is 4x4 pixels or fewer run their
// forward and weight gradient as products, and their input's gradient too where strided; larger outputs stay
// oneDNN's; FP32's stride-1 weight gradient there is the direct kernel's. Each pass's bits are those of the path the
// rule names, also where FP16's output gradient arrives widened to FP32 (as in training: the rule once missed it
// there).
TEST(CpuBackend, AutoTakesProductsForConvolutionsOfSmallImagesOnAvx512) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("matrix products where convolutions' images are small") == std::string::npos)
    GTEST_SKIP() << "no AVX-512 for oneDNN here (" << automatic.description() << "): the rule does not apply";
  CpuBackend gemm({2, CpuBf16::Auto, false, ConvAlgorithm::Gemm});
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  struct Case {
    int64_t side;  // input side; 3x3 kernel, padding 1
    int stride;
    bool forward, backward_data, weight_gradient;  // which passes are products
  };
  for (DType dtype : {DType::F32, DType::F16})
    for (const Case c :
         {Case{4, 1, true, false, true}, Case{8, 2, true, true, true}, Case{8, 1, false, false, false}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::to_string(c.side) + "x" + std::to_string(c.side) +
                   " stride " + std::to_string(c.stride));
      Rng rng(41);
      const ConvParams p{c.stride, 1};
      const int64_t out = (c.side + 2 - 3) / c.stride + 1;
      const Tensor x = host_random({4, 64, c.side, c.side}, rng, dtype, Layout::NHWC);
      const Tensor w = host_random({64, 64, 3, 3}, rng, dtype);
      const Tensor dy = host_random({4, 64, out, out}, rng, dtype, Layout::NHWC);
      auto path = [](bool product) { return product ? Path::Product : Path::OneDnn; };
      const bool kernel = dtype == DType::F32 && c.stride == 1 && out <= 4;
      for (const bool dy_arrives_wide : {false, true}) {
        if (dy_arrives_wide && dtype == DType::F32) continue;
        SCOPED_TRACE(dy_arrives_wide ? "dy widened to FP32" : "dy as computed");
        expect_passes_follow_the_rule(
            automatic, gemm, direct, x, w, dy, p,
            {path(c.forward), path(c.backward_data), kernel ? Path::Direct : path(c.weight_gradient)}, dy_arrives_wide);
      }
    }
}

// auto's rule on AVX-512 for 3x3 convolutions of stride 1: Winograd, its transforms folding the conversions, for an
// emulated 16-bit type over 128 channels or more and 14x14 outputs or more; oneDNN's FP32 convolutions for smaller
// ones and for FP32. Each pass's bits are those of the path the rule names, dy as computed and widened.
TEST(CpuBackend, AutoTakesWinogradForEmulatedConvolutionsWhereItPaysOnAvx512) {
  // BF16 emulated on every CPU, as FP16 is.
  CpuBackend automatic({2, CpuBf16::Emulated, false, ConvAlgorithm::Auto});
  if (automatic.description().find("emulated 16-bit 3x3") == std::string::npos)
    GTEST_SKIP() << "no AVX-512 here: auto takes Winograd for every 3x3 convolution it fits";
  CpuBackend winograd({2, CpuBf16::Emulated, false, ConvAlgorithm::Winograd});
  CpuBackend direct({2, CpuBf16::Emulated, false, ConvAlgorithm::Direct});
  struct Case {
    DType dtype;
    int64_t channels, side;  // 3x3 kernel, stride 1, padding 1
    bool winograd;
  };
  for (const Case c :
       {Case{DType::F16, 128, 14, true}, Case{DType::BF16, 128, 14, true}, Case{DType::F16, 64, 14, false},
        Case{DType::F16, 128, 13, false}, Case{DType::F32, 128, 14, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + ", " + std::to_string(c.channels) + " channels, " +
                 std::to_string(c.side) + "x" + std::to_string(c.side));
    Rng rng(53);
    const Tensor x = host_random({2, c.channels, c.side, c.side}, rng, c.dtype, Layout::NHWC);
    const Tensor w = host_random({c.channels, c.channels, 3, 3}, rng, c.dtype);
    const Tensor dy = host_random({2, c.channels, c.side, c.side}, rng, c.dtype, Layout::NHWC);
    for (const bool dy_arrives_wide : {false, true}) {
      if (dy_arrives_wide && c.dtype == DType::F32) continue;
      SCOPED_TRACE(dy_arrives_wide ? "dy widened to FP32" : "dy as computed");
      expect_passes_follow_the_rule(automatic, winograd, direct, x, w, dy, {1, 1}, {c.winograd, c.winograd, c.winograd},
                                    dy_arrives_wide);
    }
  }
}

// Where the CPU emulates a 16-bit type, a weight gradient asked for in FP32 holds the 16-bit gradient's values: the
// bits of the 16-bit dw widened, whichever path computes it (the products, Winograd, oneDNN's FP32 convolution),
// with dy as computed or widened to FP32 (Conv2d hands the gradient of the master weights over this way).
TEST(CpuBackend, AWideWeightGradientOfAnEmulatedTypeHoldsTheSixteenBitValues) {
  struct Case {
    int64_t side;  // input side; 3x3 kernel, padding 1
    int stride;
  };
  for (const ConvAlgorithm algorithm :
       {ConvAlgorithm::Auto, ConvAlgorithm::Direct, ConvAlgorithm::Winograd, ConvAlgorithm::Gemm})
    for (const DType dtype : {DType::F16, DType::BF16}) {
      CpuBackend b({2, CpuBf16::Emulated, false, algorithm});
      for (const Case c : {Case{4, 1}, Case{8, 2}, Case{16, 1}}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + ", algorithm " + std::to_string(static_cast<int>(algorithm)) +
                     ", " + std::to_string(c.side) + "x" + std::to_string(c.side) + " stride " +
                     std::to_string(c.stride));
        Rng rng(47);
        const ConvParams p{c.stride, 1};
        const int64_t out = (c.side + 2 - 3) / c.stride + 1;
        const Tensor x = host_random({4, 64, c.side, c.side}, rng, dtype, Layout::NHWC);
        const Tensor dy = host_random({4, 64, out, out}, rng, dtype, Layout::NHWC);
        Tensor wide_dy = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
        b.convert(dy, wide_dy);
        Tensor dw = Tensor::empty({64, 64, 3, 3}, dtype), want = Tensor::empty(dw.shape(), DType::F32);
        b.conv2d_backward_weights(x, dy, dw, p);
        b.convert(dw, want);
        for (const Tensor* given : {&dy, static_cast<const Tensor*>(&wide_dy)}) {
          Tensor wide_dw = Tensor::empty(dw.shape(), DType::F32);
          b.conv2d_backward_weights(x, *given, wide_dw, p);
          EXPECT_EQ(to_float_vector(wide_dw), to_float_vector(want)) << "dy " << given->describe();
        }
      }
    }
}

// auto's rule for native BF16 on AMX: every pass of outputs of 4x4 pixels or fewer; for strided convolutions the
// weight gradient up to 14x14 outputs and the other passes up to 7x7 (the forward one not for 1x1 kernels); for
// stride 1 the weight gradient up to 8x8 outputs, while its patches hold at most 4 Mi elements. Each pass's bits are
// those of the path the rule names.
TEST(CpuBackend, AutoTakesProductsForStridedBf16ConvolutionsOnAmx) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("avx512_core_amx") == std::string::npos || !automatic.capabilities().bf16.native)
    GTEST_SKIP() << "no native BF16 on AMX here (" << automatic.description() << "): the rule does not apply";
  CpuBackend gemm({2, CpuBf16::Auto, false, ConvAlgorithm::Gemm});
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  struct Case {
    int64_t images, side, kernel;  // padding kernel / 2; 128 input channels
    int stride;
    bool forward, backward_data, weight_gradient;  // which passes are products
  };
  // (1x1 kernels: oneDNN's and the product's sums gave the same bits in every pass, so no case tells them apart.)
  // Stride 1 over 8x8: patches of 512, 2048 and 4096 rows of 1152 columns; the last 4.5 Mi elements.
  for (const Case c :
       {Case{8, 14, 3, 2, true, true, true}, Case{8, 28, 3, 2, false, false, true},
        Case{8, 16, 3, 2, false, false, true}, Case{8, 32, 3, 2, false, false, false},
        Case{8, 4, 3, 1, true, true, true}, Case{8, 8, 3, 1, false, false, true}, Case{32, 8, 3, 1, false, false, true},
        Case{64, 8, 3, 1, false, false, false}, Case{8, 9, 3, 1, false, false, false}}) {
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.side) + "x" + std::to_string(c.side) + ", " +
                 std::to_string(c.kernel) + "x" + std::to_string(c.kernel) + " stride " + std::to_string(c.stride));
    Rng rng(43);
    const ConvParams p{c.stride, static_cast<int>(c.kernel / 2)};
    const int64_t out = (c.side + 2 * p.padding - c.kernel) / c.stride + 1;
    // Long enough sums (128 channels, 8 images or more) that the two paths' orders of addition show in BF16's bits.
    const Tensor x = host_random({c.images, 128, c.side, c.side}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({64, 128, c.kernel, c.kernel}, rng, DType::BF16);
    const Tensor dy = host_random({c.images, 64, out, out}, rng, DType::BF16, Layout::NHWC);
    expect_passes_follow_the_rule(automatic, gemm, direct, x, w, dy, p,
                                  {c.forward, c.backward_data, c.weight_gradient});
  }
}

// auto's rule for native BF16 on AVX512-BF16 without AMX: the weight gradient of stride-1 convolutions by the
// direct kernel over 8x8 outputs or fewer, and over 16x16 or fewer with 64 channels or fewer in and out, while its
// scratch stays under 1 Mi values (one case each side); of strided ones up to 14x14 outputs as products; the forward
// pass over 4x4 outputs or fewer as a product; never backward data. Each pass's bits are those of the path the rule
// names.
TEST(CpuBackend, AutoTakesProductsForSmallBf16ConvolutionsOnAvx512Bf16WithoutAmx) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("avx512_core_amx") != std::string::npos || !automatic.capabilities().bf16.native)
    GTEST_SKIP() << "no native BF16 without AMX here (" << automatic.description() << "): the rule does not apply";
  CpuBackend gemm({2, CpuBf16::Auto, false, ConvAlgorithm::Gemm});
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  struct Case {
    int64_t images, side, channels;  // input side and channels; 3x3 kernel, padding 1; 64 channels out
    int stride;
    bool forward;  // as a product
    Path weight_gradient;
  };
  for (const Case c : {Case{8, 2, 128, 1, true, Path::Direct}, Case{32, 4, 128, 2, true, Path::Product},
                       Case{8, 4, 128, 1, true, Path::Direct}, Case{8, 8, 128, 1, false, Path::Direct},
                       Case{8, 16, 128, 1, false, Path::OneDnn}, Case{32, 16, 64, 1, false, Path::Direct},
                       Case{8, 32, 64, 1, false, Path::OneDnn}, Case{36, 7, 512, 1, false, Path::Direct},
                       Case{38, 7, 512, 1, false, Path::OneDnn}, Case{8, 16, 128, 2, false, Path::Product},
                       Case{8, 28, 128, 2, false, Path::Product}, Case{8, 32, 128, 2, false, Path::OneDnn}}) {
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.side) + "x" + std::to_string(c.side) + "x" +
                 std::to_string(c.channels) + " stride " + std::to_string(c.stride));
    Rng rng(59);
    const ConvParams p{c.stride, 1};
    const int64_t out = (c.side + 2 - 3) / c.stride + 1;
    const Tensor x = host_random({c.images, c.channels, c.side, c.side}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({64, c.channels, 3, 3}, rng, DType::BF16);
    const Tensor dy = host_random({c.images, 64, out, out}, rng, DType::BF16, Layout::NHWC);
    expect_passes_follow_the_rule(automatic, gemm, direct, x, w, dy, p,
                                  {c.forward ? Path::Product : Path::OneDnn, Path::OneDnn, c.weight_gradient});
  }
}

// The direct weight gradient against the float64 reference, FP32 and native BF16 (where the CPU has them): every
// window the kernel knows when compiled (3x3, padding 1: inside, edges, corners) and others it reads at run time
// (no padding, padding 2, stride 2), an odd batch (BF16 pairs the last image with zeros), 16 channels and more,
// images not square, and batches BF16 pairs a part at a time (the last part shorter, and odd); within the op tests'
// bound for the weight gradient.
TEST(CpuBackend, DirectWeightGradientMatchesTheFloat64Reference) {
  struct Case {
    int64_t images, channels, height, width, outputs;
    int stride, padding;
  };
  CpuBackend host({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  int checked = 0;
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const Case c : {Case{3, 32, 2, 2, 16, 1, 1}, Case{4, 16, 4, 4, 32, 1, 1}, Case{5, 16, 8, 6, 16, 1, 1},
                         Case{2, 32, 7, 7, 48, 1, 1}, Case{1, 16, 5, 5, 16, 1, 0}, Case{2, 16, 3, 3, 16, 1, 2},
                         Case{3, 16, 9, 8, 32, 2, 1}, Case{21, 32, 16, 16, 32, 1, 1}, Case{24, 32, 16, 16, 32, 1, 1}}) {
      const int64_t P = (c.height + 2 * c.padding - 3) / c.stride + 1, Q = (c.width + 2 * c.padding - 3) / c.stride + 1;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(c.images) + " images " +
                   std::to_string(c.height) + "x" + std::to_string(c.width) + " stride " + std::to_string(c.stride) +
                   " padding " + std::to_string(c.padding));
      Rng rng(61);
      const Tensor x = host_random({c.images, c.channels, c.height, c.width}, rng, dtype, Layout::NHWC);
      const Tensor dy = host_random({c.images, c.outputs, P, Q}, rng, dtype, Layout::NHWC);
      Tensor dw = Tensor::empty({c.outputs, c.channels, 3, 3}, dtype);
      if (!cpu_detail::direct_weight_gradient_fits(x, dy, dw)) continue;  // no AVX-512 (BF16: AVX512-BF16) here
      cpu_detail::direct_weight_gradient(x, dy, dw, {c.stride, c.padding}, 2);
      const ref::Array want =
          ref::conv2d_backward_weights(ref::from_tensor(x), ref::from_tensor(dy), dw.shape(), c.stride, c.padding);
      const Precision precision = dtype == DType::F32 ? Precision::FP32 : Precision::BF16;
      expect_matches(host, "dw", dw, want, Kernel::Conv2dBackwardWeights, precision, Result::Same);
      ++checked;
    }
  if (checked == 0) GTEST_SKIP() << "no AVX-512 here: the direct weight gradient does not run";
}

// The stem kernel against the float64 reference, native BF16 (where the CPU has it): ResNet-18's 7x7 stride-2 stem
// and ResNet-20's 3x3 one, 1 to 4 channels in, 16 to 64 out, rows whose pixels do not fill the kernel's blocks of 4,
// images not square, no padding; within the op tests' bound for the forward pass.
TEST(CpuBackend, StemForwardMatchesTheFloat64Reference) {
  struct Case {
    int64_t images, channels, height, width, outputs, kernel;
    int stride, padding;
  };
  CpuBackend host({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  int checked = 0;
  for (const Case c : {Case{2, 3, 20, 18, 64, 7, 2, 3}, Case{3, 3, 9, 11, 16, 3, 1, 1}, Case{1, 1, 13, 13, 32, 3, 1, 1},
                       Case{2, 4, 10, 7, 48, 5, 2, 2}, Case{2, 2, 8, 8, 16, 3, 1, 0}}) {
    const int64_t P = (c.height + 2 * c.padding - c.kernel) / c.stride + 1,
                  Q = (c.width + 2 * c.padding - c.kernel) / c.stride + 1;
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.height) + "x" + std::to_string(c.width) +
                 "x" + std::to_string(c.channels) + " kernel " + std::to_string(c.kernel) + " stride " +
                 std::to_string(c.stride) + " padding " + std::to_string(c.padding));
    Rng rng(67);
    const Tensor x = host_random({c.images, c.channels, c.height, c.width}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({c.outputs, c.channels, c.kernel, c.kernel}, rng, DType::BF16);
    Tensor y = Tensor::empty({c.images, c.outputs, P, Q}, DType::BF16, Layout::NHWC);
    if (!cpu_detail::stem_forward_fits(x, w, y)) continue;  // no AVX512-BF16 here
    cpu_detail::stem_forward(x, w, y, {c.stride, c.padding}, 2);
    const ref::Array want = ref::conv2d_forward(ref::from_tensor(x), ref::from_tensor(w), c.stride, c.padding);
    expect_matches(host, "y", y, want, Kernel::Conv2dForward, Precision::BF16, Result::Same);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no AVX512-BF16 here: the stem kernel does not run";
}

// auto's rule for the stem kernel: native BF16 on AVX512-BF16 without AMX takes it for the forward pass over images
// of 4 channels or fewer (its bits, which oneDNN's differ from), and oneDNN's convolution for more channels.
TEST(CpuBackend, AutoTakesTheStemKernelForFewChannelsOnAvx512Bf16WithoutAmx) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("avx512_core_amx") != std::string::npos || !automatic.capabilities().bf16.native)
    GTEST_SKIP() << "no native BF16 without AMX here (" << automatic.description() << "): the rule does not apply";
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  for (const int64_t channels : {3, 16}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    Rng rng(71);
    const Tensor x = host_random({4, channels, 32, 32}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({64, channels, 7, 7}, rng, DType::BF16);
    auto forward = [&](CpuBackend* b) {
      Tensor y = Tensor::empty({4, 64, 16, 16}, DType::BF16, Layout::NHWC);
      if (b)
        b->conv2d_forward(x, w, y, {2, 3});
      else
        cpu_detail::stem_forward(x, w, y, {2, 3}, 2);
      return to_float_vector(y);
    };
    const std::vector<float> got = forward(&automatic), onednn = forward(&direct);
    if (channels > 4) {
      EXPECT_EQ(got, onednn);
      continue;
    }
    const std::vector<float> kernel = forward(nullptr);
    ASSERT_NE(kernel, onednn) << "the kernel and oneDNN gave the same bits: nothing checked";
    EXPECT_EQ(got, kernel);
  }
}

// The engine's copy of 3x3 weights into the layouts oneDNN's backward-data convolutions read (weight_layouts.h)
// against oneDNN's own reorder, byte for byte: FP32 and BF16, one block and several each way, channels in and out
// unequal. (The convolutions that read the copy are checked against float64 by the op cases above.)
TEST(CpuBackend, BackwardDataWeightsAreOneDnnsReorderByteForByte) {
  using dnnl::memory;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  int checked = 0;
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const auto& [K, C] : {std::pair<int64_t, int64_t>{16, 16}, {32, 48}, {64, 16}, {48, 96}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(K) + "x" + std::to_string(C) + "x3x3");
      Rng rng(73);
      const Tensor w = host_random({K, C, 3, 3}, rng, dtype);
      if (!cpu_detail::backward_data_layout_fits(w)) continue;  // no AVX-512 here
      const bool fp32 = dtype == DType::F32;
      const auto type = fp32 ? memory::data_type::f32 : memory::data_type::bf16;
      memory from({{K, C, 3, 3}, type, memory::format_tag::abcd}, engine, const_cast<void*>(w.data()));
      memory oneDNN({{K, C, 3, 3}, type, fp32 ? memory::format_tag::ABcd16a16b : memory::format_tag::ABcd8a16b2a},
                    engine);
      dnnl::reorder(from, oneDNN).execute(stream, from, oneDNN);
      stream.wait();
      const size_t bytes = oneDNN.get_desc().get_size();
      ASSERT_EQ(bytes, static_cast<size_t>(w.numel()) * dtype_size(dtype));
      std::vector<char> ours(bytes);
      cpu_detail::to_backward_data_layout(w, ours.data(), 2);
      EXPECT_EQ(std::memcmp(ours.data(), oneDNN.get_data_handle(), bytes), 0);
      ++checked;
    }
  if (checked == 0) GTEST_SKIP() << "no AVX-512 here: the copy does not run";
}

// The engine's copy of BF16 weights into the layouts oneDNN's BF16 forward convolutions read (weight_layouts.h)
// against oneDNN's own reorder, byte for byte: each block of output channels, 3x3 and 1x1, one item and several each
// way. (The convolutions that read the copy are checked against float64 by the op cases above.)
TEST(CpuBackend, ForwardWeightsAreOneDnnsReorderByteForByte) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  int checked = 0;
  struct Case {
    int64_t K, C, R;
    int block;
    tag layout;
  };
  for (const Case c : {Case{16, 32, 3, 16, tag::AcdB16a2b},
                       {64, 96, 3, 32, tag::AcdB32a2b},
                       {128, 64, 3, 64, tag::AcdB64a2b},
                       {64, 32, 1, 32, tag::AcdB32a2b},
                       {128, 96, 1, 64, tag::AcdB64a2b}}) {
    SCOPED_TRACE(std::to_string(c.K) + "x" + std::to_string(c.C) + "x" + std::to_string(c.R) + "x" +
                 std::to_string(c.R) + ", block " + std::to_string(c.block));
    Rng rng(79);
    const Tensor w = host_random({c.K, c.C, c.R, c.R}, rng, DType::BF16);
    if (!cpu_detail::forward_layout_fits(w, c.block)) continue;  // no AVX-512 here
    const memory::dims dims{c.K, c.C, c.R, c.R};
    memory from({dims, memory::data_type::bf16, tag::abcd}, engine, const_cast<void*>(w.data()));
    memory oneDNN({dims, memory::data_type::bf16, c.layout}, engine);
    dnnl::reorder(from, oneDNN).execute(stream, from, oneDNN);
    stream.wait();
    const size_t bytes = oneDNN.get_desc().get_size();
    ASSERT_EQ(bytes, static_cast<size_t>(w.numel()) * 2);
    std::vector<char> ours(bytes);
    cpu_detail::to_forward_layout(w, c.block, ours.data(), 2);
    EXPECT_EQ(std::memcmp(ours.data(), oneDNN.get_data_handle(), bytes), 0);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no AVX-512 here: the copy does not run";
}

// FP16 and BF16 convolutions, which the CPU emulates, take Winograd with the conversions folded into its transforms:
// the same bits as the emulation's widening to FP32, FP32 convolution and rounding, done here step by step.
TEST(CpuBackend, WinogradFoldsTheEmulationsConversionsBitForBit) {
  CpuBackend b({2, CpuBf16::Emulated, false, ConvAlgorithm::Winograd});  // BF16 emulated on every CPU
  for (DType dtype : {DType::F16, DType::BF16}) {
    Rng rng(5);
    const Tensor x = host_random({2, 64, 12, 13}, rng, dtype, Layout::NHWC);
    const Tensor w = host_random({72, 64, 3, 3}, rng, dtype, Layout::NCHW);  // as the layers keep them
    const Tensor dy = host_random({2, 72, 12, 13}, rng, dtype, Layout::NHWC);
    auto empty_like = [](const Tensor& t, DType d) { return Tensor::empty(t.shape(), d, t.layout()); };
    Tensor y = empty_like(dy, dtype), dx = empty_like(x, dtype), dw = empty_like(w, dtype);
    b.conv2d_forward(x, w, y, {1, 1});
    b.conv2d_backward_data(dy, w, dx, {1, 1});
    b.conv2d_backward_weights(x, dy, dw, {1, 1});

    auto widened = [&](const Tensor& t) {
      Tensor wide = empty_like(t, DType::F32);
      b.convert(t, wide);
      return wide;
    };
    auto rounded = [&](const Tensor& wide) {
      Tensor narrow = empty_like(wide, dtype);
      b.convert(wide, narrow);
      return to_float_vector(narrow);
    };
    Tensor y32 = empty_like(dy, DType::F32), dx32 = empty_like(x, DType::F32), dw32 = empty_like(w, DType::F32);
    b.conv2d_forward(widened(x), widened(w), y32, {1, 1});
    b.conv2d_backward_data(widened(dy), widened(w), dx32, {1, 1});
    b.conv2d_backward_weights(widened(x), widened(dy), dw32, {1, 1});
    EXPECT_EQ(to_float_vector(y), rounded(y32)) << dtype_name(dtype);
    EXPECT_EQ(to_float_vector(dx), rounded(dx32)) << dtype_name(dtype);
    EXPECT_EQ(to_float_vector(dw), rounded(dw32)) << dtype_name(dtype);
  }
  // Folded: no FP32 copy of the activations is made (widening first would hold x and y in FP32 at once).
  Rng rng(6);
  const Tensor x = host_random({4, 64, 64, 64}, rng, DType::F16, Layout::NHWC);
  const Tensor w = host_random({64, 64, 3, 3}, rng, DType::F16, Layout::NCHW);
  Tensor y = Tensor::empty(x.shape(), DType::F16, Layout::NHWC);
  Allocator& allocator = cpu_allocator();
  const size_t live_before = allocator.stats().live_bytes;
  allocator.reset_peak();
  b.conv2d_forward(x, w, y, {1, 1});
  EXPECT_LT(allocator.stats().peak_live_bytes - live_before, x.numel() * sizeof(float));
}

// Batch norm's chunked passes (every CPU type's backward, the emulated types' forward), global average pooling
// and the 16-bit residual sums run the same arithmetic on every SIMD path: the same bits, with channel counts that take
// the register-blocked sums (multiples of 16) and those that do not, in both layouts (NCHW: chunks of one channel). The
// chunked backward reads FP32 and BF16 NHWC tensors in place where their channels fill blocks of 16, and otherwise
// widens each chunk into a copy: both must give the same bits, with and without the ReLU's mask.
TEST(CpuBackend, BatchNormBackwardInPlaceGivesTheWideningPathsBits) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const Shape& shape : {Shape{4, 32, 6, 6}, Shape{3, 64, 5, 7}, Shape{2, 16, 40, 40}})
      for (bool relu : {false, true})
        for (bool wide : {false, true}) {
          if (wide && dtype == DType::F32) continue;
          Rng rng(11);
          const int64_t C = shape[1];
          const Tensor x = host_random(shape, rng, dtype, Layout::NHWC),
                       dy = host_random(shape, rng, dtype, Layout::NHWC);
          const Tensor y = relu ? host_random(shape, rng, dtype, Layout::NHWC) : Tensor();  // about half positive
          Tensor gamma = host_random({C}, rng, DType::F32);
          const Tensor mean = host_random({C}, rng, DType::F32);
          Tensor var = host_random({C}, rng, DType::F32);
          for (int64_t c = 0; c < C; ++c) var.data_as<float>()[c] = std::abs(var.data_as<float>()[c]) + 0.1f;
          // Gradients past FP16's range and below its normals, so that every rounding case is taken.
          gamma.data_as<float>()[0] = 1e5f;
          gamma.data_as<float>()[1] = 1e-6f;
          CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
          auto backward = [&](bool widen_every_chunk) {
            Tensor dx = Tensor::empty(shape, wide ? DType::F32 : dtype, Layout::NHWC);
            Tensor dgamma = Tensor::empty({C}, DType::F32), dbeta = Tensor::empty({C}, DType::F32);
            batchnorm_chunked_backward(x, y, dy, gamma, mean, var, dx, dgamma, dbeta, 1e-5f, 2, widen_every_chunk);
            return std::vector{bytes_of(b, dx), bytes_of(b, dgamma), bytes_of(b, dbeta)};
          };
          EXPECT_EQ(backward(false), backward(true))
              << dtype_name(dtype) << " " << x.describe() << (relu ? " with" : " without") << " the ReLU"
              << (wide ? ", dx wide" : "");
        }
}

TEST(CpuBackend, BatchNormAndAveragePoolingGiveTheSameBitsOnEverySimdPath) {
  CpuBackend b({2, CpuBf16::Emulated, false, ConvAlgorithm::Auto});  // BF16 emulated on every CPU
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (const auto& [shape, layout] : {std::pair{Shape{4, 32, 6, 6}, Layout::NHWC},
                                        {Shape{3, 24, 5, 7}, Layout::NHWC},
                                        {Shape{2, 3, 40, 40}, Layout::NCHW}}) {
      Rng rng(9);
      const int64_t C = shape[1];
      const Tensor x = host_random(shape, rng, dtype, layout), dy = host_random(shape, rng, dtype, layout);
      const Tensor gamma = host_random({C}, rng, DType::F32), beta = host_random({C}, rng, DType::F32);
      const Tensor pooled_dy = host_random({shape[0], C}, rng, dtype);
      auto run_ops = [&] {
        Tensor y = Tensor::empty(shape, dtype, layout), dx = Tensor::empty(shape, dtype, layout);
        Tensor mean = Tensor::empty({C}, DType::F32), var = Tensor::empty({C}, DType::F32);
        Tensor running_mean = Tensor::zeros({C}, DType::F32), running_var = Tensor::zeros({C}, DType::F32);
        Tensor dgamma = Tensor::empty({C}, DType::F32), dbeta = Tensor::empty({C}, DType::F32);
        Tensor pooled = Tensor::empty({shape[0], C}, dtype), pooled_dx = Tensor::empty(shape, dtype, layout);
        b.batchnorm_relu_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, 0.1f, 1e-5f);
        b.batchnorm_relu_backward(x, y, dy, gamma, beta, mean, var, dx, dgamma, dbeta, 1e-5f);
        b.global_avgpool_forward(x, pooled);
        b.global_avgpool_backward(pooled_dy, pooled_dx);
        Tensor sum_relu = Tensor::empty(shape, dtype, layout), masked_sum = Tensor::empty(shape, dtype, layout);
        b.add_relu(x, dy, sum_relu);
        b.relu_backward_of_sum(y, x, dy, masked_sum);
        std::vector<std::vector<unsigned char>> results;
        for (const Tensor* t : {&y, &mean, &var, &dx, &dgamma, &dbeta, &pooled, &pooled_dx, &sum_relu, &masked_sum})
          results.push_back(bytes_of(b, *t));
        return results;
      };
      test::SimdLimit scalar_only(SimdLevel::Scalar);
      const auto scalar = run_ops();
      for (SimdLevel level : {SimdLevel::Avx2, SimdLevel::Avx512}) {
        test::SimdLimit limit(level);
        EXPECT_EQ(run_ops(), scalar) << dtype_name(dtype) << " " << C << " channels, the "
                                     << simd_level_name(simd_level()) << " path";
      }
    }
}

// The optimizers and scale-and-check run the same arithmetic on every SIMD path: the same weights, copies, state
// and sums, bit for bit. Sizes with vector tails and several update blocks; two steps each (SGD's first step sets
// its momentum buffer); every copy type.
TEST(CpuBackend, OptimizersAndScaleCheckGiveTheSameBitsOnEverySimdPath) {
  CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  const std::vector<std::pair<int64_t, DType>> params = {
      {1, DType::BF16}, {4097, DType::F16}, {3 * 2048 + 5, DType::F32}};
  auto run_ops = [&] {
    Rng rng(11);
    std::vector<std::vector<unsigned char>> results;
    auto updates = [&](bool moments) {
      std::vector<ParamUpdate> u;
      for (const auto& [n, copy] : params) {
        ParamUpdate one{host_random({n}, rng, DType::F32), Tensor(),
                        host_random({n}, rng, DType::F32, Layout::NCHW, 0.1), Tensor::zeros({n}, DType::F32),
                        moments ? Tensor::zeros({n}, DType::F32) : Tensor()};
        if (copy != DType::F32) one.copy = Tensor::empty({n}, copy);
        u.push_back(one);
      }
      return u;
    };
    auto record = [&](const std::vector<ParamUpdate>& u) {
      for (const ParamUpdate& one : u)
        for (const Tensor* t : {&one.param, &one.copy, &one.state1, &one.state2})
          if (t->defined()) results.push_back(bytes_of(b, *t));
    };
    for (float momentum : {0.0f, 0.9f})
      for (bool nesterov : {false, true}) {
        std::vector<ParamUpdate> u = updates(false);
        for (bool first : {true, false}) b.sgd_update(u, {0.1f, momentum, 1e-4f, nesterov && momentum != 0, first});
        record(u);
      }
    for (bool decoupled : {false, true}) {
      std::vector<ParamUpdate> u = updates(true);
      for (int64_t step : {1, 2}) b.adam_update(u, {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, decoupled, step});
      record(u);
    }
    for (float factor : {1.0f / 65536, 1.0f}) {
      std::vector<ParamUpdate> u = updates(false);
      std::vector<Tensor*> grads;
      for (ParamUpdate& one : u) grads.push_back(&one.grad);
      b.scale_and_check(grads, factor);
      const double sum = b.read_scalars().sum_of_squares;
      results.push_back(std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(&sum),
                                                   reinterpret_cast<const unsigned char*>(&sum + 1)));
      for (const Tensor* g : grads) results.push_back(bytes_of(b, *g));
    }
    return results;
  };
  test::SimdLimit scalar_only(SimdLevel::Scalar);
  const auto scalar = run_ops();
  for (SimdLevel level : {SimdLevel::Avx2, SimdLevel::Avx512}) {
    test::SimdLimit limit(level);
    EXPECT_EQ(run_ops(), scalar) << "the " << simd_level_name(simd_level()) << " path";
  }
}

// An update asked to check its gradients (SgdParams::check_gradients) finds what scale_and_check(grads, 1) run
// before it finds, bit for bit (the same split between threads, the same lanes), leaves the same weights, and its
// sum of squares is the float64 one; on every SIMD path, with thread counts that split the blocks unevenly.
TEST(CpuBackend, UpdatesCheckTheirGradientsAsScaleAndCheckDoes) {
  const std::vector<std::pair<int64_t, DType>> sizes = {
      {1, DType::BF16}, {4097, DType::F16}, {3 * 2048 + 5, DType::F32}, {5 * 2048, DType::BF16}};
  auto updates = [&](bool with_nan) {
    Rng rng(12);
    std::vector<ParamUpdate> u;
    for (const auto& [n, copy] : sizes) {
      ParamUpdate one{host_random({n}, rng, DType::F32), Tensor(), host_random({n}, rng, DType::F32, Layout::NCHW, 0.1),
                      Tensor::zeros({n}, DType::F32), Tensor::zeros({n}, DType::F32)};
      if (copy != DType::F32) one.copy = Tensor::empty({n}, copy);
      u.push_back(one);
    }
    if (with_nan) u[2].grad.data_as<float>()[3000] = NAN;
    return u;
  };
  auto bytes = [](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.data());
    return std::vector<unsigned char>(p, p + t.nbytes());
  };
  for (int threads : {2, 3})
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512})
      for (bool adam : {false, true})
        for (bool with_nan : {false, true}) {
          CpuBackend b({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
          test::SimdLimit limit(level);
          SCOPED_TRACE(std::to_string(threads) + " threads, the " + simd_level_name(simd_level()) + " path, " +
                       (adam ? "Adam" : "SGD") + (with_nan ? ", a NaN gradient" : ""));
          auto update = [&](std::vector<ParamUpdate>& u, bool check) {
            if (adam)
              b.adam_update(u, {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, false, 1, nullptr, nullptr, check});
            else
              b.sgd_update(u, {0.1f, 0.9f, 1e-4f, false, true, nullptr, nullptr, check});
          };
          std::vector<ParamUpdate> separate = updates(with_nan), checked = updates(with_nan);
          std::vector<Tensor*> grads;
          for (ParamUpdate& one : separate) grads.push_back(&one.grad);
          b.scale_and_check(grads, 1.0f);
          const StepScalars expected = b.read_scalars();
          update(separate, false);
          b.scale_and_check({&separate[0].grad}, 1.0f);  // whatever the check finds must come from the update's
          update(checked, true);
          const StepScalars found = b.read_scalars();
          EXPECT_EQ(found.nonfinite, with_nan);
          EXPECT_EQ(found.nonfinite, expected.nonfinite);
          if (!with_nan) {
            EXPECT_EQ(std::memcmp(&found.sum_of_squares, &expected.sum_of_squares, sizeof(double)), 0)
                << found.sum_of_squares << " against " << expected.sum_of_squares;
            double exact = 0;  // float64, element by element
            for (const ParamUpdate& one : checked)
              for (float g : to_float_vector(one.grad)) exact += static_cast<double>(g) * g;
            EXPECT_NEAR(found.sum_of_squares, exact, exact * 1e-12);
          }
          for (size_t i = 0; i < sizes.size(); ++i)
            for (auto [a, c] :
                 std::vector<std::pair<const Tensor*, const Tensor*>>{{&separate[i].param, &checked[i].param},
                                                                      {&separate[i].copy, &checked[i].copy},
                                                                      {&separate[i].state1, &checked[i].state1},
                                                                      {&separate[i].state2, &checked[i].state2}})
              if (a->defined()) {
                EXPECT_EQ(bytes(*a), bytes(*c)) << "parameter " << i;
              }
        }
  CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::vector<ParamUpdate> u = updates(false);
  Tensor state = Tensor::zeros({kLossScaleStateBytes}, DType::U8);
  EXPECT_THROW(b.sgd_update(u, {0.1f, 0.9f, 0.0f, false, true, &state, nullptr, true}), Error)
      << "a check the update itself is gated by";
}

// An update given a 16-bit gradient (Capabilities::updates_read_16bit_gradients) computes with its values widened:
// the same weights, copies, optimizer state and check, bit for bit, as from the FP32 gradient holding those values;
// on every SIMD path, with thread counts that split the blocks unevenly, an inf among the 16-bit values found.
TEST(CpuBackend, UpdatesReadSixteenBitGradientsAsTheirWidenedValues) {
  EXPECT_TRUE(CpuBackend({2, CpuBf16::Auto, false, ConvAlgorithm::Auto}).capabilities().updates_read_16bit_gradients);
  const std::vector<std::pair<int64_t, DType>> sizes = {
      {1, DType::BF16}, {4097, DType::F16}, {3 * 2048 + 5, DType::BF16}, {5 * 2048, DType::F16}};
  auto updates = [&](bool low, bool with_inf) {
    Rng rng(13);
    std::vector<ParamUpdate> u;
    for (const auto& [n, dtype] : sizes) {
      Tensor low_grad = host_random({n}, rng, dtype, Layout::NCHW, 0.1);
      if (with_inf && n > 3000) low_grad.data_as<uint16_t>()[3000] = dtype == DType::BF16 ? 0x7f80 : 0x7c00;
      Tensor wide = Tensor::empty({n}, DType::F32);
      widen_16bit(dtype, low_grad.data_as<uint16_t>(), wide.data_as<float>(), n);
      u.push_back({host_random({n}, rng, DType::F32), Tensor::empty({n}, dtype), low ? low_grad : wide,
                   Tensor::zeros({n}, DType::F32), Tensor::zeros({n}, DType::F32)});
    }
    return u;
  };
  auto bytes = [](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.data());
    return std::vector<unsigned char>(p, p + t.nbytes());
  };
  for (int threads : {2, 3})
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx512})
      for (bool adam : {false, true})
        for (bool with_inf : {false, true}) {
          CpuBackend b({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
          test::SimdLimit limit(level);
          SCOPED_TRACE(std::to_string(threads) + " threads, the " + simd_level_name(simd_level()) + " path, " +
                       (adam ? "Adam" : "SGD") + (with_inf ? ", an inf gradient" : ""));
          auto update = [&](std::vector<ParamUpdate>& u) {
            for (int64_t step : {1, 2}) {  // the second reads the state the first wrote
              if (adam)
                b.adam_update(u, {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, false, step, nullptr, nullptr, true});
              else
                b.sgd_update(u, {0.1f, 0.9f, 1e-4f, false, step == 1, nullptr, nullptr, true});
            }
            return b.read_scalars();
          };
          std::vector<ParamUpdate> wide = updates(false, with_inf), low = updates(true, with_inf);
          const StepScalars from_wide = update(wide), from_low = update(low);
          EXPECT_EQ(from_low.nonfinite, with_inf);
          EXPECT_EQ(std::memcmp(&from_low.sum_of_squares, &from_wide.sum_of_squares, sizeof(double)), 0);
          for (size_t i = 0; i < sizes.size(); ++i) {
            EXPECT_EQ(bytes(low[i].param), bytes(wide[i].param)) << "parameter " << i;
            EXPECT_EQ(bytes(low[i].copy), bytes(wide[i].copy)) << "parameter " << i;
            EXPECT_EQ(bytes(low[i].state1), bytes(wide[i].state1)) << "parameter " << i;
            EXPECT_EQ(bytes(low[i].state2), bytes(wide[i].state2)) << "parameter " << i;
          }
        }
  CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::vector<ParamUpdate> u = updates(true, false);
  u[1].grad = Tensor::zeros({4096}, DType::F16);
  EXPECT_THROW(b.sgd_update(u, {0.1f, 0.9f, 0.0f, false, true}), Error) << "a gradient of another shape";
}

}  // namespace
}  // namespace ampwb::testing
