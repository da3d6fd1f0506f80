// Optimizers against updates computed by hand from PyTorch's documented rules, and learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace ampwb {
namespace {

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

Parameter make_param(std::vector<float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return Parameter("p", tensor_from_floats(values, {n}));
}

void set_grad(Parameter& p, std::vector<float> g) { p.grad = tensor_from_floats(g, p.value.shape()); }

void expect_values(const Parameter& p, std::vector<double> want, double tol = 1e-6) {
  const std::vector<float> got = to_float_vector(p.value);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Sgd, MomentumAndWeightDecayByHand) {
  // lr 0.1, momentum 0.9, weight decay 0.01, gradient fixed at (0.1, 0.2, -0.3):
  // step 1: d = g + 0.01 w = (0.11, 0.18, -0.295), buffer = d, w -= 0.1 d
  // step 2: d = (0.10989, 0.17982, -0.294705), buffer = 0.9 buffer + d = (0.20889, 0.34182, -0.560205)
  Parameter p = make_param({1.0f, -2.0f, 0.5f});
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.9f, false, 0.01f});
  std::vector<Parameter*> params{&p};
  set_grad(p, {0.1f, 0.2f, -0.3f});
  sgd.step(params, 0.1f);
  expect_values(p, {0.989, -2.018, 0.5295});
  sgd.step(params, 0.1f);
  expect_values(p, {0.968111, -2.052182, 0.5855205});
  EXPECT_EQ(sgd.steps_taken(), 2);
  EXPECT_EQ(sgd.state().count("p.momentum_buffer"), 1u);
}

TEST(Sgd, NesterovAndPlain) {
  Parameter p = make_param({1.0f, -2.0f, 0.5f});
  Sgd nesterov(backend(), {OptimizerKind::Sgd, 0.9f, true, 0.01f});
  set_grad(p, {0.1f, 0.2f, -0.3f});
  nesterov.step({&p}, 0.1f);  // d + 0.9 buffer = 1.9 d on the first step
  expect_values(p, {1 - 0.19 * 0.11, -2 - 0.19 * 0.18, 0.5 + 0.19 * 0.295});

  Parameter q = make_param({1.0f});
  Sgd plain(backend(), {OptimizerKind::Sgd, 0.0f, false, 0.0f});
  set_grad(q, {0.5f});
  plain.step({&q}, 0.2f);
  plain.step({&q}, 0.2f);
  expect_values(q, {0.8});
  EXPECT_TRUE(plain.state().empty()) << "no momentum, no buffer";
}

TEST(Adam, BiasCorrectedStepsByHand) {
  // lr 0.1, betas (0.9, 0.999): step 1 with g = 0.5 moves by exactly lr; step 2 with g = -0.25:
  // m = 0.02, v = 0.00031225, m_hat = 0.02 / 0.19, v_hat = 0.00031225 / 0.001999, w -= 0.1 m_hat / sqrt(v_hat)
  Parameter p = make_param({1.0f});
  Adam adam(backend(), {OptimizerKind::Adam});
  set_grad(p, {0.5f});
  adam.step({&p}, 0.1f);
  expect_values(p, {0.9});
  set_grad(p, {-0.25f});
  adam.step({&p}, 0.1f);
  const double m_hat = 0.02 / 0.19, v_hat = 0.00031225 / (1 - 0.999 * 0.999);
  expect_values(p, {0.9 - 0.1 * m_hat / std::sqrt(v_hat)});
}

TEST(Adam, DecoupledWeightDecayOfAdamW) {
  Parameter p = make_param({1.0f, 2.0f});
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.weight_decay = 0.1f;
  Adam adamw(backend(), config);
  set_grad(p, {0.5f, -0.5f});
  adamw.step({&p}, 0.1f);  // w (1 - lr wd) -/+ lr
  expect_values(p, {1 * 0.99 - 0.1, 2 * 0.99 + 0.1});
}

TEST(LrSchedule, CosineStepConstantAndWarmup) {
  const LrSchedule cosine({Schedule::Cosine, 0.1f, 100});
  EXPECT_FLOAT_EQ(cosine.at(0), 0.1f);
  EXPECT_FLOAT_EQ(cosine.at(25), static_cast<float>(0.05 * (1 + std::cos(M_PI / 4))));
  EXPECT_FLOAT_EQ(cosine.at(50), 0.05f);
  EXPECT_NEAR(cosine.at(100), 0.0f, 1e-9);
  const LrSchedule warm({Schedule::Cosine, 0.1f, 100, 10});
  EXPECT_FLOAT_EQ(warm.at(0), 0.01f);
  EXPECT_FLOAT_EQ(warm.at(9), 0.1f);
  EXPECT_FLOAT_EQ(warm.at(10), 0.1f);
  EXPECT_FLOAT_EQ(warm.at(55), 0.05f);
  const LrSchedule step({Schedule::Step, 0.1f, 100, 0, 30, 0.1f});
  EXPECT_FLOAT_EQ(step.at(29), 0.1f);
  EXPECT_FLOAT_EQ(step.at(30), 0.01f);
  EXPECT_FLOAT_EQ(step.at(60), 0.001f);
  const LrSchedule constant({Schedule::Constant, 0.3f, 10});
  EXPECT_FLOAT_EQ(constant.at(7), 0.3f);
  EXPECT_THROW(LrSchedule({Schedule::Cosine, -0.1f, 10}), Error);
}

}  // namespace
}  // namespace ampwb
