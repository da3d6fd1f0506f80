// A sweep's grid read from flags or a file and expanded into its points through the training flags.
#include "sweep_grid.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli.h"
#include "core/error.h"
#include "core/setting_error.h"
#include "facade/run_setup.h"
#include "setting_flags.h"
#include "train_flags.h"

namespace ampwb::cli {
namespace {

// The flags of `ampwb train` that are not a run's setting in a sweep: the run's name must differ between points.
bool left_out(const std::string& flag) { return flag == "--help" || flag == "--name"; }

// A JSON value as the text a flag takes.
std::string value_text(const nlohmann::ordered_json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();
  throw Error(where + ": expects a string, a number or true/false, got " + v.dump());
}

const std::map<std::string, bool>& settings_by_flag() {
  static const std::map<std::string, bool> table = [] {
    std::map<std::string, bool> t;
    for (const SweepSetting& setting : sweep_settings()) t.emplace(setting.flag, setting.on_off);
    return t;
  }();
  return table;
}

// "batch_size" and "batch-size" alike: a sweep file may spell a setting as the configuration's JSON does.
std::string as_flag_name(std::string setting) {
  if (setting.starts_with("--")) setting = setting.substr(2);
  for (char& ch : setting)
    if (ch == '_') ch = '-';
  return setting;
}

// A base configuration's precision as train's flags say it: its mode, and as overrides what differs from that
// mode's preset, so that a point of another mode keeps the user's loss scaler and FP8 settings.
PrecisionFlags precision_flags_of(const PrecisionConfig& p) {
  const PrecisionOverrides o = overrides_of(p);
  PrecisionFlags f;
  f.mode = mode_name(p.mode);
  if (o.loss_scale_kind)
    f.loss_scale =
        *o.loss_scale_kind == LossScaleKind::Static ? std::string("static:1") : choice_name(*o.loss_scale_kind);
  if (o.master_weights) f.master_weights = *o.master_weights ? "on" : "off";
  f.init_scale = o.init_scale;  // with static:1, the static scale
  f.growth_factor = o.growth_factor;
  f.backoff_factor = o.backoff_factor;
  f.growth_interval = o.growth_interval;
  f.hysteresis = o.hysteresis;
  f.min_scale = o.min_scale;
  f.max_scale = o.max_scale;
  f.fp8 = p.fp8;
  return f;
}

const char* stem_flag_value(Stem stem) {
  return stem == Stem::ImageNet ? "imagenet" : stem == Stem::Small ? "small" : "auto";
}

}  // namespace

size_t SweepGrid::points() const {
  size_t n = 1;
  for (const auto& dimension : dimensions) n *= dimension.second.size();
  return n;
}

nlohmann::ordered_json SweepGrid::to_json() const {
  nlohmann::ordered_json j;
  j["name"] = name;
  if (base) j["config"] = nlohmann::ordered_json::parse(config_to_json_text(*base));
  j["grid"] = nlohmann::ordered_json::object();
  for (const auto& [setting, values] : dimensions) j["grid"][setting] = values;
  j["settings"] = nlohmann::ordered_json::object();
  for (const auto& [setting, value] : settings) j["settings"][setting] = value;
  return j;
}

std::string SweepPointConfig::settings_json() const {
  nlohmann::ordered_json j;
  j["values"] = nlohmann::ordered_json::object();
  for (const auto& [setting, value] : values) j["values"][setting] = value;
  j["config"] = nlohmann::ordered_json::parse(config_to_json_text(config));
  return j.dump();
}

const std::vector<SweepSetting>& sweep_settings() {
  static const std::vector<SweepSetting> flags = [] {
    CLI::App train;
    TrainFlags bound;
    add_train_flags(&train, bound);
    std::vector<SweepSetting> out;
    for (const CLI::Option* option : train.get_options()) {
      const std::string flag = option->get_name();
      if (!flag.starts_with("--") || left_out(flag)) continue;
      // An on/off flag takes no value.
      out.push_back({flag, option->get_expected_min() == 0, option->get_description(), option->get_group()});
    }
    return out;
  }();
  return flags;
}

bool is_sweep_setting(const std::string& setting) { return settings_by_flag().contains("--" + setting); }

SweepGrid sweep_grid_from_json(const nlohmann::ordered_json& j) {
  if (!j.is_object()) throw Error("a sweep is a JSON object with \"grid\" and \"settings\"");
  for (const auto& [key, value] : j.items())
    if (key != "name" && key != "config" && key != "grid" && key != "settings" && key != "slurm")
      throw Error("a sweep has \"name\", \"config\", \"grid\", \"settings\" and \"slurm\", not \"" + key + "\"");
  SweepGrid grid;
  if (j.contains("name")) grid.name = value_text(j["name"], "name");
  if (j.contains("config")) {
    if (!j["config"].is_object()) throw Error("\"config\" is a training configuration: an object");
    try {
      grid.base = config_from_json_text(j["config"].dump());
    } catch (const std::exception& e) {
      throw Error(std::string("\"config\" is no training configuration: ") + e.what());
    }
    grid.base->name.clear();  // each point's run has its own
  }
  const auto check_setting = [](const std::string& key) {
    const std::string setting = as_flag_name(key);
    if (!is_sweep_setting(setting))
      throw Error("'" + key + "' is no training setting a sweep takes (the flags of ampwb train, without --)");
    return setting;
  };
  if (j.contains("grid")) {
    if (!j["grid"].is_object()) throw Error("\"grid\" is an object of settings, each with a list of values");
    for (const auto& [key, values] : j["grid"].items()) {
      const std::string setting = check_setting(key);
      std::vector<std::string> texts;
      if (!values.is_array()) {
        texts.push_back(value_text(values, key));
      } else {
        for (const auto& v : values) texts.push_back(value_text(v, key));
      }
      if (texts.empty()) throw Error("the grid's " + key + " has no values");
      grid.dimensions.emplace_back(setting, texts);
    }
  }
  if (j.contains("settings")) {
    if (!j["settings"].is_object()) throw Error("\"settings\" is an object of settings, each with one value");
    for (const auto& [key, value] : j["settings"].items())
      grid.settings.emplace_back(check_setting(key), value_text(value, key));
  }
  if (j.contains("slurm")) {
    if (!j["slurm"].is_object()) throw Error("\"slurm\" is an object: partition, account, time, max-parallel");
    for (const auto& [key, value] : j["slurm"].items()) {
      if (key != "partition" && key != "account" && key != "time" && key != "max-parallel")
        throw Error("\"slurm\" takes partition, account, time and max-parallel, not \"" + key + "\"");
      grid.slurm.emplace_back(key, value_text(value, key));
    }
  }
  return grid;
}

SweepGrid read_sweep_file(const std::string& path) {
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) throw Error("cannot read the sweep file " + path + ": " + std::strerror(errno));
  }
  std::istream& in = path == "-" ? std::cin : file;
  const std::string named = path == "-" ? "on standard input" : path;
  try {
    return sweep_grid_from_json(nlohmann::ordered_json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw Error("the sweep file " + named + " is not JSON: " + e.what());
  } catch (const Error& e) {
    throw Error("the sweep file " + named + ": " + e.what());
  }
}

std::vector<SweepPointConfig> expand_sweep(const SweepGrid& grid) {
  const size_t count = grid.points();
  std::vector<SweepPointConfig> points;
  points.reserve(count);
  for (size_t index = 0; index < count; ++index) {
    SweepPointConfig point;
    size_t rest = index;  // mixed radix, the last dimension the fastest
    std::vector<size_t> at(grid.dimensions.size());
    for (size_t d = grid.dimensions.size(); d-- > 0;) {
      at[d] = rest % grid.dimensions[d].second.size();
      rest /= grid.dimensions[d].second.size();
    }
    std::vector<std::pair<std::string, std::string>> given = grid.settings;
    for (size_t d = 0; d < grid.dimensions.size(); ++d) {
      point.values.emplace_back(grid.dimensions[d].first, grid.dimensions[d].second[at[d]]);
      given.push_back(point.values.back());
    }
    const std::string which = "sweep point " + std::to_string(index + 1) +  // counted from 1, as shown
                              (point.values.empty() ? "" : " (" + describe_point(point.values) + ")");

    std::vector<std::string> args;
    for (const auto& [setting, value] : given) {
      const std::string flag = "--" + setting;
      const auto found = settings_by_flag().find(flag);
      if (found == settings_by_flag().end()) throw Error(which + ": " + flag + " is no training setting");
      if (found->second) {  // on/off
        if (value != "true" && value != "false")
          throw Error(flag + ": is on or off: true or false, got '" + value + "' (" + which + ")");
        args.push_back(value == "true" ? flag : flag + "=false");  // false, over a base's true
      } else {
        args.push_back(flag + "=" + value);
      }
    }
    CLI::App train;
    TrainFlags flags;
    if (grid.base) {
      flags.config = *grid.base;
      flags.stem = stem_flag_value(grid.base->stem);
      flags.precision = precision_flags_of(grid.base->precision);
    }
    add_train_flags(&train, flags);
    std::reverse(args.begin(), args.end());  // CLI11 reads a vector from its end
    try {
      train.parse(args);
    } catch (const CLI::ParseError& e) {
      throw UsageError(std::string(e.what()) + " (" + which + ")");
    }
    point.config = flags.resolve();
    bool precision_given = false;
    for (const CLI::Option* option : train.get_options())
      precision_given = precision_given || (option->count() > 0 && option->get_group() == "Precision");
    if (grid.base && !precision_given) point.config.precision = grid.base->precision;  // as it is, whole
    try {
      point.config.data_dir = absolute_folder(point.config.data_dir);
      point.config.checkpoint_dir = absolute_folder(point.config.checkpoint_dir);
      validate(point.config);
    } catch (const SettingError& e) {
      throw Error(said_with_flag(e.setting(), e.what()) + " (" + which + ")");
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (" + which + ")");
    }
    points.push_back(std::move(point));
  }
  return points;
}

std::vector<std::string> drop_repeated_runs(std::vector<SweepPointConfig>& points) {
  // A point's configuration with what its precision ignores at the defaults: equal texts train equal runs.
  const auto as_trained = [](TrainConfig c) {
    if (c.precision.mode != PrecisionMode::AmpFp8) c.precision.fp8 = {};
    if (!c.precision.scales_loss()) c.precision.loss_scale = {LossScaleKind::Off};
    return config_to_json_text(c);
  };
  std::vector<std::string> dropped;
  std::map<std::string, std::string> first_of;  // a configuration -> the values of the first point to train it
  std::vector<SweepPointConfig> kept;
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string which = describe_point(points[i].values);
    if (const auto [at, first] = first_of.emplace(as_trained(points[i].config), which); !first)
      dropped.push_back(which + " (as " + at->second + ")");
    else
      kept.push_back(std::move(points[i]));
  }
  points = std::move(kept);
  return dropped;
}

std::string describe_point(const std::vector<std::pair<std::string, std::string>>& values) {
  std::string text;
  for (const auto& [setting, value] : values) text += (text.empty() ? "" : " ") + setting + "=" + value;
  return text;
}

std::string describe_point_json(const std::string& settings_json) {
  std::vector<std::pair<std::string, std::string>> values;
  try {
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(settings_json);
    for (const auto& [k, v] : j.at("values").items()) values.emplace_back(k, v.get<std::string>());
  } catch (const std::exception&) {
    return "";
  }
  return describe_point(values);
}

}  // namespace ampwb::cli
