// Exports of trained and untrained ResNets (export/): the engine's side. Each case writes its ONNX and safetensors
// files, the pixels of its images and the engine's FP32 logits on them into AMPWB_EXPORT_DIR, with a manifest;
// tests/export_check.py then loads the files in ONNX Runtime and PyTorch and compares (CTest runs it after this).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "export/exported_model.h"
#include "export/onnx_export.h"
#include "export/safetensors_export.h"
#include "step_util.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

fs::path export_dir() {
  const char* dir = std::getenv("AMPWB_EXPORT_DIR");
  static const fs::path path = [dir] {
    const fs::path p = dir ? fs::path(dir) : fs::temp_directory_path() / "ampwb_export";
    fs::remove_all(p);  // this run's files only: the checker finds no case a failed test left behind
    fs::create_directories(p);
    return p;
  }();
  return path;
}

// One entry per case in manifest.json, rewritten as each case ends (the checker reads them all).
void record_case(const nlohmann::json& entry) {
  const fs::path path = export_dir() / "manifest.json";
  nlohmann::json manifest = nlohmann::json::object();
  if (fs::exists(path)) manifest = nlohmann::json::parse(std::ifstream(path));
  manifest[entry.at("name").get<std::string>()] = entry;
  std::ofstream(path) << manifest.dump(2);
}

void write_floats(const fs::path& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  ASSERT_TRUE(out.good()) << path;
}

// An (N,C,S,S) tensor's values in NCHW order, whatever its layout.
std::vector<float> nchw_values(const Tensor& t) {
  const Tensor host = on_host(backend(), t);
  std::vector<float> out(static_cast<size_t>(host.numel()));
  const float* v = host.data_as<float>();
  const int64_t N = host.n(), C = host.c(), H = host.h(), W = host.w();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t at =
              host.layout() == Layout::NHWC ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
          out[static_cast<size_t>(((n * C + c) * H + h) * W + w)] = v[at];
        }
  return out;
}

std::vector<float> logits_of(ResNet& model, const Tensor& normalized) {
  const Tensor logits = on_host(backend(), model.forward(normalized, Mode::Eval));
  return std::vector<float>(logits.data_as<float>(), logits.data_as<float>() + logits.numel());
}

// Writes the case's exports (ONNX where this build has it; every dtype for trained cases), pixels and logits.
void write_case(const std::string& name, ResNet& model, const ExportedModel& exported, const std::vector<float>& pixels,
                const std::vector<float>& logits, int batch, bool all_dtypes) {
  const fs::path dir = export_dir();
  nlohmann::json entry = {{"name", name},
                          {"depth", exported.config.depth},
                          {"stem", stem_name(exported.config.stem)},
                          {"classes", exported.config.num_classes},
                          {"channels", exported.config.in_channels},
                          {"image_size", exported.config.image_size},
                          {"batch", batch},
                          {"class_names", exported.class_names},
                          {"pixels", name + ".pixels.f32"},
                          {"logits", name + ".logits.f32"},
                          {"onnx", nlohmann::json::object()},
                          {"safetensors", nlohmann::json::object()}};
  write_floats(dir / (name + ".pixels.f32"), pixels);
  write_floats(dir / (name + ".logits.f32"), logits);
  std::vector<DType> dtypes = {DType::F32};
  if (all_dtypes) dtypes = {DType::F32, DType::F16, DType::BF16};
  for (DType dtype : dtypes) {
    const std::string tag = export_dtype_name(dtype);
    const std::string st = name + "." + tag + ".safetensors";
    export_safetensors(exported, dtype, (dir / st).string());
    entry["safetensors"][tag] = st;
    if (onnx_export_available()) {
      const std::string onnx = name + "." + tag + ".onnx";
      export_onnx(exported, dtype, (dir / onnx).string());
      entry["onnx"][tag] = onnx;
    }
  }
  (void)model;
  record_case(entry);
}

// A few SGD steps of ResNet-`depth` in FP32 on Fashion-MNIST's training images (the sample data the CLI tests use),
// then its exports (from its weights saved as a run keeps them) and its logits on the first 32 validation images.
void train_and_export(const std::string& name, int depth, Stem stem) {
  std::string path;
  try {
    path = builtin_sample_dataset();
  } catch (const Error&) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  DatasetOptions dataset_options;
  dataset_options.max_train_images = 256;
  dataset_options.max_validation_images = 32;
  const Dataset dataset = Dataset::open(path, dataset_options);
  LoaderOptions options;
  options.batch_size = 32;
  options.threads = 2;
  DataLoader train(dataset, Split::Train, options);
  const int size = train.image_size();

  Rng rng(61);
  const ResNetConfig config{depth, static_cast<int>(dataset.class_names().size()), 3, size, stem};
  testing::StepRig rig(backend(), "fp32", config, rng);
  int steps = 0;
  Batch batch;
  while (steps < 6 && train.next(batch)) {
    const StepResult r = rig.step.run(batch.images, batch.labels, 0.05f);
    ASSERT_TRUE(std::isfinite(r.loss));
    ++steps;
  }
  ASSERT_EQ(steps, 6);

  // The same 32 validation images, normalized as the engine sees them and as plain pixels 0-255.
  options.shuffle = false;
  DataLoader normalized_loader(dataset, Split::Validation, options);
  options.normalization = "none";
  DataLoader pixel_loader(dataset, Split::Validation, options);
  Batch normalized, unit;
  ASSERT_TRUE(normalized_loader.next(normalized));
  ASSERT_TRUE(pixel_loader.next(unit));
  ASSERT_EQ(normalized.images.n(), 32);
  std::vector<float> pixels = nchw_values(unit.images);
  for (float& p : pixels) p = std::round(p * 255.0f);  // Fashion-MNIST's bytes again

  const std::vector<float> logits = logits_of(rig.model, normalized.images);
  // Through the file a finished run keeps (train/model_weights.h), as `ampwb export model` reads it.
  Preprocessing preprocessing;
  preprocessing.image_size = size;
  preprocessing.normalization = "dataset";
  for (size_t c = 0; c < 3; ++c) {
    preprocessing.mean[c] = train.normalization().mean[c];
    preprocessing.stddev[c] = train.normalization().stddev[c];
  }
  preprocessing.class_names = dataset.class_names();
  WeightsProvenance provenance;
  provenance.steps = steps;
  const std::string weights_path = (export_dir() / (name + ".weights")).string();
  save_model_weights(weights_path, model_weights_of(backend(), rig.model, preprocessing, provenance));
  const ExportedModel exported = exported_model(read_model_weights(weights_path));
  EXPECT_EQ(exported.batches_tracked, steps);
  write_case(name, rig.model, exported, pixels, logits, 32, true);
}

TEST(Export, TrainedResNet20) { train_and_export("resnet20", 20, Stem::Small); }
TEST(Export, TrainedResNet18) { train_and_export("resnet18", 18, Stem::ImageNet); }

// Every depth, untrained at 32 px with three classes and one channel (ResNet-18 both with the ImageNet stem and
// the small one), its batch-norm statistics and scales drawn at random so that each batch norm changes the values.
TEST(Export, EveryDepth) {
  struct Case {
    int depth;
    Stem stem;
  };
  std::vector<Case> cases;
  for (int depth : supported_depths()) cases.push_back({depth, is_cifar_depth(depth) ? Stem::Small : Stem::ImageNet});
  cases.push_back({18, Stem::Small});
  for (const Case& c : cases) {
    SCOPED_TRACE("ResNet-" + std::to_string(c.depth));
    Rng rng(static_cast<uint64_t>(c.depth));
    const ResNetConfig config{c.depth, 3, 1, 32, c.stem};
    ResNet model(backend(), config, rng);
    for (Parameter* p : model.parameters())
      if (p->name.find("bn") != std::string::npos || p->name.find("downsample.1") != std::string::npos)
        for (int64_t i = 0; i < p->value.numel(); ++i)
          p->value.data_as<float>()[i] =
              static_cast<float>(p->name.ends_with("weight") ? 0.5 + rng.uniform() : 0.2 * rng.uniform() - 0.1);
    for (Parameter* p : model.parameters()) p->changed();
    std::vector<Buffer*> buffers;
    model.collect_buffers(buffers);
    for (Buffer* b : buffers)
      for (int64_t i = 0; i < b->value.numel(); ++i)
        b->value.data_as<float>()[i] =
            static_cast<float>(b->name.ends_with("running_var") ? 0.5 + rng.uniform() : 0.2 * rng.uniform() - 0.1);

    Normalization normalization;
    normalization.mean[0] = 0.3f;
    normalization.stddev[0] = 0.35f;
    const int batch = 2, size = 32;
    Tensor input = Tensor::empty({batch, 1, size, size}, DType::F32, Layout::NHWC);
    std::vector<float> pixels(static_cast<size_t>(input.numel()));
    for (size_t i = 0; i < pixels.size(); ++i) {
      pixels[i] = static_cast<float>(rng.below(256));
      input.data_as<float>()[i] = (pixels[i] / 255.0f - normalization.mean[0]) / normalization.stddev[0];  // C = 1
    }
    const std::vector<float> logits = logits_of(model, input);
    const ExportedModel exported = exported_model(backend(), model, normalization, {"a", "b", "c"}, 0);
    const std::string name = "depth" + std::to_string(c.depth) + (c.stem == Stem::Small ? "-small" : "-imagenet");
    write_case(name, model, exported, pixels, logits, batch, false);
  }
}

TEST(Export, SafetensorsHeaderNamesEveryTensor) {
  Rng rng(1);
  ResNet model(backend(), {20, 10, 3, 32, Stem::Auto}, rng);
  const ExportedModel exported = exported_model(backend(), model, imagenet_normalization(), {}, 7);
  const std::string bytes = safetensors_bytes(exported, DType::BF16);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  ASSERT_EQ(length % 8, 0u);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  // 21 convolutions (the stem, 18 in blocks, 2 projections), 21 batch norms of 5 tensors (num_batches_tracked too),
  // fc's two and the metadata: every tensor once, the data covered without gaps.
  EXPECT_EQ(header.size(), 21u + 21u * 5u + 2u + 1u);
  size_t covered = 0;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    covered += entry["data_offsets"][1].get<size_t>() - entry["data_offsets"][0].get<size_t>();
  }
  EXPECT_EQ(8 + length + covered, bytes.size());
  EXPECT_EQ(header["conv1.weight"]["dtype"], "BF16");
  EXPECT_EQ(header["conv1.weight"]["shape"], nlohmann::json({16, 3, 3, 3}));
  EXPECT_EQ(header["layer2.0.downsample.1.num_batches_tracked"]["dtype"], "I64");
  EXPECT_EQ(header["__metadata__"]["class_names"], R"(["0","1","2","3","4","5","6","7","8","9"])");
}

TEST(Export, RefusesWhatItCannotWrite) {
  Rng rng(2);
  ResNet model(backend(), {20, 2, 3, 32, Stem::Auto}, rng);
  ExportedModel exported = exported_model(backend(), model, imagenet_normalization(), {"cat", "dog"}, 0);
  // The engine writes into a folder that is there (the CLI and the GUI make a missing one first).
  const std::string missing = ::testing::TempDir() + "ampwb-no-such-folder-" + std::to_string(::getpid());
  try {
    export_safetensors(exported, DType::F32, missing + "/model.safetensors");
    FAIL() << "wrote into a missing folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing + "/model.safetensors"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_THROW(safetensors_bytes(exported, DType::I32), Error);
  EXPECT_FALSE(parse_export_dtype("fp8").has_value());
  EXPECT_EQ(parse_export_dtype("bf16"), DType::BF16);
  // A weight FP16 cannot hold is refused by name, not written as infinity.
  exported.weights.front().second.data_as<float>()[0] = 1e6f;
  try {
    safetensors_bytes(exported, DType::F16);
    FAIL() << "wrote 1e6 as FP16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv1.weight"), std::string::npos) << e.what();
  }
  exported.class_names.pop_back();
  EXPECT_THROW(safetensors_bytes(exported, DType::F32), Error);
  if (!onnx_export_available()) {
    EXPECT_THROW(onnx_bytes(exported, DType::F32), Error);
  }
}

}  // namespace
}  // namespace ampwb
