// A sweep's grid (app/sweep_grid.h): the points are the cartesian product in the grid's order, the last setting the
// fastest; each point is read by `ampwb train`'s own flags, so a bad value is refused naming its flag and the point;
// a sweep file's settings are checked by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "amp/precision.h"
#include "amp/precision_overrides.h"
#include "sweep_grid.h"

namespace ampwb::cli {
namespace {
namespace fs = std::filesystem;

std::string error_of(const SweepGrid& grid) {
  try {
    expand_sweep(grid);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

SweepGrid modes_by_seeds() {
  SweepGrid grid;
  grid.dimensions = {{"precision", {"fp32", "amp-bf16"}}, {"seed", {"0", "1", "2"}}};
  grid.settings = {{"data", "/data/stripes"}, {"depth", "20"}, {"epochs", "2"}, {"augment", "true"}};
  return grid;
}

TEST(SweepGrid, PointsAreTheProductInTheGridsOrder) {
  const std::vector<SweepPointConfig> points = expand_sweep(modes_by_seeds());
  ASSERT_EQ(points.size(), 6u);
  const char* modes[] = {"fp32", "fp32", "fp32", "amp-bf16", "amp-bf16", "amp-bf16"};
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(mode_name(points[i].config.precision.mode), std::string(modes[i])) << "point " << i;
    EXPECT_EQ(points[i].config.seed, i % 3) << "point " << i;
    // What every point shares.
    EXPECT_EQ(points[i].config.depth, 20);
    EXPECT_EQ(points[i].config.epochs, 2);
    EXPECT_TRUE(points[i].config.data.augment);
    EXPECT_EQ(points[i].config.data_dir, "/data/stripes");
  }
  EXPECT_EQ(describe_point(points[4].values), "precision=amp-bf16 seed=1");
  // The store keeps the values and the whole configuration.
  const nlohmann::json kept = nlohmann::json::parse(points[4].settings_json());
  EXPECT_EQ(kept["values"]["seed"], "1");
  EXPECT_EQ(config_from_json_text(kept["config"].dump()).seed, 1u);
  EXPECT_EQ(describe_point_json(points[4].settings_json()), "precision=amp-bf16 seed=1");
}

// FP8's settings crossed with modes that ignore them, and a loss scaler's with a mode that scales nothing: the points
// that would train an earlier point's run again are left out, each named by its values beside the earlier point's.
TEST(SweepGrid, PointsThatWouldTrainTheSameRunAreLeftOut) {
  SweepGrid grid;
  grid.dimensions = {{"precision", {"fp32", "amp-fp8"}}, {"fp8-margin", {"0", "2"}}};
  grid.settings = {{"data", "/data/stripes"}};
  std::vector<SweepPointConfig> points = expand_sweep(grid);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(drop_repeated_runs(points),
            std::vector<std::string>{"precision=fp32 fp8-margin=2 (as precision=fp32 fp8-margin=0)"});
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(describe_point(points[0].values), "precision=fp32 fp8-margin=0");
  EXPECT_EQ(points[1].config.precision.fp8.scaling.margin, 0);
  EXPECT_EQ(points[2].config.precision.fp8.scaling.margin, 2);
  grid.dimensions = {{"precision", {"amp-bf16", "amp-fp16"}}, {"init-scale", {"1024", "65536"}}};
  points = expand_sweep(grid);
  EXPECT_EQ(drop_repeated_runs(points).size(), 1u) << "amp-bf16 scales no loss: its initial scale does nothing";
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[2].config.precision.loss_scale.init_scale, 65536);
  // Points that differ where it counts are all kept.
  points = expand_sweep(modes_by_seeds());
  EXPECT_TRUE(drop_repeated_runs(points).empty());
  EXPECT_EQ(points.size(), 6u);
}

TEST(SweepGrid, ARelativeDataFolderBecomesAbsolute) {
  SweepGrid grid;
  grid.dimensions = {{"seed", {"0", "1"}}};
  grid.settings = {{"data", "some/data"}};
  EXPECT_EQ(expand_sweep(grid)[1].config.data_dir, (fs::current_path() / "some/data").lexically_normal().string());
  // One in quotes that name no folder, where the path inside them does, is refused saying so, and where.
  grid.settings = {{"data", "\"" + fs::temp_directory_path().string() + "\""}};
  const std::string quoted = error_of(grid);
  EXPECT_NE(quoted.find("its quotes are part of the name given; without them, " + fs::temp_directory_path().string() +
                        " is a folder (sweep point 1 (seed=0))"),
            std::string::npos)
      << quoted;
}

TEST(SweepGrid, ABadValueIsRefusedNamingItsFlagAndPoint) {
  SweepGrid grid = modes_by_seeds();
  grid.dimensions.emplace_back("batch-size", std::vector<std::string>{"8", "1"});
  const std::string small = error_of(grid);
  EXPECT_EQ(small.rfind("--batch-size: ", 0), 0u) << small;
  EXPECT_NE(small.find("sweep point 2 (precision=fp32 seed=0 batch-size=1)"), std::string::npos) << small;

  grid = modes_by_seeds();
  grid.dimensions[0].second.push_back("fp99");
  const std::string mode = error_of(grid);
  EXPECT_NE(mode.find("--precision"), std::string::npos) << mode;
  EXPECT_NE(mode.find("fp99"), std::string::npos) << mode;

  grid = modes_by_seeds();
  grid.settings.emplace_back("epochs", "many");
  EXPECT_NE(error_of(grid).find("--epochs"), std::string::npos) << error_of(grid);

  grid = modes_by_seeds();
  grid.settings.emplace_back("nesterov", "sometimes");
  EXPECT_NE(error_of(grid).find("--nesterov: is on or off"), std::string::npos) << error_of(grid);
}

// A sweep file's "config" (what the GUI hands `ampwb sweep`): every point is that configuration with the point's
// values, whatever no flag could say kept (a data path with a comma), and a point of another precision mode keeps the
// loss scaler and FP8 settings the config overrides.
TEST(SweepGrid, AConfigIsEveryPointsBase) {
  TrainConfig base;
  base.name = "the panel's run";
  base.data_dir = "/data/a,b";
  base.lr = 0.07f;
  base.label_smoothing = 0.1f;
  base.data.augment = true;
  base.stem = Stem::ImageNet;
  base.max_steps_per_epoch = 3;
  PrecisionOverrides overrides;
  overrides.init_scale = 1024;
  overrides.growth_interval = 100;
  overrides.hysteresis = 2;
  base.precision = resolve_precision(PrecisionMode::AmpFp16, overrides);
  base.precision.fp8.scaling.history_length = 16;  // amp-fp8's settings, kept by every mode
  nlohmann::ordered_json file;
  file["config"] = nlohmann::ordered_json::parse(config_to_json_text(base));
  file["grid"] = {{"precision", {"fp32", "amp-bf16"}}, {"seed", {"0", "1"}}};
  file["settings"] = {{"augment", false}};
  const SweepGrid grid = sweep_grid_from_json(file);
  const std::vector<SweepPointConfig> points = expand_sweep(grid);
  ASSERT_EQ(points.size(), 4u);
  for (size_t i = 0; i < points.size(); ++i) {
    TrainConfig expected = base;
    expected.name.clear();
    expected.data.augment = false;  // a setting over the config
    expected.seed = i % 2;
    expected.precision = resolve_precision(i < 2 ? PrecisionMode::Fp32 : PrecisionMode::AmpBf16, overrides);
    expected.precision.fp8 = base.precision.fp8;
    EXPECT_EQ(config_to_json_text(points[i].config), config_to_json_text(expected)) << "point " << i + 1;
  }
  EXPECT_EQ(config_from_json_text(grid.to_json()["config"].dump()).data_dir, "/data/a,b");  // kept in the record

  // Without a precision in the grid, the config's precision stands whole.
  file["grid"] = {{"seed", {"0", "1"}}};
  const std::vector<SweepPointConfig> seeds = expand_sweep(sweep_grid_from_json(file));
  EXPECT_EQ(seeds[1].config.precision.loss_scale.init_scale, 1024);
  EXPECT_EQ(seeds[1].config.precision.mode, PrecisionMode::AmpFp16);
  EXPECT_EQ(seeds[1].config.seed, 1u);
}

TEST(SweepGrid, TakesTrainsSettingsButNotTheRunsName) {
  EXPECT_TRUE(is_sweep_setting("precision"));
  EXPECT_TRUE(is_sweep_setting("batch-size"));
  EXPECT_TRUE(is_sweep_setting("augment"));
  EXPECT_FALSE(is_sweep_setting("name"));  // every point's run would have the same
  EXPECT_FALSE(is_sweep_setting("resume"));
  EXPECT_FALSE(is_sweep_setting("db"));
}

TEST(SweepGrid, ReadsASweepFile) {
  const fs::path file = fs::temp_directory_path() / ("ampwb_sweep_grid_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"name": "modes",
      "grid": {"seed": [0, 1], "precision": ["fp32", "amp-fp16"]},
      "settings": {"data": "/d", "batch_size": 8, "augment": true, "lr": 0.05}})";
  const SweepGrid grid = read_sweep_file(file.string());
  EXPECT_EQ(grid.name, "modes");
  ASSERT_EQ(grid.dimensions.size(), 2u);
  EXPECT_EQ(grid.dimensions[0].first, "seed");  // the file's order
  EXPECT_EQ(grid.dimensions[1].second, (std::vector<std::string>{"fp32", "amp-fp16"}));
  const std::vector<SweepPointConfig> points = expand_sweep(grid);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1].config.seed, 0u);
  EXPECT_EQ(mode_name(points[1].config.precision.mode), std::string("amp-fp16"));
  EXPECT_EQ(points[1].config.batch_size, 8);
  EXPECT_FLOAT_EQ(points[1].config.lr, 0.05f);
  EXPECT_EQ(grid.to_json()["grid"]["seed"], (nlohmann::ordered_json{"0", "1"}));

  std::ofstream(file) << R"({"grid": {"seed": [0, 1]}, "slurm": {"partition": "gpu", "max-parallel": 4}})";
  EXPECT_EQ(read_sweep_file(file.string()).slurm,
            (std::vector<std::pair<std::string, std::string>>{{"partition", "gpu"}, {"max-parallel", "4"}}));
  std::ofstream(file) << R"({"grid": {"seed": [0, 1]}, "slurm": {"queue": "gpu"}})";
  try {
    read_sweep_file(file.string());
    ADD_FAILURE() << "an unknown Slurm setting was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not \"queue\""), std::string::npos) << e.what();
  }
  std::ofstream(file) << R"({"grid": {"colour": ["red"]}})";
  try {
    read_sweep_file(file.string());
    ADD_FAILURE() << "an unknown setting was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'colour' is no training setting"), std::string::npos) << e.what();
  }
  std::ofstream(file) << "{\"grid\": ";
  try {
    read_sweep_file(file.string());
    ADD_FAILURE() << "a broken file was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("is not JSON"), std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace
}  // namespace ampwb::cli
