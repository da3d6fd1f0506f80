// BF16 weights from OIHW into the layouts oneDNN's BF16 forward convolutions read on AVX512-BF16 (`AcdB16a2b`,
// `AcdB32a2b`, `AcdB64a2b`): oneDNN's reorder against the engine's own copy (weight_layouts.cpp), for ResNet-18's
// weights, with the caches flushed before each copy (as in a training step, where the weights were last touched by
// the previous step's update) and right after a first copy (source and destination cached); medians of 15, the two
// alternating. Also checks that both write the same bytes.
// usage: ampwb_forward_weights [THREADS]
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
  std::printf("%-26s %14s %14s %14s %14s  %s\n", "K x C x R x S, block", "oneDNN cold", "own cold", "oneDNN hot",
              "own hot", "same bytes");
  struct Shape {
    int64_t K, C, R;
    int block;
  };
  for (const Shape s : {Shape{64, 64, 3, 64},
                        {128, 128, 3, 64},
                        {256, 256, 3, 32},
                        {512, 256, 3, 32},
                        {512, 512, 3, 32},
                        {512, 512, 3, 64},
                        {256, 128, 1, 32},
                        {512, 256, 1, 64}}) {
    Tensor w = Tensor::empty({s.K, s.C, s.R, s.R}, DType::BF16);
    for (int64_t i = 0; i < w.numel(); ++i)  // any bits: a copy moves them as they are
      w.data_as<uint16_t>()[i] = static_cast<uint16_t>(static_cast<uint32_t>(i * 2654435761u) >> 16);
    const memory::dims dims{s.K, s.C, s.R, s.R};
    const auto tag = s.block == 16   ? memory::format_tag::AcdB16a2b
                     : s.block == 32 ? memory::format_tag::AcdB32a2b
                                     : memory::format_tag::AcdB64a2b;
    const memory::desc plain(dims, memory::data_type::bf16, memory::format_tag::abcd);
    const memory::desc blocked(dims, memory::data_type::bf16, tag);
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
            cpu_detail::to_forward_layout(w, s.block, ours.data(), threads);
          }
          ms[path + 2 * hot].push_back(bench::seconds_since(start) * 1e3);
        }
    const bool same = std::memcmp(theirs.get_data_handle(), ours.data(), blocked.get_size()) == 0;
    char name[48];
    std::snprintf(name, sizeof name, "%ld x %ld x %ldx%ld, %d", static_cast<long>(s.K), static_cast<long>(s.C),
                  static_cast<long>(s.R), static_cast<long>(s.R), s.block);
    std::printf("%-26s %11.3f ms %11.3f ms %11.3f ms %11.3f ms  %s\n", name, bench::median(ms[0]), bench::median(ms[1]),
                bench::median(ms[2]), bench::median(ms[3]), same ? "yes" : "NO");
  }
}
