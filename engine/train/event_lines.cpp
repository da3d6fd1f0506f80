// EventLineWriter and replay_event_line: each line {"event": KIND, ...the record's fields...}.
#include "train/event_lines.h"

#include <unistd.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ampwb {
namespace {

nlohmann::json event(const char* kind, nlohmann::json body) {
  body["event"] = kind;
  return body;
}

// JSON writes NaN and infinity as null: a step that overflowed has them (its loss, its gradient norm), read back
// as NaN.
nlohmann::json nulls_as_nan(nlohmann::json j) {
  for (auto& [key, value] : j.items())
    if (value.is_null()) value = std::numeric_limits<double>::quiet_NaN();
  return j;
}

}  // namespace

void EventLineWriter::write(const std::string& line) {
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);  // a reader follows the run as it goes
}

void EventLineWriter::on_start(const RunInfo& info) {
  write(event("start", {{"info", info}, {"run_id", run_id_ ? run_id_() : 0}, {"pid", ::getpid()}}).dump());
}
void EventLineWriter::on_step(const StepReport& step) { write(event("step", step).dump()); }
void EventLineWriter::on_epoch(const EpochReport& epoch) { write(event("epoch", epoch).dump()); }
void EventLineWriter::on_validation(const ValidationProgress& v) {
  write(event("validation",
              {{"epoch", v.epoch}, {"images_done", v.images_done}, {"images", v.images}, {"seconds", v.seconds}})
            .dump());
}
void EventLineWriter::on_overflow(const OverflowReport& overflow) {
  write(event("overflow", {{"report", overflow}}).dump());
}
void EventLineWriter::on_epoch_times(const EpochTimes& times) {
  write(event("epoch_times", {{"times", times}}).dump());
}
void EventLineWriter::on_checkpoint(const CheckpointInfo& c) {
  write(event("checkpoint", {{"resume_epoch", c.resume_epoch}, {"step", c.step}, {"path", c.path}}).dump());
}
void EventLineWriter::on_note(const std::string& note) { write(event("note", {{"note", note}}).dump()); }
void EventLineWriter::on_end(const RunEnd& end) {
  write(event("end", {{"status", end.status}, {"reason", end.reason}, {"setting", end.setting}}).dump());
}

EventLinesStart replay_event_line(const std::string& line, TrainObserver& observer) {
  if (line.empty() || line.front() != '{') return {};
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("event")) return {};
  const std::string kind = j.at("event").get<std::string>();
  try {
    if (kind == "start") {
      observer.on_start(j.at("info").get<RunInfo>());
      return {j.value("run_id", int64_t{0}), j.value("pid", int64_t{0})};
    }
    if (kind == "step") {
      observer.on_step(nulls_as_nan(j).get<StepReport>());
    } else if (kind == "epoch") {
      observer.on_epoch(nulls_as_nan(j).get<EpochReport>());
    } else if (kind == "validation") {
      observer.on_validation({.epoch = j.at("epoch").get<int>(),
                              .images_done = j.at("images_done").get<int64_t>(),
                              .images = j.at("images").get<int64_t>(),
                              .seconds = j.at("seconds").get<double>()});
    } else if (kind == "overflow") {
      observer.on_overflow(j.at("report").get<OverflowReport>());
    } else if (kind == "epoch_times") {
      observer.on_epoch_times(j.at("times").get<EpochTimes>());
    } else if (kind == "checkpoint") {
      observer.on_checkpoint(
          {j.at("resume_epoch").get<int>(), j.at("step").get<int64_t>(), j.at("path").get<std::string>()});
    } else if (kind == "note") {
      observer.on_note(j.at("note").get<std::string>());
    } else if (kind == "end") {
      observer.on_end(
          {j.at("status").get<RunStatus>(), j.at("reason").get<std::string>(), j.at("setting").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("a " + kind + " event of the training process could not be read: " + e.what());
  }
  return {};
}

}  // namespace ampwb
