// What a run records to explain itself, from real trainings on real images: the layers behind a skipped
// step, traced to the one layer an overflow was injected into, where each epoch's step time went, by op class, and
// the precision divergence at the end of the run; as reported, as the run store keeps them, and as `ampwb show` and
// `ampwb compare` print them.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/run_compare.h"
#include "analysis/time_comparison.h"
#include "backend/cpu/cpu_backend.h"
#include "forwarding_backend.h"
#include "image_folder_util.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/overflow_forensics.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
using nlohmann::json;

// Records every event in order, and passes it on to the run store's recorder.
class Tee : public TrainObserver {
 public:
  explicit Tee(StoreRecorder& store) : store_(store) {}
  void on_start(const RunInfo& i) override { store_.on_start(i); }
  void on_step(const StepReport& s) override {
    store_.on_step(s);
    steps.push_back(s);
    events.push_back("step " + std::to_string(s.step));
  }
  void on_epoch(const EpochReport& e) override {
    store_.on_epoch(e);
    events.push_back("epoch " + std::to_string(e.epoch));
  }
  void on_overflow(const OverflowReport& o) override {
    store_.on_overflow(o);
    overflows.push_back(o);
    events.push_back("overflow " + std::to_string(o.step));
  }
  void on_epoch_times(const EpochTimes& t) override {
    store_.on_epoch_times(t);
    times.push_back(t);
    events.push_back("times " + std::to_string(t.epoch));
  }
  void on_divergence(const PrecisionDivergence& d) override {
    store_.on_divergence(d);
    divergences.push_back(d);
    events.push_back("divergence");
  }
  void on_end(const RunEnd& e) override {
    store_.on_end(e);
    events.push_back("end");
  }

  std::vector<PrecisionDivergence> divergences;
  std::vector<StepReport> steps;
  std::vector<OverflowReport> overflows;
  std::vector<EpochTimes> times;
  std::vector<std::string> events;

 private:
  StoreRecorder& store_;
};

// `ampwb ARGS --db DB`, its output.
std::string ampwb(const fs::path& db, const std::string& args) {
  std::string out;
  FILE* pipe = popen((std::string(AMPWB_BINARY) + " " + args + " --db '" + db.string() + "' 2>&1").c_str(), "r");
  std::array<char, 4096> buffer;
  while (pipe && fgets(buffer.data(), buffer.size(), pipe)) out += buffer.data();
  if (pipe) pclose(pipe);
  return out;
}

size_t index_of(const std::vector<std::string>& events, const std::string& e) {
  return static_cast<size_t>(std::find(events.begin(), events.end(), e) - events.begin());
}

// Writes +inf into the first element of the weight gradient of the convolution whose weights are `shape`, on the
// `at`-th call of that shape: one layer's gradient overflowing at one step.
class InjectOverflow final : public testing::ForwardingBackend {
 public:
  InjectOverflow(std::unique_ptr<Backend> inner, Shape shape, int64_t at)
      : ForwardingBackend(std::move(inner)), shape_(std::move(shape)), at_(at) {}
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) override {
    inner().conv2d_backward_weights(x, dy, dw, p);
    if (dw.shape() != shape_ || calls_++ != at_) return;
    ASSERT_TRUE(dw.device().is_cpu());
    switch (dw.dtype()) {
      case DType::F32:
        dw.data_as<float>()[0] = std::numeric_limits<float>::infinity();
        break;
      case DType::F16:
        dw.data_as<uint16_t>()[0] = 0x7C00;
        break;
      case DType::BF16:
        dw.data_as<uint16_t>()[0] = 0x7F80;
        break;
      default:
        FAIL() << "a weight gradient in " << dtype_name(dw.dtype());
    }
  }

 private:
  Shape shape_;
  int64_t at_, calls_ = 0;
};

TEST(OverflowForensics, NamesLayersOnceInBackwardOrder) {
  EXPECT_EQ(layer_of("layer1.0.conv1.weight"), "layer1.0.conv1");
  EXPECT_EQ(layer_of("layer1.0.bn1.bias"), "layer1.0.bn1");
  EXPECT_EQ(layer_of("fc.weight"), "fc");
  EXPECT_EQ(layer_of("weight"), "weight");
  CpuBackend cpu({2});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto param = [](const std::string& name, std::vector<float> grad) {
    Parameter p(name, Tensor::zeros({static_cast<int64_t>(grad.size())}, DType::F32));
    p.grad = tensor_from_floats(grad, {static_cast<int64_t>(grad.size())});
    return p;
  };
  Parameter conv = param("conv1.weight", {1, inf}), bn_w = param("bn1.weight", {nan}), bn_b = param("bn1.bias", {inf}),
            fine = param("layer1.0.conv1.weight", {1, 2}), fc = param("fc.bias", {-inf, 0});
  const NonfiniteGradients found = find_nonfinite_gradients(cpu, {&conv, &bn_w, &bn_b, &fine, &fc});
  EXPECT_EQ(found.layers, (std::vector<std::string>{"fc", "bn1", "conv1"}));
  EXPECT_EQ(found.nonfinite_values, 4);
  EXPECT_DOUBLE_EQ(found.finite_norm, std::sqrt(1.0 + 1 + 4 + 0));  // the finite values: 1 | 1, 2 | 0
  const NonfiniteGradients none = find_nonfinite_gradients(cpu, {&fine});
  EXPECT_TRUE(none.layers.empty());
  EXPECT_EQ(none.nonfinite_values, 0);
  EXPECT_DOUBLE_EQ(none.finite_norm, std::sqrt(5.0));
}

TEST(OverflowForensics, AnOverflowInjectedIntoOneLayerIsTracedToItAndStored) {
  const fs::path data = make_stripes_folder("overflow", 16, 16);
  const fs::path db = fs::temp_directory_path() / ("ampwb_overflow_" + std::to_string(::getpid()) + ".sqlite");
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 2;
  c.batch_size = 8;
  c.threads = 2;
  c.max_steps_per_epoch = 3;
  c.precision = precision_preset("amp-fp16");
  c.precision.loss_scale.init_scale = 128;  // nothing overflows but what is injected
  // A convolution whose weight shape no other layer has, so that its call is the one matched.
  const std::string chosen = "layer2.0.conv1";
  Shape shape;
  {
    CpuBackend cpu({2});
    Rng rng(0);
    ResNet model(cpu, {20, 2, 3, 16, Stem::Auto}, rng);
    int same_shape = 0;
    for (Parameter* p : model.parameters()) {
      if (p->name == chosen + ".weight") shape = p->value.shape();
      same_shape += p->value.shape().size() == 4 && p->value.shape() == shape;
    }
    ASSERT_EQ(shape.size(), 4u);
    ASSERT_EQ(same_shape, 1) << "the chosen layer's weight shape must be its own";
  }
  const int64_t overflow_step = 4;  // epoch 2, its second step
  int64_t run = 0;
  {
    RunStore store(db.string());
    StoreRecorder recorder(store, c);
    Tee tee(recorder);
    Trainer trainer(c, &tee);
    trainer.decorate_backend([&](std::unique_ptr<Backend> b) {
      return std::make_unique<InjectOverflow>(std::move(b), shape, overflow_step);
    });
    const RunEnd end = trainer.run();
    ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
    run = recorder.run_id();

    ASSERT_EQ(tee.steps.size(), 6u);
    for (const StepReport& s : tee.steps) EXPECT_EQ(s.skipped, s.step == overflow_step) << "step " << s.step;
    EXPECT_EQ(tee.steps[overflow_step + 1].loss_scale, 64) << "the scale backs off after the skipped step";
    ASSERT_EQ(tee.overflows.size(), 1u);
    const OverflowReport& o = tee.overflows[0];
    EXPECT_EQ(o.epoch, 2);
    EXPECT_EQ(o.step, overflow_step);
    EXPECT_EQ(o.loss_scale, 128);
    EXPECT_EQ(o.layers, std::vector<std::string>{chosen}) << "only the injected layer's gradient overflowed";
    EXPECT_EQ(o.nonfinite_values, 1) << "one value injected";
    EXPECT_GT(o.finite_grad_norm, 0);
    EXPECT_TRUE(std::isfinite(o.finite_grad_norm));
    EXPECT_EQ(index_of(tee.events, "overflow 4"), index_of(tee.events, "step 4") + 1) << "right after its step";
  }
  RunStore store(db.string(), RunStore::Mode::ReadOnly);
  const std::vector<OverflowReport> stored = store.overflows(run);
  ASSERT_EQ(stored.size(), 1u);
  const double finite_norm = stored[0].finite_grad_norm;
  EXPECT_EQ(json(stored[0]), json(OverflowReport{2, overflow_step, 128, {chosen}, 1, finite_norm}));
  // `ampwb show` lists it with the norm of the gradients' finite values before and after unscaling (the whole norm
  // is inf: it overflowed).
  const std::string show = ampwb(db, "show " + std::to_string(run));
  EXPECT_NE(show.find("overflows (1 skipped step; layers nearest the loss first;"), std::string::npos) << show;
  const size_t row = show.find(chosen, show.find("overflows ("));
  ASSERT_NE(row, std::string::npos) << show;
  const std::string line = show.substr(show.rfind('\n', row) + 1, row - show.rfind('\n', row) - 1);
  std::istringstream cells(line);
  const std::vector<std::string> row_cells{std::istream_iterator<std::string>(cells), {}};
  const auto g4 = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  EXPECT_EQ(row_cells, (std::vector<std::string>{"4", "2", "128", "1", g4(finite_norm * 128), g4(finite_norm)}))
      << show;
  const json shown = json::parse(ampwb(db, "show --json " + std::to_string(run)));
  EXPECT_EQ(shown["overflows"][0]["layers"], json::array({chosen})) << shown.dump();
  EXPECT_EQ(shown["overflows"][0]["step"], overflow_step);
  EXPECT_EQ(shown["overflows"][0]["finite_grad_norm_scaled"], finite_norm * 128);
  fs::remove_all(data);
  fs::remove(db);
}

// ResNet-18 on 32 px images, batches of 8: convolutions take long enough that the timers' own cost and the host's
// work between ops are small beside them. Five steps: the first and the last (probed) are not timed.
TrainConfig timing_config(const fs::path& data, const std::string& precision) {
  TrainConfig c;
  c.name = precision;
  c.data_dir = data.string();
  c.depth = 18;
  c.epochs = 1;
  c.batch_size = 8;
  c.threads = 2;
  c.max_steps_per_epoch = 8;  // of 64 images: steps 5 and 6 steady (past the warm-up, before the last), a speed
  c.data.validation_fraction = 0.2;
  c.precision = precision_preset(precision);
  return c;
}

// What the op classes and the data wait leave of a step ("other": the host's own work between ops). A sanitizer
// slows that instrumented host code and not oneDNN, so there it is a larger share (8.9% of a 3 s fp32 step once
// under ThreadSanitizer on a Xeon; under 5% in its two reruns).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kOtherShareBound = 0.2;
#else
constexpr double kOtherShareBound = 0.05;
#endif

TEST(StepTimes, ClassesAndDataWaitMakeUpTheStepAndAreStoredAndCompared) {
  const fs::path data = make_stripes_folder("timing", 40, 32);
  const fs::path db = fs::temp_directory_path() / ("ampwb_timing_" + std::to_string(::getpid()) + ".sqlite");
  std::vector<int64_t> runs;
  for (const std::string precision : {"fp32", "amp-bf16"}) {
    SCOPED_TRACE(precision);
    RunStore store(db.string());
    StoreRecorder recorder(store, timing_config(data, precision));
    Tee tee(recorder);
    Trainer trainer(timing_config(data, precision), &tee);
    const RunEnd end = trainer.run();
    ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
    runs.push_back(recorder.run_id());
    ASSERT_EQ(tee.times.size(), 1u);
    const EpochTimes& t = tee.times[0];
    EXPECT_EQ(t.epoch, 1);
    EXPECT_EQ(t.steps, 6) << "on the CPU every step is timed but the first and the probed one";
    EXPECT_EQ(index_of(tee.events, "times 1") + 1, index_of(tee.events, "epoch 1")) << "just before its epoch";
    for (TimeClass c : {TimeClass::ConvForward, TimeClass::ConvBackwardData, TimeClass::ConvBackwardWeights,
                        TimeClass::BatchNorm, TimeClass::Optimizer, TimeClass::HostWait})
      EXPECT_GT(t.op_seconds[static_cast<size_t>(c)], 0) << time_class_name(c);
    EXPECT_GT(t.step_seconds, 0);
    EXPECT_GE(t.data_wait_seconds, 0);
    EXPECT_TRUE(t.load.known()) << "the machine's other work during the epoch, from /proc";
    EXPECT_LE(std::abs(t.other_seconds()), kOtherShareBound * t.step_seconds)
        << "ops " << t.op_total_seconds() << " s + data wait " << t.data_wait_seconds << " s of a " << t.step_seconds
        << " s step";
    const std::vector<EpochTimes> stored = store.epoch_times(runs.back());
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(json(stored[0]), json(t));
    EXPECT_TRUE(store.overflows(runs.back()).empty());
  }

  RunStore store(db.string(), RunStore::Mode::ReadOnly);
  auto timing = [&](int64_t run) { return run_timing(store.run(run), store.steps(run), store.epoch_times(run)); };
  const TimeComparison cmp = compare_times(timing(runs[0]), timing(runs[1]));
  ASSERT_TRUE(cmp.available);
  ASSERT_EQ(cmp.rows.size(), kTimeClassCount + 3);
  EXPECT_EQ(cmp.rows.front().label, "conv forward");
  EXPECT_EQ(cmp.rows.back().label, "step");
  for (size_t run = 0; run < 2; ++run) {
    double shares = 0;
    for (size_t i = 0; i + 1 < cmp.rows.size(); ++i) shares += cmp.rows[i].share[run];
    EXPECT_NEAR(shares, 1.0, 1e-9) << "classes, data wait and other make up the step";
    EXPECT_EQ(cmp.rows.back().share[run], 1.0);
  }
  EXPECT_NE(cmp.sentence.find("convolutions "), std::string::npos) << cmp.sentence;
  EXPECT_NE(cmp.sentence.find(", so end to end "), std::string::npos) << cmp.sentence;

  // The CLI prints both: one run's breakdown with the hardware beside it, and the comparison with its sentence.
  const std::string show = ampwb(db, "show " + std::to_string(runs[1]));
  EXPECT_NE(show.find("where the time went (ms per step: the median steady step"), std::string::npos) << show;
  EXPECT_NE(show.find("  machine    "), std::string::npos) << show;
  EXPECT_NE(show.find("% of the CPUs busy with other work"), std::string::npos) << show;
  EXPECT_NE(show.find("  device     " + store.run(runs[1]).info.backend_description), std::string::npos) << show;
  EXPECT_NE(show.find("  compute    " + store.run(runs[1]).info.compute), std::string::npos) << show;
  EXPECT_NE(show.find("conv backward weights"), std::string::npos) << show;
  EXPECT_EQ(show.find("overflows"), std::string::npos) << "no section without one";
  const json show_json = json::parse(ampwb(db, "show --json " + std::to_string(runs[1])));
  EXPECT_EQ(show_json["epoch_times"], json(store.epoch_times(runs[1])));
  const std::string compare = ampwb(db, "compare " + std::to_string(runs[0]) + " " + std::to_string(runs[1]));
  EXPECT_NE(compare.find("where the time went"), std::string::npos) << compare;
  EXPECT_NE(compare.find(cmp.sentence), std::string::npos) << compare;
  const json compare_json =
      json::parse(ampwb(db, "compare --json " + std::to_string(runs[0]) + " " + std::to_string(runs[1])));
  EXPECT_EQ(compare_json["time"][0]["sentence"], cmp.sentence);
  EXPECT_EQ(compare_json["time"][0]["rows"].size(), cmp.rows.size());

  // `ampwb train` records them too (its observers pass every event on to the store's recorder).
  const std::string trained = ampwb(db, "train --data '" + data.string() +
                                            "' --depth 20 --image-size 16 --epochs 1 --batch-size 8 --threads 2 "
                                            "--max-steps-per-epoch 4 --no-checkpoint");
  const json cli_run = json::parse(ampwb(db, "show --json " + std::to_string(runs.back() + 1)));
  ASSERT_EQ(cli_run["epoch_times"].size(), 1u) << trained;
  EXPECT_EQ(cli_run["epoch_times"][0]["steps"], 2) << "4 steps, the first and the probed one not timed";
  fs::remove_all(data);
  fs::remove(db);
}

}  // namespace
}  // namespace ampwb

namespace ampwb {
namespace {

TrainConfig divergence_config(const fs::path& data, const std::string& precision) {
  TrainConfig c = timing_config(data, precision);
  c.depth = 20;
  c.epochs = 2;
  c.max_steps_per_epoch = 3;
  return c;
}

TEST(PrecisionDivergence, MeasuredOnceAtTheEndOfARunStoredAndShown) {
  const fs::path data = make_stripes_folder("divergence-run", 20, 16);
  const fs::path db = fs::temp_directory_path() / ("ampwb_divergence_" + std::to_string(::getpid()) + ".sqlite");
  fs::remove(db);
  std::vector<int64_t> runs;
  for (const std::string precision : {"amp-bf16", "fp32"}) {
    SCOPED_TRACE(precision);
    RunStore store(db.string());
    StoreRecorder recorder(store, divergence_config(data, precision));
    Tee tee(recorder);
    Trainer trainer(divergence_config(data, precision), &tee);
    const RunEnd end = trainer.run();
    ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
    runs.push_back(recorder.run_id());
    if (precision == "fp32") {
      EXPECT_TRUE(tee.divergences.empty()) << "FP32 is its own reference";
      EXPECT_FALSE(store.divergence(runs.back()));
      continue;
    }
    ASSERT_EQ(tee.divergences.size(), 1u);
    const PrecisionDivergence& d = tee.divergences[0];
    // After the last epoch, from the final weights: the run's last event before its end.
    EXPECT_EQ(index_of(tee.events, "epoch 2") + 1, index_of(tee.events, "divergence"));
    EXPECT_EQ(index_of(tee.events, "divergence") + 1, index_of(tee.events, "end"));
    EXPECT_EQ(d.epoch, 2);
    EXPECT_EQ(d.step, 6);
    EXPECT_EQ(d.mode, "amp-bf16");
    EXPECT_EQ(d.samples, 8);
    EXPECT_EQ(d.layers.front().layer, "conv1");
    EXPECT_EQ(d.layers.back().layer, "fc");
    EXPECT_GT(d.layers.front().activation.relative_error, 0.0);
    ASSERT_TRUE(store.divergence(runs.back()));
    EXPECT_EQ(json(*store.divergence(runs.back())), json(d));
  }

  const std::string shown = ampwb(db, "show " + std::to_string(runs[0]));
  EXPECT_NE(shown.find("\nprecision divergence\n"), std::string::npos) << shown;
  {
    RunStore store(db.string(), RunStore::Mode::ReadOnly);
    const PrecisionDivergence d = *store.divergence(runs[0]);
    EXPECT_NE(shown.find(divergence_sentence(d)), std::string::npos) << shown;
    for (const LayerDivergence& l : d.layers) EXPECT_NE(shown.find("  " + l.layer + " "), std::string::npos) << l.layer;
    const json shown_json = json::parse(ampwb(db, "show " + std::to_string(runs[0]) + " --json"));
    EXPECT_EQ(shown_json.at("precision_divergence").at("layers").size(), d.layers.size());
    EXPECT_EQ(shown_json.at("precision_divergence").at("sentence"), divergence_sentence(d));
  }
  const std::string fp32 = ampwb(db, "show " + std::to_string(runs[1]));
  EXPECT_NE(fp32.find("its own reference"), std::string::npos) << fp32;
  const json fp32_json = json::parse(ampwb(db, "show " + std::to_string(runs[1]) + " --json"));
  EXPECT_TRUE(fp32_json.at("precision_divergence").is_null());
  fs::remove(db);
}

}  // namespace
}  // namespace ampwb
