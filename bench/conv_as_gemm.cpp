// oneDNN alone: each pass of ResNet-18's convolutions as oneDNN's convolution primitive against the same product as
// one matmul (patches x weights, the input's kernel windows copied into rows first), BF16 or FP32, NHWC, best of 7
// runs each. It shows where oneDNN 2.6.3's BF16 convolutions are slow on AMX (docs/benchmarks.md, "AMX"). The
// products leave out their copies (the patches, col2im), the convolutions their weights' reorders.
// usage: ampwb_conv_as_gemm [bf16|f32] [batch 32] [image size 64]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

using namespace dnnl;
using Tag = memory::format_tag;
using Type = memory::data_type;

namespace {
engine cpu(engine::kind::cpu, 0);
stream queue(cpu);

template <class Run>
double best_ms(Run run) {
  run();
  double best = 1e30;
  for (int i = 0; i < 7; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    queue.wait();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

memory filled(const memory::desc& md) {  // small varied values, the same bits for BF16 and FP32's upper half
  memory m(md, cpu);
  auto* bits = static_cast<uint16_t*>(m.get_data_handle());
  for (size_t i = 0; i < md.get_size() / 2; ++i) bits[i] = static_cast<uint16_t>(0x3c00 + i * 7919 % 256);
  return m;
}

struct Conv {
  int64_t channels, size, out_channels, kernel;
  int stride, padding;
};
}  // namespace

int main(int argc, char** argv) {
  const Type type = argc > 1 && std::string(argv[1]) == "f32" ? Type::f32 : Type::bf16;
  const int64_t N = argc > 2 ? std::atoll(argv[2]) : 32, px = argc > 3 ? std::atoll(argv[3]) : 64, s = px / 4;
  const std::vector<Conv> convs = {{64, s, 64, 3, 1, 1},       {64, s, 128, 3, 2, 1},      {64, s, 128, 1, 2, 0},
                                   {128, s / 2, 128, 3, 1, 1}, {128, s / 2, 256, 3, 2, 1}, {128, s / 2, 256, 1, 2, 0},
                                   {256, s / 4, 256, 3, 1, 1}, {256, s / 4, 512, 3, 2, 1}, {256, s / 4, 512, 1, 2, 0},
                                   {512, s / 8, 512, 3, 1, 1}};
  primitive_attr attr;
  std::printf("%s, batch %lld, %lld px (ResNet-18's convolutions after the stem), ms (GFLOP/s)\n",
              type == Type::bf16 ? "BF16" : "FP32", static_cast<long long>(N), static_cast<long long>(px));
  std::printf("%-30s %-21s %-21s %-21s | %-21s %-21s %-21s %s\n", "convolution", "conv forward", "conv bwd data",
              "conv bwd weights", "matmul forward", "matmul bwd data", "matmul bwd weights", "implementations");
  for (const Conv& c : convs) {
    const int64_t P = (c.size + 2 * c.padding - c.kernel) / c.stride + 1;
    const memory::desc x({N, c.channels, c.size, c.size}, type, Tag::nhwc),
        y({N, c.out_channels, P, P}, type, Tag::nhwc);
    const memory::desc w_any({c.out_channels, c.channels, c.kernel, c.kernel}, type, Tag::any);
    const memory::dims stride{c.stride, c.stride}, pad{c.padding, c.padding};
    const convolution_forward::primitive_desc fwd_pd(
        {prop_kind::forward_training, algorithm::convolution_direct, x, w_any, y, stride, pad, pad}, attr, cpu);
    const convolution_backward_data::primitive_desc bwd_data_pd(
        {algorithm::convolution_direct, x, w_any, y, stride, pad, pad}, attr, cpu, fwd_pd);
    const convolution_backward_weights::primitive_desc bwd_weights_pd(
        {algorithm::convolution_direct, x, w_any, y, stride, pad, pad}, attr, cpu, fwd_pd);
    memory xm = filled(x), ym = filled(y), w_fwd = filled(fwd_pd.weights_desc()),
           w_bwd = filled(bwd_data_pd.weights_desc()), dw = filled(bwd_weights_pd.diff_weights_desc());
    const double conv_fwd = best_ms([&] {
      convolution_forward(fwd_pd).execute(queue, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, w_fwd}, {DNNL_ARG_DST, ym}});
    });
    const double conv_bwd_data = best_ms([&] {
      convolution_backward_data(bwd_data_pd)
          .execute(queue, {{DNNL_ARG_DIFF_DST, ym}, {DNNL_ARG_WEIGHTS, w_bwd}, {DNNL_ARG_DIFF_SRC, xm}});
    });
    const double conv_bwd_weights = best_ms([&] {
      convolution_backward_weights(bwd_weights_pd)
          .execute(queue, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, ym}, {DNNL_ARG_DIFF_WEIGHTS, dw}});
    });
    // rows: output pixels; columns: a kernel window's values (C*R*S); K: output channels.
    const int64_t rows = N * P * P, columns = c.channels * c.kernel * c.kernel, K = c.out_channels;
    const memory::desc patches({rows, columns}, type, Tag::ab), w_t({columns, K}, type, memory::dims{1, columns}),
        y_rows({rows, K}, type, Tag::ab), w_rows({K, columns}, type, Tag::ab),
        dpatches({rows, columns}, Type::f32, Tag::ab), dy_t({K, rows}, type, memory::dims{1, K}),
        dw_rows({K, columns}, type, Tag::ab);
    const matmul::primitive_desc mm_fwd_pd({patches, w_t, y_rows}, attr, cpu),
        mm_bwd_data_pd({y_rows, w_rows, dpatches}, attr, cpu), mm_bwd_weights_pd({dy_t, patches, dw_rows}, attr, cpu);
    memory pm = filled(patches), wm = filled(w_rows), dpm(dpatches, cpu), dwm(dw_rows, cpu);
    const double mm_fwd = best_ms([&] {
      matmul(mm_fwd_pd).execute(queue, {{DNNL_ARG_SRC, pm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}});
    });
    const double mm_bwd_data = best_ms([&] {
      matmul(mm_bwd_data_pd).execute(queue, {{DNNL_ARG_SRC, ym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dpm}});
    });
    const double mm_bwd_weights = best_ms([&] {
      matmul(mm_bwd_weights_pd).execute(queue, {{DNNL_ARG_SRC, ym}, {DNNL_ARG_WEIGHTS, pm}, {DNNL_ARG_DST, dwm}});
    });
    const double gflop = 2.0 * rows * columns * K / 1e6;  // per ms: GFLOP/s
    char name[64], cell[6][32];
    std::snprintf(name, sizeof name, "%lldx%lld %lld->%lld %lldx%lld s%d", static_cast<long long>(c.size),
                  static_cast<long long>(c.size), static_cast<long long>(c.channels),
                  static_cast<long long>(c.out_channels), static_cast<long long>(c.kernel),
                  static_cast<long long>(c.kernel), c.stride);
    const double ms[6] = {conv_fwd, conv_bwd_data, conv_bwd_weights, mm_fwd, mm_bwd_data, mm_bwd_weights};
    for (int i = 0; i < 6; ++i) std::snprintf(cell[i], sizeof cell[i], "%.2f (%.0f)", ms[i], gflop / ms[i]);
    std::printf("%-30s %-21s %-21s %-21s | %-21s %-21s %-21s %s, %s, %s | %s\n", name, cell[0], cell[1], cell[2],
                cell[3], cell[4], cell[5], fwd_pd.impl_info_str(), bwd_data_pd.impl_info_str(),
                bwd_weights_pd.impl_info_str(), mm_fwd_pd.impl_info_str());
  }
}
