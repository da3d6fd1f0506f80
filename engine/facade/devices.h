// The facade's devices: what this machine trains on and what each device can run, asked of the backends here so
// that the front ends (ui/, app/), which include no backend/ header, never start a backend themselves.
// DeviceInfo, Capabilities, list_devices() and gpu_absence_reason() reach them through this header.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "train/precision_support.h"

namespace ampwb {

// A device's capabilities, its backend started once to ask. Never throws ampwb::Error: where the backend does not
// start (a GPU that cannot be used), FP32 only, each 16-bit format's `how` the reason.
Capabilities capabilities_or_reason(DeviceChoice device);

// One device with its verdict on every precision mode, as `ampwb devices` lists it.
struct DeviceReport {
  DeviceInfo device;
  std::string error;  // why the device cannot be used after all (its backend did not start); empty when it can
  std::vector<std::pair<std::string, ModeSupport>> modes;  // by mode name, in the order of kPrecisionModes
};
std::vector<DeviceReport> device_reports();  // every device list_devices() finds, the CPU first

}  // namespace ampwb
