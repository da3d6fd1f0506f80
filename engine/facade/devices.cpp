// The devices this machine trains on, each asked by starting its backend.
#include "facade/devices.h"

#include <exception>

#include "core/error.h"

namespace ampwb {

Capabilities capabilities_or_reason(DeviceChoice device) {
  Capabilities caps;
  try {
    caps = make_backend(device)->capabilities();
  } catch (const Error& e) {
    caps.device_name = device.name();
    caps.fp16.how = caps.bf16.how = caps.tf32.how = caps.fp8.how = e.what();
  }
  return caps;
}

std::vector<DeviceReport> device_reports() {
  std::vector<DeviceReport> reports;
  for (const DeviceInfo& device : list_devices()) {
    DeviceReport d{device, "", {}};
    try {
      const Capabilities caps = make_backend(device.id)->capabilities();
      for (const PrecisionModeInfo& mode : kPrecisionModes)
        d.modes.emplace_back(mode.name, mode_support(mode.mode, caps));
    } catch (const std::exception& e) {
      d.error = e.what();
    }
    reports.push_back(std::move(d));
  }
  return reports;
}

}  // namespace ampwb
