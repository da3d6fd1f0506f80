// The op harness's cases: one table of {op, shape, precision, layout, parameters}, each with what it is for. The
// harness (test_backend_ops.cpp) runs every case on every backend; a case's name reads op_precision_layout_shape.
// Dimension letters as in backend.h: N C H W input, K R S (R = S here) filters, P Q output, I O linear features.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "op_tolerances.h"

namespace ampwb::testing {

struct ConvCase {
  static constexpr Op kOp = Op::Conv2d;
  int64_t N, C, H, W, K, R;
  int stride, padding;
  Layout weights = Layout::NCHW;  // set to the activations' layout unless mixed_weights
  bool mixed_weights = false;     // weights NCHW under NHWC activations (reordered by the backend)
  bool fp32_weight_grad = false;  // dw in FP32 from 16-bit x and dy
};
struct BatchNormCase {
  static constexpr Op kOp = Op::BatchNorm;
  int64_t N, C, H, W;
};
struct ReluCase {
  static constexpr Op kOp = Op::Relu;
  int64_t N, C, H, W;
};
struct MaxPoolCase {
  static constexpr Op kOp = Op::MaxPool;
  int64_t N, C, H, W;
  int kernel, stride, padding;
  bool gradient_other_layout = false;  // dy (and dx) in the other layout than x and y
};
struct GlobalAvgPoolCase {
  static constexpr Op kOp = Op::GlobalAvgPool;
  int64_t N, C, H, W;
};
struct LinearCase {
  static constexpr Op kOp = Op::Linear;
  int64_t N, I, O;
  bool fp32_weight_grad = false;  // dw and db in FP32 from 16-bit inputs, and no dx asked for
};
struct AddCase {
  static constexpr Op kOp = Op::Add;
  int64_t N, C, H, W;
  bool mixed_layouts = false;  // the second operand in the other layout
};
struct ConvertCase {
  static constexpr Op kOp = Op::Convert;
  int64_t N, C, H, W;
  Precision to;
  Layout to_layout;
};
struct CrossEntropyCase {
  static constexpr Op kOp = Op::SoftmaxCrossEntropy;
  int64_t N, K;
  float smoothing, grad_scale;
  bool integer_logits = false;  // small integers: many ties, which count against the sample in top-1
  bool large_logits = false;    // about +-1000: a log-sum-exp rounded to FP32 would cost 6e-5 of the softmax
};
struct SgdCase {
  static constexpr Op kOp = Op::SgdUpdate;
  float momentum;
  bool nesterov;
};
struct AdamCase {
  static constexpr Op kOp = Op::AdamUpdate;
  bool decoupled;
};
struct ScaleCheckCase {
  static constexpr Op kOp = Op::ScaleCheck;
  float inject;  // a value put into one more tensor (0: none): inf, NaN, or a finite one the scaling overflows
};

struct ScaledCastCase {  // FP8's scaled cast: x in the case's type, y in `to`
  static constexpr Op kOp = Op::ScaledCast;
  int64_t n;
  bool to_fp8;  // rounded to `format` (saturating), else the product rounded to y's type alone
  Fp8Format format;
  float scale;
  Precision to;
};

using Params = std::variant<ConvCase, BatchNormCase, ReluCase, MaxPoolCase, GlobalAvgPoolCase, LinearCase, AddCase,
                            ConvertCase, CrossEntropyCase, SgdCase, AdamCase, ScaleCheckCase, ScaledCastCase>;

struct OpCase {
  Params params;
  Precision precision;
  Layout layout;  // of the 4-D activations; 2-D and 1-D tensors have no other
  const char* why = "";
};

inline std::string dims(std::initializer_list<std::pair<const char*, int64_t>> named) {
  std::string s;
  for (const auto& [letter, value] : named) s += letter + std::to_string(value);
  return s;
}

inline std::string params_name(const ConvCase& c) {
  return "conv2d_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}}) + "_" +
         dims({{"K", c.K}, {"R", c.R}, {"s", c.stride}, {"p", c.padding}}) + (c.mixed_weights ? "_wnchw" : "") +
         (c.fp32_weight_grad ? "_dwf32" : "");
}
inline std::string params_name(const BatchNormCase& c) {
  return "batchnorm_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}});
}
inline std::string params_name(const ReluCase& c) {
  return "relu_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}});
}
inline std::string params_name(const MaxPoolCase& c) {
  return "maxpool_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}}) + "_" +
         dims({{"k", c.kernel}, {"s", c.stride}, {"p", c.padding}}) + (c.gradient_other_layout ? "_dyflip" : "");
}
inline std::string params_name(const GlobalAvgPoolCase& c) {
  return "globalavgpool_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}});
}
inline std::string params_name(const LinearCase& c) {
  return "linear_" + dims({{"N", c.N}, {"I", c.I}, {"O", c.O}}) + (c.fp32_weight_grad ? "_dwf32" : "");
}
inline std::string params_name(const AddCase& c) {
  return "add_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}}) + (c.mixed_layouts ? "_mixed" : "");
}
inline std::string params_name(const ConvertCase& c) {
  return "convert_" + dims({{"N", c.N}, {"C", c.C}, {"H", c.H}, {"W", c.W}}) + "_to_" + precision_name(c.to) + "_" +
         layout_name(c.to_layout);
}
inline std::string params_name(const CrossEntropyCase& c) {
  return "crossentropy_" + dims({{"N", c.N}, {"K", c.K}}) + (c.smoothing > 0 ? "_smoothed" : "") +
         (c.grad_scale != 1 ? "_scaled" : "") + (c.integer_logits ? "_ties" : "") + (c.large_logits ? "_large" : "");
}
inline std::string params_name(const SgdCase& c) {
  return std::string("sgd") + (c.momentum == 0 ? "_plain" : c.nesterov ? "_nesterov" : "_momentum");
}
inline std::string params_name(const AdamCase& c) { return c.decoupled ? "adamw" : "adam"; }
inline std::string params_name(const ScaleCheckCase& c) {
  return std::string("scalecheck_") + (c.inject == 0          ? "finite"
                                       : std::isnan(c.inject) ? "nan"
                                       : std::isinf(c.inject) ? "inf"
                                                              : "overflow");
}

inline std::string params_name(const ScaledCastCase& c) {
  return "scaledcast_" + dims({{"n", c.n}}) + "_" + (c.to_fp8 ? fp8_format_name(c.format) : "noround") + "_to_" +
         precision_name(c.to);
}

inline bool is_4d(const Params& p) {
  return !std::holds_alternative<LinearCase>(p) && !std::holds_alternative<CrossEntropyCase>(p) &&
         !std::holds_alternative<SgdCase>(p) && !std::holds_alternative<AdamCase>(p) &&
         !std::holds_alternative<ScaleCheckCase>(p) && !std::holds_alternative<ScaledCastCase>(p);
}

inline std::string case_name(const OpCase& c) {
  std::string name = std::visit([](const auto& p) { return params_name(p); }, c.params);
  const size_t op_end = name.find('_');
  std::string prefix = std::string(precision_name(c.precision)) + (is_4d(c.params) ? "_" : "");
  if (is_4d(c.params)) prefix += layout_name(c.layout);
  return op_end == std::string::npos ? name + "_" + prefix : name.insert(op_end, "_" + prefix);
}

inline void PrintTo(const OpCase& c, std::ostream* out) {
  *out << case_name(c) << (*c.why ? " (" : "") << c.why << (*c.why ? ")" : "");
}

inline constexpr Precision kEveryPrecision[] = {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16};
inline constexpr Precision kStorage[] = {Precision::FP32, Precision::FP16, Precision::BF16};
inline constexpr Layout kLayouts[] = {Layout::NCHW, Layout::NHWC};

inline std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  struct Shaped {
    ConvCase conv;
    const char* why;
  };
  const Shaped convs[] = {
      {{1, 3, 7, 7, 5, 3, 1, 1}, "batch 1, odd sizes, 3 channels (padded to 8 in 16-bit NHWC on a GPU)"},
      {{2, 4, 9, 11, 6, 3, 2, 1}, "stride 2, not square"},
      {{3, 5, 8, 8, 4, 1, 2, 0},
       "1x1 stride 2 (projection shortcut), 5 channels: oneDNN 2.6.3's jit_1x1:avx2 got this NHWC weight gradient "
       "wrong (worked around in cpu_backend.cpp; avx2.test_ops checks it)"},
      {{2, 3, 13, 13, 8, 7, 2, 3}, "the 7x7 stem"},
      {{1, 16, 5, 5, 16, 3, 1, 0}, "no padding"},
      {{2, 6, 10, 7, 3, 5, 1, 2}, "5x5 filters"},
      {{2, 32, 6, 6, 24, 3, 2, 1}, "wider channels (vectorised paths)"},
      {{2, 64, 4, 4, 16, 1, 1, 0}, "bottleneck 1x1 reduce (oneDNN's 1x1 kernels)"},
      {{2, 16, 5, 5, 64, 1, 1, 0}, "bottleneck 1x1 expand"},
      {{4, 64, 14, 14, 64, 3, 1, 1}, "a ResNet 3x3 block (tensor-core kernels, Winograd on the CPU)"},
      {{2, 64, 13, 15, 72, 3, 1, 1}, "odd sizes, 64 to 72 channels: Winograd's 2x2 output tiles overhang the image"},
      {{1, 256, 12, 12, 256, 3, 1, 1}, "256 channels: Winograd's error grows with the channels summed"},
      {{4, 32, 2, 2, 24, 3, 1, 1},
       "3x3 over 2x2 images (ResNet-18's last stage at 64 px): where oneDNN's FP32 NHWC weight gradient is its "
       "per-image GEMM (AVX2), one GEMM over the batch instead (cpu_backend_conv.cpp)"},
  };
  for (const Shaped& s : convs)
    for (Precision p : kEveryPrecision)
      for (Layout layout : kLayouts) {
        ConvCase c = s.conv;
        c.weights = layout;
        cases.push_back({c, p, layout, s.why});
      }
  // amp-fp8's convolution: scaled casts around FP32 convolutions (the NCHW weights of the layers, as stored).
  for (int i : {1, 3, 5, 9})
    for (Layout layout : kLayouts) {
      ConvCase c = convs[i].conv;
      c.weights = layout;
      cases.push_back({c, Precision::FP8, layout, convs[i].why});
    }
  for (Precision p : {Precision::FP16, Precision::BF16})
    for (int i : {0, 2, 9, 12}) {
      ConvCase mixed = convs[i].conv;
      mixed.mixed_weights = true;  // weights NCHW, as the layers keep them
      ConvCase wide = mixed;
      wide.fp32_weight_grad = true;
      cases.push_back({mixed, p, Layout::NHWC, "weights in another layout than the activations"});
      cases.push_back({wide, p, Layout::NHWC, "an FP32 weight gradient straight from 16-bit activations"});
    }

  // On a GPU, NHWC with whole 16-byte packs of channels (C = 16, 40, 264) takes the packed kernels, the others the
  // general ones; 2048 rows make several row blocks, 264 channels several channel groups of packs.
  const BatchNormCase norms[] = {{1, 3, 5, 5},  {4, 7, 3, 2},    {2, 16, 8, 8},
                                 {3, 33, 4, 5}, {8, 40, 16, 16}, {4, 264, 6, 6}};
  for (const BatchNormCase& s : norms)
    for (Precision p : kStorage)
      for (Layout layout : kLayouts)
        cases.push_back({s, p, layout,
                         s.N == 8    ? "N H W = 2048 rows: a multi-block reduction on a GPU"
                         : s.C > 256 ? "more channels than one GPU block reduces: several channel groups"
                                     : ""});
  const int64_t small[][4] = {{1, 3, 5, 5}, {4, 7, 3, 2}, {2, 16, 8, 8}, {3, 33, 4, 5}};
  for (const auto& s : small)
    for (Precision p : kStorage)
      for (Layout layout : kLayouts) {
        cases.push_back({ReluCase{s[0], s[1], s[2], s[3]}, p, layout, "with -0 and +0 among the inputs"});
        cases.push_back({GlobalAvgPoolCase{s[0], s[1], s[2], s[3]}, p, layout});
        cases.push_back({AddCase{s[0], s[1], s[2], s[3]}, p, layout});
      }
  for (Precision p : kStorage)
    for (Layout layout : kLayouts) {
      cases.push_back(
          {AddCase{3, 33, 4, 5, true}, p, layout, "operands in different layouts (the interface allows it)"});
      cases.push_back({AddCase{2, 33, 9, 11}, p, layout, "several of the CPU's 1024-element chunks and a tail"});
    }

  const MaxPoolCase pools[] = {{1, 3, 7, 7, 3, 2, 1}, {2, 4, 8, 9, 2, 2, 0}, {2, 17, 11, 11, 3, 2, 1},
                               {1, 2, 5, 5, 3, 1, 1}, {2, 8, 6, 6, 3, 1, 1}, {2, 64, 112, 112, 3, 2, 1}};
  for (const MaxPoolCase& s : pools)
    for (Precision p : kStorage)
      for (Layout layout : kLayouts)
        cases.push_back({s, p, layout,
                         s.H == 112      ? "ResNet's stem pool at 224 px (large grids)"
                         : s.stride == 1 ? "overlapping windows: up to 9 gradients meet in one input"
                                         : ""});

  for (Precision p : kStorage)
    for (Layout layout : kLayouts)
      cases.push_back({MaxPoolCase{2, 17, 11, 11, 3, 2, 1, true}, p, layout,
                       "the gradient in the other layout than the forward's output (the interface allows it)"});

  const LinearCase linears[] = {{1, 5, 3}, {7, 13, 10}, {16, 64, 100}, {64, 512, 1000}};
  for (const LinearCase& s : linears)
    for (Precision p : kEveryPrecision) cases.push_back({s, p, Layout::NCHW});
  for (const LinearCase& s : {linears[1], linears[2], linears[3]})
    cases.push_back({s, Precision::FP8, Layout::NCHW, "amp-fp8's linear layer: scaled casts around FP32 products"});
  for (Precision p : {Precision::FP16, Precision::BF16})
    for (LinearCase s : {linears[1], linears[3]}) {
      s.fp32_weight_grad = true;
      cases.push_back({s, p, Layout::NCHW, "FP32 weight and bias gradients from 16-bit products, no dx"});
    }

  for (Precision from : kStorage)
    for (Layout layout : kLayouts)
      for (Precision to : kStorage)
        for (Layout to_layout : kLayouts)
          cases.push_back({ConvertCase{2, 5, 3, 4, to, to_layout}, from, layout,
                           "with FP16's and BF16's edges: overflow, subnormals, -0"});

  const CrossEntropyCase losses[] = {{9, 5, 0.0f, 1.0f},
                                     {9, 5, 0.1f, 1024.0f},
                                     {256, 1000, 0.1f, 65536.0f},
                                     {3, 2000, 0.0f, 1.0f},
                                     {12, 4, 0.0f, 1.0f, true}};
  for (const CrossEntropyCase& s : losses)
    for (Precision p : kStorage) cases.push_back({s, p, Layout::NCHW});
  cases.push_back({CrossEntropyCase{16, 1000, 0.1f, 1.0f, false, true}, Precision::FP32, Layout::NCHW,
                   "logits near +-1000: the softmax needs its log-sum-exp in double"});
  for (Precision p : kStorage) {
    for (SgdCase s : {SgdCase{0.9f, false}, SgdCase{0.9f, true}, SgdCase{0.0f, false}})
      cases.push_back({s, p, Layout::NCHW, "three steps, weight decay"});
    for (bool decoupled : {false, true}) cases.push_back({AdamCase{decoupled}, p, Layout::NCHW, "three steps"});
    for (float inject : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 3e38f})
      cases.push_back({ScaleCheckCase{inject}, p, Layout::NCHW,
                       "tensors of 0 to 2^20 elements, around a GPU's 4096-element chunks"});
  }
  // FP8's scaled cast: scales that send some of the values past the format's max and some below its smallest
  // subnormal, so that saturation, underflow and the counts of both are checked; 10007 elements cross the CPU's
  // 4096-element pieces and leave a tail.
  for (Precision p : kStorage)
    for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2})
      for (Precision to : {Precision::FP32, Precision::BF16})
        cases.push_back({ScaledCastCase{10007, true, f, f == Fp8Format::E4M3 ? 0.0625f : 1.0f, to}, p, Layout::NCHW,
                         "with +-0, +-inf and values that saturate and underflow"});
  for (Precision p : kStorage)
    for (Precision to : kStorage)
      cases.push_back({ScaledCastCase{4099, false, Fp8Format::E4M3, 1.0f / 3.0f, to}, p, Layout::NCHW,
                       "an FP8 product's scale-inverses applied on its way out"});
  return cases;
}

inline const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = all_cases();
  return all;
}

}  // namespace ampwb::testing
