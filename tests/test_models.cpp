// The ResNet family: parameter counts equal torchvision's published ones, stems, shapes and initialisation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "forwarding_backend.h"
#include "models/resnet.h"
#include "op_test_util.h"

namespace ampwb {
namespace {

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

int64_t count(int depth, int classes) {
  Rng rng(0);
  ResNet model(backend(), {depth, classes, 3, 224, Stem::Auto}, rng);
  return model.parameter_count();
}

TEST(ResNet, ParameterCountsMatchTorchvision) {
  EXPECT_EQ(count(18, 1000), 11'689'512);
  EXPECT_EQ(count(34, 1000), 21'797'672);
  EXPECT_EQ(count(50, 1000), 25'557'032);
  EXPECT_EQ(count(101, 1000), 44'549'160);
  EXPECT_EQ(count(152, 1000), 60'192'808);
}

TEST(ResNet, CifarFamilyIsAboutTheirPublishedSize) {
  // He et al. report 0.27 M for ResNet-20 with identity (option A) shortcuts: 269,722 parameters. This engine uses
  // 1x1 projections with batch norm (option B) at the two stage changes: 512 + 64 + 2,048 + 128 = 2,752 more.
  EXPECT_EQ(count(20, 10), 269'722 + 2'752);
  for (auto [depth, millions] : {std::pair{32, 0.46}, {44, 0.66}, {56, 0.85}, {110, 1.7}})
    EXPECT_NEAR(count(depth, 10) / 1e6, millions, 0.02 * millions + 0.01) << "ResNet-" << depth;
}

TEST(ResNet, SmallStemChosenBelow64PixelsAndForcible) {
  EXPECT_EQ(resolved_stem({18, 10, 3, 28, Stem::Auto}), Stem::Small);
  EXPECT_EQ(resolved_stem({18, 10, 3, 63, Stem::Auto}), Stem::Small);
  EXPECT_EQ(resolved_stem({18, 10, 3, 64, Stem::Auto}), Stem::ImageNet);
  EXPECT_EQ(resolved_stem({18, 10, 3, 28, Stem::ImageNet}), Stem::ImageNet);
  EXPECT_EQ(resolved_stem({50, 10, 3, 224, Stem::Small}), Stem::Small);
  EXPECT_THROW(count(19, 10), Error);
}

TEST(ResNet, ForwardShapesInBothStems) {
  Rng rng(1);
  for (auto [depth, size, stem] :
       {std::tuple{18, 28, Stem::Auto}, {18, 64, Stem::Auto}, {50, 40, Stem::ImageNet}, {20, 16, Stem::Auto}}) {
    ResNet model(backend(), {depth, 7, 3, size, stem}, rng);
    const Tensor x = testing::random_tensor({2, 3, size, size}, rng, Layout::NHWC);
    const Tensor logits = model.forward(x, Mode::Eval);
    EXPECT_EQ(logits.shape(), (Shape{2, 7})) << model.summary();
    for (float v : to_float_vector(logits)) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(ResNet, TorchvisionNamesAndInitialisation) {
  Rng rng(2);
  ResNet model(backend(), {18, 1000, 3, 224, Stem::Auto}, rng);
  const std::vector<Parameter*> params = model.parameters();
  EXPECT_EQ(params.front()->name, "conv1.weight");
  EXPECT_EQ(params.back()->name, "fc.bias");
  bool saw_downsample = false;
  for (Parameter* p : params) {
    const std::vector<float> v = to_float_vector(p->value);
    if (p->name == "layer2.0.downsample.0.weight") saw_downsample = true;
    if (p->name.ends_with("conv2.weight") && p->name.starts_with("layer3.0")) {
      // Kaiming normal, fan_out: std = sqrt(2 / (256 * 3 * 3))
      double sq = 0;
      for (float x : v) sq += static_cast<double>(x) * x;
      EXPECT_NEAR(std::sqrt(sq / v.size()), std::sqrt(2.0 / (256 * 9)), 0.01 * std::sqrt(2.0 / (256 * 9)));
    }
    if (p->name.starts_with("bn1.")) {
      for (float x : v) ASSERT_EQ(x, p->name == "bn1.weight" ? 1.0f : 0.0f);
    }
  }
  EXPECT_TRUE(saw_downsample);
  std::vector<Buffer*> buffers;
  model.collect_buffers(buffers);
  EXPECT_EQ(buffers.front()->name, "bn1.running_mean");
  EXPECT_EQ(buffers.size(), 2u * 20);  // 20 batch norms in ResNet-18
}

// Counts the ops of a residual block's end; `separate` runs the fused ones as their separate ops (the Backend
// defaults, whose ops come back through this backend to the CPU's).
class BlockEndCounter : public testing::ForwardingBackend {
 public:
  explicit BlockEndCounter(bool separate)
      : ForwardingBackend(std::make_unique<CpuBackend>(BackendOptions{2})), separate_(separate) {}
  int batchnorm_add_relu = 0, relu_backward_of_sum_calls = 0, relu_backward_calls = 0;

  void batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& residual, Tensor& y, Tensor& mean, Tensor& var,
                                           Tensor& running_mean, Tensor& running_var, float momentum,
                                           float eps) override {
    ++batchnorm_add_relu;
    if (!separate_)
      return ForwardingBackend::batchnorm_add_relu_forward_training(x, gamma, beta, residual, y, mean, var,
                                                                    running_mean, running_var, momentum, eps);
    Backend::batchnorm_add_relu_forward_training(x, gamma, beta, residual, y, mean, var, running_mean, running_var,
                                                 momentum, eps);
  }
  void relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) override {
    ++relu_backward_of_sum_calls;
    if (!separate_) return ForwardingBackend::relu_backward_of_sum(y, dy_a, dy_b, dx);
    Backend::relu_backward_of_sum(y, dy_a, dy_b, dx);
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    ++relu_backward_calls;
    ForwardingBackend::relu_backward(y, dy, dx);
  }

 private:
  bool separate_;
};

// In training, every block's end runs as one op (batch norm, add, ReLU), and every block after the first applies
// the ReLU mask of the block before as it sums its branches' gradients, so that only the last block's end runs a
// relu_backward of its own. The gradients are bit for bit those of the separate ops.
TEST(ResNet, BlockEndsRunFusedWithTheBitsOfTheSeparateOps) {
  for (auto [depth, blocks] : {std::pair{18, 8}, {50, 16}}) {
    std::vector<std::vector<float>> grads[2];
    for (bool separate : {false, true}) {
      BlockEndCounter b(separate);
      Rng rng(3);
      ResNet model(b, {depth, 5, 3, 40, Stem::ImageNet}, rng);
      const Tensor x = testing::random_tensor({2, 3, 40, 40}, rng, Layout::NHWC);
      const Tensor logits = model.forward(x, Mode::Train);
      model.backward(testing::random_tensor(logits.shape(), rng));
      EXPECT_EQ(b.batchnorm_add_relu, blocks) << "ResNet-" << depth;
      EXPECT_EQ(b.relu_backward_of_sum_calls, blocks - 1) << "ResNet-" << depth;
      EXPECT_EQ(b.relu_backward_calls, separate ? blocks : 1) << "ResNet-" << depth;
      for (Parameter* p : model.parameters()) grads[separate].push_back(to_float_vector(p->grad));
    }
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i)
      ASSERT_EQ(std::memcmp(grads[0][i].data(), grads[1][i].data(), grads[0][i].size() * sizeof(float)), 0)
          << "ResNet-" << depth << ", parameter " << i;
  }
}

}  // namespace
}  // namespace ampwb
