// The golden trajectory: a tiny ResNet trained for a few steps from a fixed seed in every precision mode the CPU
// runs, its loss, loss scale and skipped flag per step. tests/golden/resnet20_trajectories.json holds one recorded
// run, written by golden_regenerate (scripts/regenerate-golden.sh); test_golden.cpp trains again and compares.
// Everything here is deterministic: a fixed seed, synthetic data from it, a CPU backend with a fixed thread count.
#pragma once

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "train/mixed_precision_step.h"
#include "backend/cpu/cpu_backend.h"
#include "train/config.h"

namespace ampwb::golden {

// What is trained; the file records it, and a file recorded with another setup is refused.
struct Setup {
  int depth = 20;  // ResNet-20, the CIFAR structure: a 3x3 stem, three stages of 16/32/64 channels
  int classes = 4;
  int image_size = 8;  // 8x8 RGB
  int batch = 8;
  int steps = 20;
  uint64_t seed = 2024;
  float lr = 0.02f;    // SGD, momentum 0.9, no weight decay, constant rate
  int threads = 2;     // the CPU backend's threads: oneDNN's reductions split by thread
  double noise = 1.5;  // standard deviation of the noise on each class's N(0,1) pattern
  std::string data = "synthetic: one fixed N(0,1) pattern per class plus N(0,1.5) noise, labels uniform";
};

inline const std::vector<std::string>& modes() {  // every mode the CPU runs (tf32 is a GPU format)
  static const std::vector<std::string> all = {"fp32", "amp-fp16", "amp-bf16", "fp16-o2", "fp16-pure", "amp-fp8"};
  return all;
}

struct Step {
  float loss = 0;
  float loss_scale = 1;
  bool skipped = false;
};

// Trains a fresh model in mode and returns its steps.
inline std::vector<Step> train(const std::string& mode, const Setup& s = {}) {
  CpuBackend backend({s.threads});
  Rng rng(s.seed);
  const ResNetConfig model_config{s.depth, s.classes, 3, s.image_size, Stem::Small};
  ResNet model(backend, model_config, rng);
  Sgd sgd(backend, {OptimizerKind::Sgd, 0.9f});
  const PrecisionConfig config = precision_preset(mode);
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend, model, sgd, policy, scaler, 0.0f, 0.0f);

  const int64_t pixels = int64_t{3} * s.image_size * s.image_size;
  std::vector<std::vector<float>> patterns(static_cast<size_t>(s.classes));
  for (auto& pattern : patterns)
    for (int64_t i = 0; i < pixels; ++i) pattern.push_back(static_cast<float>(rng.normal()));
  std::vector<Step> steps;
  for (int k = 0; k < s.steps; ++k) {
    std::vector<float> images;
    std::vector<float> labels;
    for (int n = 0; n < s.batch; ++n) {
      const int label = static_cast<int>(rng.below(static_cast<uint64_t>(s.classes)));
      labels.push_back(static_cast<float>(label));
      for (int64_t i = 0; i < pixels; ++i)
        images.push_back(patterns[label][i] + static_cast<float>(s.noise * rng.normal()));
    }
    // Values in logical NCHW order, stored NHWC as the loader delivers batches.
    const Tensor x = tensor_from_floats(images, {s.batch, 3, s.image_size, s.image_size}, DType::F32, Layout::NHWC);
    const Tensor y = tensor_from_floats(labels, {s.batch}, DType::I32);
    const StepResult r = step.run(x, y, s.lr);
    steps.push_back({r.loss, r.loss_scale, r.skipped});
  }
  return steps;
}

// Where a trajectory was computed: the ISA and the oneDNN version decide which kernels run (and so the summation
// orders), BF16 native or emulated decides where BF16 rounds; the thread count is the setup's. The CPU's name is
// for the reader.
struct Machine {
  std::string isa;     // the instruction set oneDNN dispatches to, e.g. "avx2"
  std::string onednn;  // e.g. "oneDNN 2.6.3"
  bool bf16_native = false;
  std::string cpu;
};

inline Machine this_machine(const Setup& s = {}) {
  CpuBackend backend({s.threads});
  const std::string d = backend.description();  // "cpu (AMD EPYC, oneDNN 2.6.3, avx2, 2 threads)"
  const size_t at = d.find("oneDNN "), end = d.find(',', at);
  const Capabilities caps = backend.capabilities();
  return {backend.isa(), at == std::string::npos ? "" : d.substr(at, end - at), caps.bf16.native, caps.device_name};
}

inline std::string hex(float v) {  // exact: C99 hexadecimal floating point
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%a", static_cast<double>(v));
  return buffer;
}

inline std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The golden file's text: JSON, one line per step, losses exact (hex) and readable (9 significant digits).
inline std::string document(const Setup& s, const Machine& m,
                            const std::vector<std::pair<std::string, std::vector<Step>>>& runs) {
  std::ostringstream out;
  out << "{\n"
      << "  \"format\": \"ampwb golden trajectories 1\",\n"
      << "  \"regenerate\": \"scripts/regenerate-golden.sh (only for a change meant to alter the curves: say so in "
         "the commit)\",\n"
      << "  \"setup\": {\"model\": \"ResNet-" << s.depth << ", small stem\", \"depth\": " << s.depth
      << ", \"classes\": " << s.classes << ", \"image_size\": " << s.image_size << ", \"batch\": " << s.batch
      << ", \"steps\": " << s.steps << ", \"seed\": " << s.seed << ", \"lr\": " << s.lr
      << ", \"optimizer\": \"sgd, momentum 0.9\", \"threads\": " << s.threads << ", \"noise\": " << s.noise
      << ", \"data\": " << quoted(s.data) << "},\n"
      << "  \"recorded_on\": {\"isa\": " << quoted(m.isa) << ", \"onednn\": " << quoted(m.onednn)
      << ", \"bf16_native\": " << (m.bf16_native ? "true" : "false") << ", \"cpu\": " << quoted(m.cpu) << "},\n"
      << "  \"modes\": {\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    out << "    " << quoted(runs[r].first) << ": [\n";
    const std::vector<Step>& steps = runs[r].second;
    for (size_t k = 0; k < steps.size(); ++k) {
      char decimal[32], scale[32];
      std::snprintf(decimal, sizeof decimal, "%.9g", static_cast<double>(steps[k].loss));
      std::snprintf(scale, sizeof scale, "%.9g", static_cast<double>(steps[k].loss_scale));
      out << "      {\"loss\": " << quoted(hex(steps[k].loss)) << ", \"value\": " << decimal
          << ", \"loss_scale\": " << scale << ", \"skipped\": " << (steps[k].skipped ? "true" : "false") << "}"
          << (k + 1 < steps.size() ? "," : "") << "\n";
    }
    out << "    ]" << (r + 1 < runs.size() ? "," : "") << "\n";
  }
  out << "  }\n}\n";
  return out.str();
}

}  // namespace ampwb::golden
