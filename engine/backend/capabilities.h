// What a backend can do, asked once per backend: its device, and how it computes in each number format.
#pragma once

#include <cstddef>
#include <string>

#include "core/tensor.h"

namespace ampwb {

// How a backend computes in one number format, asked once per backend: the trainer, `ampwb bench`, the CLI and
// the GUI read this rather than checking devices and instruction sets themselves.
struct ComputeSupport {
  bool available = false;    // training in this format is possible here
  bool native = false;       // the hardware computes in it (else emulated: its values, FP32 arithmetic)
  std::string how;           // in words; when unavailable, the reason
  double speed_vs_fp32 = 0;  // a training step's speed against FP32 on such hardware, measured; 0 if unknown
  std::string speed_source;  // where that figure was measured
};
struct Capabilities {
  Device device;            // whose capabilities these are
  std::string device_name;  // the CPU's model or the GPU's name
  std::string isa;          // the CPU instruction set oneDNN uses, or the GPU's compute capability ("sm_90")
  size_t memory_bytes = 0;  // device memory (the CPU's: physical RAM)
  ComputeSupport fp16, bf16, tf32;
  ComputeSupport fp8;                         // E4M3 and E5M2 convolutions and matrix products (the amp-fp8 mode)
  bool updates_read_16bit_gradients = false;  // sgd_update and adam_update take a 16-bit grad (ParamUpdate)
};

}  // namespace ampwb
