// The precision policy.
#include "amp/policy.h"

#include <sstream>

#include "core/error.h"

namespace ampwb {
namespace {
const char* rule_name(CastRule r) {
  switch (r) {
    case CastRule::LowPrecision:
      return "low precision";
    case CastRule::Fp32:
      return "fp32";
    case CastRule::FollowInput:
      return "input's type";
    case CastRule::Widest:
      return "widest input";
  }
  return "?";
}
}  // namespace

PrecisionPolicy::PrecisionPolicy() : config_(precision_preset(PrecisionMode::Fp32)) {}

PrecisionPolicy::PrecisionPolicy(const PrecisionConfig& config) : config_(config), low_(mode_info(config.mode).low) {}

DType PrecisionPolicy::compute_dtype(OpClass op, DType input) const {
  if (low_ == DType::F32) return DType::F32;
  switch (kAutocastTable[static_cast<size_t>(op)].autocast) {
    case CastRule::LowPrecision:
      return low_;
    case CastRule::Fp32:
      return DType::F32;
    case CastRule::FollowInput:
    case CastRule::Widest:
      return input;
  }
  return input;
}

std::string PrecisionPolicy::describe() const {
  std::ostringstream out;
  const LossScaleConfig& s = config_.loss_scale;
  out << "precision " << mode_name(config_.mode) << ": compute type " << dtype_name(low_) << ", master weights "
      << (config_.master_weights ? "FP32" : "off") << ", loss scaling " << choice_name(s.kind);
  if (s.kind == LossScaleKind::Static) out << " (" << s.init_scale << ")";
  if (s.kind == LossScaleKind::Dynamic)
    out << " (initial " << s.init_scale << ", x" << s.growth_factor << " every " << s.growth_interval
        << " clean steps, x" << s.backoff_factor << " on overflow" << (s.hysteresis > 1 ? ", hysteresis " : "")
        << (s.hysteresis > 1 ? std::to_string(s.hysteresis) : "") << ")";
  out << "\n";
  if (low_ == DType::F32) return out.str() + "  every op in fp32\n";
  if (fp8()) {
    const DelayedScalingSettings& d = config_.fp8.scaling;
    out << "  conv2d, linear: e4m3 inputs and weights, " << fp8_format_name(config_.fp8.gradient_format())
        << " output gradients, FP32 accumulation, per-tensor delayed scaling (amax history " << d.history_length
        << " steps, margin " << d.margin << ", rule " << choice_name(d.rule) << "); "
        << (config_.fp8.first_and_last ? "the first and last layers too" : "the first and last layers in bf16") << "\n";
  }
  for (const PolicyRow& row : kAutocastTable)
    out << "  " << row.name << ": " << rule_name(row.autocast) << " -> " << dtype_name(compute_dtype(row.op, low_))
        << "  (" << row.why << ")\n";
  if (everything_low()) out << "  batch-norm scale, shift and running statistics stored in fp16\n";
  return out.str();
}

}  // namespace ampwb
