// Every setting with a fixed set of values (core/choices.h): one row per value, names that read back as their value,
// and the run store's JSON refusing a name that is not one, naming the choices.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "train/config.h"
#include "train/record_json.h"

namespace ampwb {
namespace {

template <class E>
class EveryChoice : public ::testing::Test {};

// Each enum held by TrainConfig: a new one is added here.
using ChoiceEnums = ::testing::Types<HostSync, CudaGraphs, ConvAlgorithm, LossScaleKind, Schedule, OptimizerKind,
                                     NormalizationStats, GradientAllReduce, AmaxRule>;
TYPED_TEST_SUITE(EveryChoice, ChoiceEnums);

TYPED_TEST(EveryChoice, HasOneRowPerValueAndItsNameReadsBack) {
  using E = TypeParam;
  std::set<std::string> names;
  std::set<int> values;
  for (const Choice<E>& row : ChoiceTable<E>::rows) {
    EXPECT_TRUE(names.insert(row.name).second) << "two rows named " << row.name;
    EXPECT_TRUE(values.insert(static_cast<int>(row.value)).second) << row.name << ": a value with two rows";
    EXPECT_EQ(parse_choice<E>(row.name), row.value) << row.name;
    EXPECT_STREQ(choice_name(row.value), row.name);
    EXPECT_NE(std::string(row.help), "") << row.name;
  }
  // The rows cover 0..n-1: every value of the enum has its row.
  EXPECT_EQ(*values.rbegin() + 1, static_cast<int>(values.size()));
  EXPECT_FALSE(parse_choice<E>("no such value"));
}

TEST(Choices, TheStoredConfigurationSpellsThemByNameAndRefusesOthers) {
  TrainConfig c;
  c.host_sync = HostSync::EveryStep;
  c.cuda_graphs = CudaGraphs::Off;
  nlohmann::json j = c;
  EXPECT_EQ(j["host_sync"], "every-step");
  EXPECT_EQ(j["cuda_graphs"], "off");
  EXPECT_EQ(j.get<TrainConfig>().host_sync, HostSync::EveryStep);
  j["host_sync"] = "sometimes";
  try {
    (void)j.get<TrainConfig>();
    ADD_FAILURE() << "an unknown host sync was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host_sync is not one of auto, every-step or deferred"), std::string::npos)
        << e.what();
  }
  const auto settings = config_settings(c);
  EXPECT_NE(std::find(settings.begin(), settings.end(), std::pair<std::string, std::string>{"host_sync", "every-step"}),
            settings.end());
}

// Runs stored before the data-parallel settings existed trained on one process: they read as the defaults, which
// change nothing there; a stored setting reads back by name.
TEST(Choices, TheDataParallelSettingsDefaultForOlderRunsAndReadBack) {
  const TrainConfig older = nlohmann::json::parse(R"({"depth":20})").get<TrainConfig>();
  EXPECT_FALSE(older.data_parallel.sync_batchnorm);
  EXPECT_EQ(older.data_parallel.gradient_allreduce, GradientAllReduce::F32);
  TrainConfig c;
  c.data_parallel = {.sync_batchnorm = true, .gradient_allreduce = GradientAllReduce::BF16};
  const nlohmann::json j = c;
  EXPECT_EQ(j["data_parallel"]["gradient_allreduce"], "bf16");
  const TrainConfig back = j.get<TrainConfig>();
  EXPECT_TRUE(back.data_parallel.sync_batchnorm);
  EXPECT_EQ(back.data_parallel.gradient_allreduce, GradientAllReduce::BF16);
}

// A configuration stored while the convolution algorithm and the loss scaling were text loads into their enums, and
// is written back with the same names.
TEST(Choices, AConfigurationStoredAsTextLoadsIntoTheEnums) {
  const nlohmann::json stored = nlohmann::json::parse(
      R"({"conv_algorithm":"winograd","depth":20,"precision":{"loss_scale":{"init_scale":1024.0,"kind":"static"},)"
      R"("master_weights":true,"mode":"amp-fp16"}})");
  const TrainConfig c = stored.get<TrainConfig>();
  EXPECT_EQ(c.conv_algorithm, ConvAlgorithm::Winograd);
  EXPECT_EQ(c.precision.loss_scale.kind, LossScaleKind::Static);
  EXPECT_EQ(c.precision.loss_scale.init_scale, 1024.0);
  const nlohmann::json written = c;
  EXPECT_EQ(written["conv_algorithm"], "winograd");
  EXPECT_EQ(written["precision"]["loss_scale"]["kind"], "static");
  // The mode's preset spells its loss scaling through the same table.
  TrainConfig preset;
  preset.precision = precision_preset(PrecisionMode::AmpFp16);
  EXPECT_EQ(nlohmann::json(preset)["precision"]["loss_scale"]["kind"], "dynamic");

  nlohmann::json refused = stored;
  refused["precision"]["loss_scale"]["kind"] = "sometimes";
  try {
    (void)refused.get<TrainConfig>();
    ADD_FAILURE() << "an unknown loss scaling was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision.loss_scale.kind is not one of off, static or dynamic"),
              std::string::npos)
        << e.what();
  }
}

// A run stored while the schedule, the optimizer and the normalization were text loads into their enums and is
// written back with the same names; a name that is none of them is refused, naming the choices.
TEST(Choices, ScheduleOptimizerAndNormalizationStoredAsTextLoad) {
  const nlohmann::json stored = nlohmann::json::parse(
      R"({"schedule":"step","optimizer":{"kind":"adamw","momentum":0.5},"data":{"normalization":"imagenet"}})");
  const TrainConfig c = stored.get<TrainConfig>();
  EXPECT_EQ(c.schedule, Schedule::Step);
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(c.optimizer.momentum, 0.5f);
  EXPECT_EQ(c.data.normalization, NormalizationStats::ImageNet);
  const nlohmann::json written = c;
  EXPECT_EQ(written["schedule"], "step");
  EXPECT_EQ(written["optimizer"]["kind"], "adamw");
  EXPECT_EQ(written["data"]["normalization"], "imagenet");
  const TrainConfig defaults = nlohmann::json::object().get<TrainConfig>();
  EXPECT_EQ(defaults.schedule, Schedule::Cosine);
  EXPECT_EQ(defaults.optimizer.kind, OptimizerKind::Sgd);
  EXPECT_EQ(defaults.data.normalization, NormalizationStats::Dataset);

  for (const auto& [key, value, said] : std::vector<std::tuple<nlohmann::json::json_pointer, std::string, std::string>>{
           {nlohmann::json::json_pointer("/schedule"), "linear", "schedule is not one of cosine, step or constant"},
           {nlohmann::json::json_pointer("/optimizer/kind"), "rmsprop",
            "optimizer.kind is not one of sgd, adam or adamw"},
           {nlohmann::json::json_pointer("/data/normalization"), "none",
            "data.normalization is not one of dataset or imagenet"}}) {
    nlohmann::json refused = stored;
    refused[key] = value;
    try {
      (void)refused.get<TrainConfig>();
      ADD_FAILURE() << value << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  }
}

// The device: every name reads back as itself, "cuda" (what older runs stored) as the first GPU, and any other word
// is refused naming the ones it takes.
TEST(DeviceChoices, NamesReadBackAndOtherWordsAreRefused) {
  for (const DeviceChoice d :
       {DeviceChoice::cpu(), DeviceChoice::automatic(), DeviceChoice::cuda(0), DeviceChoice::cuda(3)})
    EXPECT_EQ(DeviceChoice::parse(d.name()), d) << d.name();
  EXPECT_EQ(DeviceChoice::cuda(2).name(), "cuda:2");
  EXPECT_EQ(DeviceChoice::parse("cuda"), DeviceChoice::cuda(0));
  for (const char* word : {"", "tpu", "CPU", "cuda:", "cuda:x", "cuda0", "cuda:-1", "cuda:1 ", "cuda:99999999999"})
    EXPECT_EQ(DeviceChoice::parse(word), std::nullopt) << "'" << word << "'";
  try {
    (void)parse_device("tpu");
    ADD_FAILURE() << "tpu was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown device 'tpu' (expected cpu, cuda, cuda:N or auto)");
  }
}

TEST(DeviceChoices, TheStoredConfigurationSpellsTheDeviceByName) {
  TrainConfig c;
  EXPECT_TRUE(c.device.is_cpu());
  c.device = DeviceChoice::cuda(1);
  nlohmann::json j = c;
  EXPECT_EQ(j["device"], "cuda:1");
  EXPECT_EQ(j.get<TrainConfig>().device, DeviceChoice::cuda(1));
  j["device"] = "cuda";
  EXPECT_EQ(j.get<TrainConfig>().device, DeviceChoice::cuda(0));
  for (const nlohmann::json& bad : {nlohmann::json("gpu"), nlohmann::json(0)}) {
    j["device"] = bad;
    try {
      (void)j.get<TrainConfig>();
      ADD_FAILURE() << "device " << bad.dump() << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("device is not cpu, cuda, cuda:N or auto"), std::string::npos) << e.what();
    }
  }
  const auto settings = config_settings(c);
  EXPECT_NE(std::find(settings.begin(), settings.end(), std::pair<std::string, std::string>{"device", "cuda:1"}),
            settings.end());
}

}  // namespace
}  // namespace ampwb
