// amp-fp8's delayed scaling of one FP8 tensor over a run: the scale its cast multiplied by and the tensor's amax, on
// one log2 axis, at each probed step (each epoch's last, and every --numerics-every N steps). The scale follows
// the amax history with a delay: where the amax climbs faster than the scale falls, the tensor saturates.
#pragma once

#include <string>
#include <vector>

#include "metric_chart.h"

class QLogValueAxis;
class QValueAxis;

namespace ampwb::ui {

// One FP8 tensor of a layer: "layer1.0.conv1" and its role, "input", "weight" or "output_grad".
struct Fp8TensorName {
  std::string layer, role;
  bool operator==(const Fp8TensorName&) const = default;
};

// The FP8 tensors the runs recorded, in model order (the first probed step that has any), each once.
std::vector<Fp8TensorName> fp8_tensors(const RunList& runs);
// The tensor's numbers in a layer's record (count 0 where it was not in FP8).
const Fp8TensorNumerics& fp8_numbers(const LayerNumerics& layer, const std::string& role);
// "input", "weight", "output gradient"
QString fp8_role_text(const std::string& role);
// "conv1:input", as ChartOptions::fp8_tensor and `ampwb export chart --fp8-tensor` name a tensor; and back (a text
// without a colon names no tensor; the role "output gradient", as `ampwb show` heads it, is read as output_grad).
QString fp8_tensor_key(const Fp8TensorName& tensor);
Fp8TensorName fp8_tensor_of(const QString& key);

class Fp8ScalingChart : public MetricChart {
  Q_OBJECT
 public:
  explicit Fp8ScalingChart(QWidget* parent = nullptr);

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;
  bool follows_steps() const override { return false; }  // probed steps come with the epoch's records

 private:
  Fp8TensorName shown_;  // ChartOptions::fp8_tensor, or where the runs have no such tensor the first they have
  std::vector<QLineSeries*> scale_, amax_;
  QValueAxis* x_ = nullptr;
  QLogValueAxis* y_ = nullptr;
};

}  // namespace ampwb::ui
