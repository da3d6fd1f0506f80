// What would FP32 weights kept between steps in a oneDNN blocked layout save? A step reorders
// each convolution's weights three times: the stored plain OIHW weights into the forward's layout and into the
// backward-data's layout, and the weight gradient from the backward-weights' layout back to plain. The three
// primitives want three different layouts, so a master kept in one of them still needs the other two reorders. For
// ResNet-18's convolutions at the given size, this times, with the caches flushed before every reorder as a step's
// other traffic flushes them, the reorders of one step for the master kept plain (today), in the forward's layout and
// in the weight gradient's layout. Primitives described as the CPU backend describes them (NHWC activations, weights
// "any", the forward as the backward's hint); FP32, oneDNN's own threads (OMP_NUM_THREADS), median of 7 after 2.
// docs/benchmarks.md lists it with the other bench programs.
//
//   OMP_NUM_THREADS=2 build/bench/ampwb_blocked_master [IMAGE_SIDE=64] [BATCH=32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

namespace {
using dnnl::memory;
using Tag = memory::format_tag;

struct Conv {
  int count;                 // how many of ResNet-18's convolutions have this shape
  int c, h, k, r, stride;    // input channels, input side, output channels, kernel side, stride
  bool needs_data_gradient;  // the stem's input (the images) needs none
};

// ResNet-18's convolutions for an image side (the stem halves it, the max pool halves it again).
std::vector<Conv> resnet18_convs(int side) {
  const int s1 = side / 4, s2 = s1 / 2, s3 = s2 / 2, s4 = s3 / 2;
  return {{1, 3, side, 64, 7, 2, false}, {4, 64, s1, 64, 3, 1, true},   {1, 64, s1, 128, 3, 2, true},
          {1, 64, s1, 128, 1, 2, true},  {3, 128, s2, 128, 3, 1, true}, {1, 128, s2, 256, 3, 2, true},
          {1, 128, s2, 256, 1, 2, true}, {3, 256, s3, 256, 3, 1, true}, {1, 256, s3, 512, 3, 2, true},
          {1, 256, s3, 512, 1, 2, true}, {3, 512, s4, 512, 3, 1, true}};
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of a reorder from `from` to `to` with the caches flushed first; 0 where the layouts are the same.
double reorder_seconds(const dnnl::engine& engine, dnnl::stream& stream, const memory::desc& from,
                       const memory::desc& to, std::vector<char>& flush) {
  if (from == to) return 0;
  memory src(from, engine), dst(to, engine);
  std::fill_n(static_cast<float*>(src.get_data_handle()), from.get_size() / sizeof(float), 0.01f);
  dnnl::reorder reorder(src, dst);
  std::vector<double> times;
  for (int i = 0; i < 9; ++i) {
    for (size_t b = 0; b < flush.size(); b += 64) flush[b] += 1;
    const double start = seconds_now();
    reorder.execute(stream, src, dst);
    stream.wait();
    if (i >= 2) times.push_back(seconds_now() - start);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

std::string tag_of(const memory::desc& d) {  // oneDNN's name of a blocked layout, e.g. "Acdb32a"
  const dnnl_memory_desc_t& c = d.data;
  const auto& blk = c.format_desc.blocking;
  std::string s;
  std::vector<int> order(c.ndims);
  for (int i = 0; i < c.ndims; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  for (int dim : order) {
    bool blocked = false;
    for (int j = 0; j < blk.inner_nblks; ++j) blocked = blocked || blk.inner_idxs[j] == dim;
    s += static_cast<char>((blocked ? 'A' : 'a') + dim);
  }
  for (int j = 0; j < blk.inner_nblks; ++j)
    s += std::to_string(blk.inner_blks[j]) + static_cast<char>('a' + blk.inner_idxs[j]);
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  const int side = argc > 1 ? std::atoi(argv[1]) : 64, batch = argc > 2 ? std::atoi(argv[2]) : 32;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<char> flush(size_t{512} << 20);  // past the largest last-level cache of these machines
  std::printf("ResNet-18, %d px, batch %d, FP32: one step's weight reorders (ms), caches flushed before each\n", side,
              batch);
  std::printf("%-22s %-36s %12s %14s %16s\n", "conv (x count)", "layouts: forward / bwd data / bwd weights",
              "plain master", "forward's", "weight grad's");
  double totals[3] = {0, 0, 0};
  for (const Conv& s : resnet18_convs(side)) {
    const int pad = s.r / 2, p = (s.h + 2 * pad - s.r) / s.stride + 1;
    const memory::desc x({batch, s.c, s.h, s.h}, memory::data_type::f32, Tag::nhwc);
    const memory::desc y({batch, s.k, p, p}, memory::data_type::f32, Tag::nhwc);
    const memory::dims dims{s.k, s.c, s.r, s.r}, strides{s.stride, s.stride}, padding{pad, pad};
    const memory::desc plain(dims, memory::data_type::f32, Tag::oihw), any(dims, memory::data_type::f32, Tag::any);
    using namespace dnnl;
    const convolution_forward::primitive_desc fwd(
        convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, x, any, y, strides,
                                  padding, padding),
        engine);
    const convolution_backward_data::primitive_desc data(
        convolution_backward_data::desc(algorithm::convolution_direct, x, any, y, strides, padding, padding), engine,
        fwd);
    const convolution_backward_weights::primitive_desc grad(
        convolution_backward_weights::desc(algorithm::convolution_direct, x, any, y, strides, padding, padding), engine,
        fwd);
    const memory::desc wf = fwd.weights_desc(), wd = data.weights_desc(), ww = grad.diff_weights_desc();
    // Per step: the master into the forward's and backward data's layouts, the gradient into the master's.
    auto step = [&](const memory::desc& master) {
      return reorder_seconds(engine, stream, master, wf, flush) +
             (s.needs_data_gradient ? reorder_seconds(engine, stream, master, wd, flush) : 0) +
             reorder_seconds(engine, stream, ww, master, flush);
    };
    const double ms[3] = {1e3 * s.count * step(plain), 1e3 * s.count * step(wf), 1e3 * s.count * step(ww)};
    for (int i = 0; i < 3; ++i) totals[i] += ms[i];
    char conv[64], layouts[96];
    std::snprintf(conv, sizeof conv, "%d %dx%d %d/%d x%d", s.c, s.r, s.r, s.k, s.stride, s.count);
    std::snprintf(layouts, sizeof layouts, "%s / %s / %s", tag_of(wf).c_str(),
                  s.needs_data_gradient ? tag_of(wd).c_str() : "-", tag_of(ww).c_str());
    std::printf("%-22s %-36s %12.2f %14.2f %16.2f\n", conv, layouts, ms[0], ms[1], ms[2]);
  }
  std::printf("%-22s %-36s %12.2f %14.2f %16.2f\n", "total", "", totals[0], totals[1], totals[2]);
}
