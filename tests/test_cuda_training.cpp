// Short trainings on the GPU, one per precision mode, with falling loss, through the engine's device placement
// (parameters, gradients, optimizer state and batch-norm statistics on the GPU, batches copied up each step). They
// need a CUDA GPU and skip without one; any failure on a GPU fails.
#include <gtest/gtest.h>

#include <algorithm>

#include "amp/policy.h"
#include "backend/cuda/cuda_device.h"
#include "image_folder_util.h"
#include "train/trainer.h"

namespace ampwb {
namespace {

class CudaEveryMode : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEveryMode, TrainsATinyResNetOnTheGpuWithFallingLoss) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";
  const fs::path data = make_stripes_folder("cuda_mode_" + GetParam(), 32, 16);
  TrainConfig c;
  c.data_dir = data.string();
  c.device = "cuda";
  c.depth = 20;
  c.epochs = 4;
  c.batch_size = 16;
  c.lr = 0.05f;
  c.threads = 2;
  c.data.validation_fraction = 0.25;
  c.precision = precision_preset(GetParam());
  struct Epochs : TrainObserver {
    std::vector<EpochReport> epochs;
    std::string device;
    void on_start(const RunInfo& info) override { device = info.backend_description; }
    void on_epoch(const EpochReport& e) override { epochs.push_back(e); }
  } observed;
  Trainer trainer(c, &observed);
  const RunEnd end = trainer.run();
  fs::remove_all(data);
  ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
  EXPECT_EQ(observed.device.rfind("cuda:0", 0), 0u) << observed.device;
  if (GetParam() == "tf32") {  // the trainer must switch the backend's TF32 math on for this mode
    EXPECT_NE(observed.device.find("TF32 on"), std::string::npos) << observed.device;
  }
  ASSERT_EQ(observed.epochs.size(), 4u);
  EXPECT_LT(observed.epochs.back().train_loss, 0.7 * observed.epochs.front().train_loss) << GetParam();
  EXPECT_GT(observed.epochs.back().peak_bytes, 0u) << "peak GPU memory per epoch";
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaEveryMode, ::testing::Values("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-o2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ampwb
