// The engine's copies of weights into oneDNN's blocked layouts (weight_layouts.cpp) against oneDNN's reorders, for
// ResNet-18's weights: 3x3 FP32 and BF16 into backward data's layouts (`ABcd16a16b`, `ABcd8a16b2a`), BF16 into the
// forward's (`AcdB{16,32,64}a2b`). Each copy with the caches flushed before it (as in a training step, where the
// weights were last touched by the previous step's update) and right after a first one (source and destination
// cached); medians of 15, the two alternating. Also checks that both write the same bytes.
// usage: ampwb_weight_layouts [THREADS]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "backend/cpu/weight_layouts.h"
#include "bench_util.h"
#include "core/tensor.h"

namespace {

using namespace ampwb;
using dnnl::memory;
using tag = memory::format_tag;

// w's values: any bits, as a copy moves them as they are.
Tensor weights(DType dtype, int64_t K, int64_t C, int64_t R) {
  Tensor w = Tensor::empty({K, C, R, R}, dtype);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const auto bits = static_cast<uint32_t>(i * 2654435761u);
    if (dtype == DType::F32)
      w.data_as<float>()[i] = static_cast<float>(bits % 1000) - 500;
    else
      w.data_as<uint16_t>()[i] = static_cast<uint16_t>(bits >> 16);
  }
  return w;
}

struct Comparison {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<char> flush = std::vector<char>(64 << 20);

  // oneDNN's reorder of w into `layout` against own(w, out); one row of the table.
  void row(const std::string& name, const Tensor& w, tag layout, const std::function<void(void*)>& own) {
    const memory::dims dims(w.shape().begin(), w.shape().end());
    const auto type = w.dtype() == DType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
    const memory::desc plain(dims, type, tag::abcd), blocked(dims, type, layout);
    memory from(plain, engine, const_cast<void*>(w.data())), theirs(blocked, engine);
    std::vector<char> ours(blocked.get_size());
    const dnnl::reorder reorder(from, theirs);
    std::vector<double> ms[4];
    for (int round = 0; round < 15; ++round)
      for (int path = 0; path < 2; ++path)
        for (int hot = 0; hot < 2; ++hot) {
          if (!hot)
            for (size_t i = 0; i < flush.size(); i += 64) flush[i] = static_cast<char>(flush[i] + 1);
          const auto start = bench::Clock::now();
          if (path == 0) {
            reorder.execute(stream, from, theirs);
            stream.wait();
          } else {
            own(ours.data());
          }
          ms[path + 2 * hot].push_back(bench::seconds_since(start) * 1e3);
        }
    const bool same = std::memcmp(theirs.get_data_handle(), ours.data(), blocked.get_size()) == 0;
    std::printf("%-34s %11.3f ms %11.3f ms %11.3f ms %11.3f ms  %s\n", name.c_str(), bench::median(ms[0]),
                bench::median(ms[1]), bench::median(ms[2]), bench::median(ms[3]), same ? "yes" : "NO");
  }
};

std::string shape_name(const Tensor& w) {
  return std::string(dtype_name(w.dtype())) + " " + std::to_string(w.n()) + " x " + std::to_string(w.c()) + " x " +
         std::to_string(w.h()) + "x" + std::to_string(w.w());
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  Comparison compare;
  std::printf("%-34s %14s %14s %14s %14s  %s\n", "weights, layout", "oneDNN cold", "own cold", "oneDNN hot", "own hot",
              "same bytes");
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const auto& [K, C] : {std::pair{64, 64}, {128, 128}, {256, 128}, {256, 256}, {512, 256}, {512, 512}}) {
      const Tensor w = weights(dtype, K, C, 3);
      compare.row(shape_name(w) + ", backward data", w, dtype == DType::F32 ? tag::ABcd16a16b : tag::ABcd8a16b2a,
                  [&](void* out) { cpu_detail::to_backward_data_layout(w, out, threads); });
    }
  struct Forward {
    int64_t K, C, R;
    int block;
    tag layout;
  };
  for (const Forward f : {Forward{64, 64, 3, 64, tag::AcdB64a2b},
                          {128, 128, 3, 64, tag::AcdB64a2b},
                          {256, 256, 3, 32, tag::AcdB32a2b},
                          {512, 256, 3, 32, tag::AcdB32a2b},
                          {512, 512, 3, 32, tag::AcdB32a2b},
                          {512, 512, 3, 64, tag::AcdB64a2b},
                          {256, 128, 1, 32, tag::AcdB32a2b},
                          {512, 256, 1, 64, tag::AcdB64a2b}}) {
    const Tensor w = weights(DType::BF16, f.K, f.C, f.R);
    compare.row(shape_name(w) + ", forward " + std::to_string(f.block), w, f.layout,
                [&](void* out) { cpu_detail::to_forward_layout(w, f.block, out, threads); });
  }
}
