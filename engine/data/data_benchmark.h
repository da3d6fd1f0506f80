// Measurements of the data pipeline, for `ampwb dataset bench-decode` and `bench-loader` and docs/benchmarks.md:
// decoding throughput per core on generated images, and the memory a process holds.
#pragma once

#include <string>
#include <vector>

namespace ampwb {

// Writes `count` images of each kind under dir/png28 (28x28 PNGs: Fashion-MNIST's own test images when the Debian
// package is installed, else generated) and dir/jpeg500 (500x375 JPEGs, quality 90, photo-like content: smooth
// colour fields, shapes and mild noise, which decode about as fast as photos). Each is a two-class dataset folder.
void write_benchmark_images(const std::string& dir, int count);

struct DecodeTiming {
  std::string kind;  // "png28", "jpeg500"
  std::string step;  // what was timed
  int images = 0;
  double seconds = 0;
  double images_per_second() const { return seconds > 0 ? images / seconds : 0; }
};

// Times, on one core with the files in the page cache: the scan's check (structure + verification decode), a full
// decode, and the loader's decode + resize; then Dataset::open on all cores with nothing cached. Each is run
// `repeats` times and the fastest kept (the machine may be shared).
std::vector<DecodeTiming> time_decoding(const std::string& dir, int repeats = 3);

// Keeps the OpenMP threads busy for `ms` milliseconds, as a training step's compute would (bench-loader).
void simulated_compute(double ms);

// This process's resident set now and its peak, in bytes (Linux /proc/self/status; 0 elsewhere).
size_t resident_bytes();
size_t peak_resident_bytes();

}  // namespace ampwb
