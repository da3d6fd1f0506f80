// 3x3 weights from OIHW into the layouts oneDNN's backward-data convolutions read on AVX-512 (FP32 `ABcd16a16b`,
// BF16 `ABcd8a16b2a`): oneDNN's reorder against the engine's own copy (backward_data_weights.cpp), for ResNet-18's
// 3x3 weights, with the caches flushed before each copy (as in a training step, where the weights were last
// touched by the previous step's update) and right after a first copy (source and destination cached); medians of
// 15, the two alternating. Also checks that both write the same bytes.
// usage: ampwb_backward_data_weights [THREADS]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "backend/cpu/weight_layouts.h"
#include "bench_util.h"
#include "core/tensor.h"

int main(int argc, char** argv) {
  using namespace ampwb;
  using dnnl::memory;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<char> flush(64 << 20);
  auto flush_caches = [&] {
    for (size_t i = 0; i < flush.size(); i += 64) flush[i] = static_cast<char>(flush[i] + 1);
  };
  std::printf("%-20s %14s %14s %14s %14s  %s\n", "K x C x 3x3", "oneDNN cold", "own cold", "oneDNN hot", "own hot",
              "same bytes");
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const auto& [K, C] : {std::pair{64, 64}, {128, 128}, {256, 128}, {256, 256}, {512, 256}, {512, 512}}) {
      Tensor w = Tensor::empty({K, C, 3, 3}, dtype);
      for (int64_t i = 0; i < w.numel(); ++i) {  // any bits: a copy moves them as they are
        const auto bits = static_cast<uint32_t>(i * 2654435761u);
        if (dtype == DType::F32)
          w.data_as<float>()[i] = static_cast<float>(bits % 1000) - 500;
        else
          w.data_as<uint16_t>()[i] = static_cast<uint16_t>(bits >> 16);
      }
      const auto type = dtype == DType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
      const memory::desc plain({K, C, 3, 3}, type, memory::format_tag::abcd);
      const memory::desc blocked(
          {K, C, 3, 3}, type, dtype == DType::F32 ? memory::format_tag::ABcd16a16b : memory::format_tag::ABcd8a16b2a);
      memory from(plain, engine, w.data()), theirs(blocked, engine);
      std::vector<char> ours(blocked.get_size());
      const dnnl::reorder reorder(from, theirs);
      std::vector<double> ms[4];
      for (int round = 0; round < 15; ++round)
        for (int path = 0; path < 2; ++path)
          for (int hot = 0; hot < 2; ++hot) {
            if (!hot) flush_caches();
            const auto start = bench::Clock::now();
            if (path == 0) {
              reorder.execute(stream, from, theirs);
              stream.wait();
            } else {
              cpu_detail::to_backward_data_layout(w, ours.data(), threads);
            }
            ms[path + 2 * hot].push_back(bench::seconds_since(start) * 1e3);
          }
      const bool same = std::memcmp(theirs.get_data_handle(), ours.data(), blocked.get_size()) == 0;
      char name[48];
      std::snprintf(name, sizeof name, "%s %d x %d", dtype_name(dtype), K, C);
      std::printf("%-20s %11.3f ms %11.3f ms %11.3f ms %11.3f ms  %s\n", name, bench::median(ms[0]),
                  bench::median(ms[1]), bench::median(ms[2]), bench::median(ms[3]), same ? "yes" : "NO");
    }
}
