// Fp8ScalingChart: one FP8 tensor's scale and amax at each probed step (log2 axis).
#include "fp8_scaling_chart.h"

#include <QChart>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_style.h"

namespace ampwb::ui {
namespace {

constexpr const char* kRoles[] = {"input", "weight", "output_grad"};

// Where a probed step goes on the x axis: as its step report would (step_x), or by its number where the report is
// not held (a wall clock then has no x for it: NaN).
double probed_x(const RunSeries& run, int64_t step, XAxis axis) {
  const auto at = std::lower_bound(run.steps.begin(), run.steps.end(), step,
                                   [](const StepReport& s, int64_t n) { return s.step < n; });
  if (at != run.steps.end() && at->step == step) return step_x(run, *at, axis);
  if (axis == XAxis::Step) return static_cast<double>(step);
  if (axis == XAxis::Epoch && run.steps_per_epoch > 0)
    return static_cast<double>(step + 1) / static_cast<double>(run.steps_per_epoch);
  return NAN;
}

}  // namespace

std::vector<Fp8TensorName> fp8_tensors(const RunList& runs) {
  std::vector<Fp8TensorName> names;
  for (const RunSeries* run : runs) {
    const std::vector<LayerNumerics>& records = run->layer_numerics;
    // The first probed step holding an FP8 tensor: every probed step of a run records the same layers.
    const auto first = std::find_if(records.begin(), records.end(), [](const LayerNumerics& n) {
      return n.fp8_input.count || n.fp8_weight.count || n.fp8_output_grad.count;
    });
    // Merged in model order: a tensor the runs before had not (conv1 and fc, in FP8 in this run alone) goes after
    // this run's tensor before it, not at the end.
    size_t after = 0;
    for (auto it = first; it != records.end() && it->step == first->step; ++it)
      for (const char* role : kRoles) {
        if (fp8_numbers(*it, role).count == 0) continue;
        const Fp8TensorName name{it->layer, role};
        const auto found = std::find(names.begin(), names.end(), name);
        if (found != names.end()) {
          after = std::max(after, static_cast<size_t>(found - names.begin()) + 1);
        } else {
          names.insert(names.begin() + static_cast<std::ptrdiff_t>(after), name);
          ++after;
        }
      }
  }
  return names;
}

const Fp8TensorNumerics& fp8_numbers(const LayerNumerics& layer, const std::string& role) {
  if (role == "input") return layer.fp8_input;
  if (role == "weight") return layer.fp8_weight;
  return layer.fp8_output_grad;
}

QString fp8_role_text(const std::string& role) {
  return role == "output_grad" ? QObject::tr("output gradient") : QString::fromStdString(role);
}

QString fp8_tensor_key(const Fp8TensorName& tensor) { return QString::fromStdString(tensor.layer + ":" + tensor.role); }

Fp8TensorName fp8_tensor_of(const QString& key) {
  const qsizetype colon = key.lastIndexOf(':');
  if (colon < 0) return {};
  const QString role = key.mid(colon + 1);
  // `ampwb show` heads the role "output gradient": that is read as the role it names.
  return {key.left(colon).toStdString(), role == QLatin1String("output gradient") ? "output_grad" : role.toStdString()};
}

Fp8ScalingChart::Fp8ScalingChart(QWidget* parent)
    : MetricChart("fp8-scaling", tr("FP8 scale and amax (log2)"), parent) {}

void Fp8ScalingChart::rebuild(const RunList& runs, const ChartOptions& options) {
  const std::vector<Fp8TensorName> tensors = fp8_tensors(runs);
  const Fp8TensorName wanted = fp8_tensor_of(options.fp8_tensor);
  shown_ = std::find(tensors.begin(), tensors.end(), wanted) != tensors.end() ? wanted
           : tensors.empty()                                                  ? Fp8TensorName{}
                                                                              : tensors.front();
  // Several runs: their colours are the legend, so the title says which line is which, as the loss chart's does.
  const QString what = multi(runs) ? tr("FP8 scale \u2014 and amax - - (log2)") : tr("FP8 scale and amax (log2)");
  chart()->setTitle(shown_.layer.empty() ? what + tr(": no FP8 tensors recorded")
                                         : what + QStringLiteral(": %1 %2").arg(QString::fromStdString(shown_.layer),
                                                                                fp8_role_text(shown_.role)));
  x_ = new QValueAxis;
  label_x_axis(x_, options.x_axis, 0);
  y_ = new QLogValueAxis;
  y_->setBase(2);
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  scale_.clear();
  amax_.clear();
  const bool many = multi(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    const QColor color = many ? run_color(runs[i]->colour_index(i)) : train_color();
    QLineSeries* scale = add_line(who + tr("scale"), curve_pen(color, 2.0), x_, y_);
    QLineSeries* amax =
        add_line(who + tr("amax"), curve_pen(many ? color : validation_color(), 2.0, Qt::DashLine), x_, y_);
    for (QLineSeries* line : {scale, amax}) {
      line->setPointsVisible(true);  // a point a probed step: few where only epochs' last steps were probed
      show_values_on_hover(line, x_axis_unit(options.x_axis), 6);
    }
    scale_.push_back(scale);
    amax_.push_back(amax);
  }
}

void Fp8ScalingChart::refresh(const RunList& runs, const ChartOptions& options) {
  double x_max = 1, y_min = INFINITY, y_max = -INFINITY;
  for (size_t i = 0; i < runs.size(); ++i) {
    QList<QPointF> scale, amax;
    for (const LayerNumerics& n : runs[i]->layer_numerics) {
      if (n.layer != shown_.layer) continue;
      const Fp8TensorNumerics& t = fp8_numbers(n, shown_.role);
      const double x = probed_x(*runs[i], n.step, options.x_axis);
      if (t.count == 0 || !std::isfinite(x)) continue;
      for (auto [list, y] : {std::pair{&scale, t.scale}, std::pair{&amax, t.amax}}) {
        if (!(y > 0) || !std::isfinite(y)) continue;  // a log axis has no place for 0 (a tensor of zeros)
        list->append(QPointF(x, y));
        y_min = std::min(y_min, y);
        y_max = std::max(y_max, y);
      }
      x_max = std::max(x_max, x);
    }
    scale_[i]->replace(scale);
    amax_[i]->replace(amax);
  }
  set_nice_range(x_, 0, label_x_axis(x_, options.x_axis, x_max));
  set_power_of_two_range(y_, y_min, y_max);
}

}  // namespace ampwb::ui
