// How a run's or a benchmark's steps are issued to their device: when the host waits for a step's numbers, and
// whether deferred steps are captured as CUDA graphs. Both are settings of TrainConfig and BenchConfig; plan_steps
// (train/mixed_precision_step.h) turns them into a StepPlan for one device.
#pragma once

#include <array>
#include <cstdint>

#include "core/choices.h"

namespace ampwb {

enum class HostSync : uint8_t { Auto, EveryStep, Deferred };

template <>
struct ChoiceTable<HostSync> {
  static constexpr const char* what = "host sync";
  static constexpr std::array<Choice<HostSync>, 3> rows = {{
      {HostSync::Auto, "auto", "auto", "deferred on a GPU where the settings allow, every step on the CPU"},
      {HostSync::EveryStep, "every-step", "every step",
       "the host reads each step's numbers before the next is queued, so a skipped step names the layers that "
       "overflowed"},
      {HostSync::Deferred, "deferred", "deferred",
       "never: the loss scale stays on the device and the numbers are read one step late; refused where the "
       "settings need the host, such as gradient clipping"},
  }};
};

enum class CudaGraphs : uint8_t { Auto, On, Off };

template <>
struct ChoiceTable<CudaGraphs> {
  static constexpr const char* what = "CUDA graphs";
  static constexpr std::array<Choice<CudaGraphs>, 3> rows = {{
      {CudaGraphs::Auto, "auto", "auto", "on where the steps are deferred on a GPU"},
      {CudaGraphs::On, "on", "on",
       "each batch shape's deferred step captured once as a CUDA graph and replayed: the same arithmetic without a "
       "launch per op"},
      {CudaGraphs::Off, "off", "off", "every step op by op"},
  }};
};

}  // namespace ampwb
