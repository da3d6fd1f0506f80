// Would a convolution that reads its weights as stored save the per-step weight reorder? For ResNet-18's small-image
// shapes, times oneDNN's choice (blocked weights, reordered from the stored OHWI layout at every call, as the CPU
// backend does) against the convolution oneDNN runs on plain weights (its GEMM one, which takes HWIO and no
// reorder). Forward and backward data, NHWC FP32, best of 10 after 2 warm-ups, on oneDNN's own threads
// (OMP_NUM_THREADS). docs/benchmarks.md lists it with the other bench programs.
//
//   OMP_NUM_THREADS=2 build/bench/ampwb_plain_weights
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

namespace {
using dnnl::memory;
using Tag = memory::format_tag;

struct Shape {
  int n, c, h, k, r, stride;  // batch, input channels, image side, output channels, kernel side, stride
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best time of a call that first reorders the weights from `stored` where the primitive wants others.
double best_time(const dnnl::engine& engine, dnnl::stream& stream, const dnnl::primitive& conv, bool backward,
                 const memory::desc& stored, const memory::desc& wanted, const memory::desc& x, const memory::desc& y) {
  memory xm(x, engine), ym(y, engine), stored_w(stored, engine), wanted_w(wanted, engine);
  std::fill_n(static_cast<float*>(xm.get_data_handle()), x.get_size() / sizeof(float), 0.5f);
  std::fill_n(static_cast<float*>(ym.get_data_handle()), y.get_size() / sizeof(float), 0.5f);
  std::fill_n(static_cast<float*>(stored_w.get_data_handle()), stored.get_size() / sizeof(float), 0.01f);
  const bool reorders = wanted != stored;
  dnnl::reorder reorder = reorders ? dnnl::reorder(stored_w, wanted_w) : dnnl::reorder();
  memory& w = reorders ? wanted_w : stored_w;
  double best = 1e30;
  for (int i = 0; i < 12; ++i) {
    const double start = seconds_now();
    if (reorders) reorder.execute(stream, stored_w, wanted_w);
    if (backward)
      conv.execute(stream, {{DNNL_ARG_DIFF_DST, ym}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, xm}});
    else
      conv.execute(stream, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, ym}});
    stream.wait();
    if (i >= 2) best = std::min(best, seconds_now() - start);
  }
  return best;
}
}  // namespace

int main() {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  // ResNet-18's last two stages at 64 px (batch 32) and its last at 224 px (batch 16).
  const std::vector<Shape> shapes = {{32, 128, 8, 256, 3, 2}, {32, 256, 4, 256, 3, 1}, {32, 256, 4, 512, 3, 2},
                                     {32, 256, 4, 512, 1, 2}, {32, 512, 2, 512, 3, 1}, {16, 512, 7, 512, 3, 1}};
  std::printf("%-28s %-9s %26s %26s %7s\n", "shape (N C H -> K RxR /s)", "pass", "blocked + reorder (ms)",
              "plain, no reorder (ms)", "ratio");
  for (const Shape& s : shapes) {
    const int pad = s.r / 2, p = (s.h + 2 * pad - s.r) / s.stride + 1;
    const memory::desc x({s.n, s.c, s.h, s.h}, memory::data_type::f32, Tag::nhwc);
    const memory::desc y({s.n, s.k, p, p}, memory::data_type::f32, Tag::nhwc);
    const memory::dims weight_dims{s.k, s.c, s.r, s.r}, strides{s.stride, s.stride}, padding{pad, pad};
    const memory::desc ohwi(weight_dims, memory::data_type::f32, Tag::ohwi);
    const memory::desc hwio(weight_dims, memory::data_type::f32, Tag::hwio);
    const memory::desc any(weight_dims, memory::data_type::f32, Tag::any);
    for (const bool backward : {false, true}) {
      double ms[2];
      std::string impl[2];
      for (int plain = 0; plain < 2; ++plain) {
        const memory::desc& w = plain ? hwio : any;
        const dnnl::convolution_forward::primitive_desc forward(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, x,
                                            w, y, strides, padding, padding),
            engine);
        if (backward) {
          const dnnl::convolution_backward_data::primitive_desc pd(
              dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x, w, y, strides, padding,
                                                    padding),
              engine, forward);
          ms[plain] = 1e3 * best_time(engine, stream, dnnl::convolution_backward_data(pd), true, plain ? hwio : ohwi,
                                      pd.weights_desc(), x, y);
          impl[plain] = pd.impl_info_str();
        } else {
          ms[plain] = 1e3 * best_time(engine, stream, dnnl::convolution_forward(forward), false, plain ? hwio : ohwi,
                                      forward.weights_desc(), x, y);
          impl[plain] = forward.impl_info_str();
        }
      }
      char shape[64];
      std::snprintf(shape, sizeof shape, "%d %d %d -> %d %dx%d /%d", s.n, s.c, s.h, s.k, s.r, s.r, s.stride);
      std::printf("%-28s %-9s %8.2f %-17s %8.2f %-17s %6.2fx\n", shape, backward ? "bwd_data" : "forward", ms[0],
                  impl[0].c_str(), ms[1], impl[1].c_str(), ms[1] / ms[0]);
    }
  }
}
