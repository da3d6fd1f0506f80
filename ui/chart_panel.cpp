// ChartPanel: the chart grid, its shared controls and the export dialogs.
#include "chart_panel.h"

#include <algorithm>

#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QSettings>
#include <QSlider>
#include <QTimer>
#include <QVBoxLayout>

#include "chart_export.h"
#include "chart_factory.h"
#include "chart_style.h"
#include "divergence_view.h"
#include "file_dialogs.h"
#include "flow_layout.h"
#include "fp8_scaling_chart.h"
#include "loss_scale_chart.h"
#include "numerics_heatmap.h"
#include "plain_text.h"
#include "run_groups.h"
#include "whole_number_box.h"

namespace ampwb::ui {
namespace {

// The grid's page in its scroll area: it asks for no height by width, so the scroll area fits it to the view
// (down to its minimum) instead of giving it the preferred height of its wrapped captions and scrolling.
class FittedPage : public QWidget {
 public:
  bool hasHeightForWidth() const override { return false; }
};

}  // namespace

ChartPanel::ChartPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("chartPanel");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  auto* controls = new FlowLayout(nullptr, 16, 4);
  smoothing_ = new QSlider(Qt::Horizontal);
  smoothing_->setObjectName("smoothing");
  smoothing_->setRange(0, 99);
  smoothing_->setValue(60);
  smoothing_->setMaximumWidth(160);
  smoothing_->setToolTip(tr("Exponential moving average of the per-step curves (0 = raw)"));
  smoothing_value_ = new QLabel("0.60");
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) {
    smoothing_value_->setText(QString::number(v / 100.0, 'f', 2));
    refresh();
  });
  x_axis_ = new QComboBox;
  x_axis_->setObjectName("xAxis");
  for (XAxis axis : {XAxis::Step, XAxis::Epoch, XAxis::WallClock})
    x_axis_->addItem(x_axis_choice(axis), static_cast<int>(axis));
  x_axis_->setToolTip(
      tr("What the curves are drawn against: steps, epochs (fractional for per-step curves) or wall-clock seconds "
         "since the run started (time to accuracy). Per-epoch charts read Step as Epoch."));
  connect(x_axis_, &QComboBox::currentIndexChanged, this, &ChartPanel::refresh);
  histogram_kind_ = new QComboBox;
  histogram_kind_->setObjectName("histogramKind");
  histogram_kind_->addItem(tr("weight gradients"), "weight");
  histogram_kind_->addItem(tr("activation gradients"), "activation");
  connect(histogram_kind_, &QComboBox::currentIndexChanged, this, &ChartPanel::refresh);
  histogram_epoch_ = new WholeNumberBox(0, 100000);
  histogram_epoch_->setObjectName("histogramEpoch");
  histogram_epoch_->set_minimum_text(tr("latest"));
  connect(histogram_epoch_, &QSpinBox::valueChanged, this, &ChartPanel::refresh);
  group_by_ = new QComboBox;
  group_by_->setObjectName("groupBy");
  group_by_->setToolTip(
      tr("Runs sharing this setting's value form a group, drawn as its validation mean ± standard deviation"));
  group_by_->addItem(tr("none"), QString());
  group_by_->setVisible(false);  // until set_group_keys offers keys
  group_by_label_ = new QLabel(tr("Group by"));
  group_by_label_->setVisible(false);
  connect(group_by_, &QComboBox::currentIndexChanged, this, [this] {
    update_legend();
    refresh();
    Q_EMIT group_by_changed();
  });
  export_button_ = new QPushButton(tr("Export charts…"));
  export_button_->setObjectName("exportCharts");
  connect(export_button_, &QPushButton::clicked, this, &ChartPanel::export_all);
  export_button_->setEnabled(false);  // until refresh() draws something
  // Each label with its controls as one piece: on a narrow window the row wraps between pieces, never inside one.
  const auto piece = [](std::initializer_list<QWidget*> widgets) {
    auto* box = new QWidget;
    auto* row = new QHBoxLayout(box);
    row->setContentsMargins(0, 0, 0, 0);
    for (QWidget* w : widgets) row->addWidget(w);
    return box;
  };
  controls->addWidget(piece({new QLabel(tr("Against")), x_axis_}));
  controls->addWidget(piece({new QLabel(tr("Smoothing")), smoothing_, smoothing_value_}));
  controls->addWidget(
      piece({new QLabel(tr("Histogram")), histogram_kind_, new QLabel(tr("at epoch")), histogram_epoch_}));
  group_by_box_ = piece({group_by_label_, group_by_});
  group_by_box_->setVisible(false);
  controls->addWidget(group_by_box_);
  // Which of the runs' FP8 tensors the FP8 chart draws (some 60 in a ResNet-20); shown with that chart.
  fp8_tensor_ = new QComboBox;
  fp8_tensor_->setObjectName("fp8Tensor");
  fp8_tensor_->setToolTip(tr("The FP8 tensor whose scale and amax the FP8 chart draws"));
  fp8_tensor_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  connect(fp8_tensor_, &QComboBox::currentIndexChanged, this, &ChartPanel::refresh);
  fp8_tensor_box_ = piece({new QLabel(tr("FP8 tensor")), fp8_tensor_});
  fp8_tensor_box_->setVisible(false);
  controls->addWidget(fp8_tensor_box_);
  controls->addWidget(export_button_);
  layout->addLayout(controls);
  run_legend_ = new QLabel;
  run_legend_->setObjectName("runLegend");
  run_legend_->setWordWrap(true);
  run_legend_->setSizePolicy(QSizePolicy::Ignored,
                             QSizePolicy::Preferred);  // a name with no space is cut, not widening
  // At most four lines high, scrolling beyond (fit_legend): forty runs' names must leave the charts their room.
  legend_area_ = new QScrollArea;
  legend_area_->setWidget(run_legend_);
  legend_area_->setWidgetResizable(true);
  legend_area_->setFrameShape(QFrame::NoFrame);
  legend_area_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  legend_area_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);  // fit_legend() sets its height
  legend_area_->setVisible(false);
  layout->addWidget(legend_area_);

  // The grid scrolls rather than set the window's minimum size: on a small screen the charts take what there is.
  auto* grid_area = new FittedPage;
  auto* grid = grid_ = new QGridLayout(grid_area);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(4);
  for (const QString& metric : chart_metrics()) {
    MetricChart* chart = make_chart(metric, this);
    connect(chart, &MetricChart::export_requested, this, &ChartPanel::export_one);
    charts_.push_back(chart);
    QWidget* cell = chart;
    if (metric == "loss-scale") {
      // The skipped steps need a word of explanation right where they show.
      cell = loss_scale_cell_ = new QWidget;
      auto* v = new QVBoxLayout(cell);
      v->setContentsMargins(0, 0, 0, 0);
      v->setSpacing(0);
      v->addWidget(chart, 1);
      skipped_note_ = new QLabel;
      skipped_note_->setObjectName("skippedNote");
      skipped_note_->setWordWrap(true);
      skipped_note_->setContentsMargins(6, 0, 6, 2);
      skipped_note_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
      v->addWidget(skipped_note_);
    }
    if (metric == "fp8-scaling") {
      fp8_chart_ = chart;  // shown only for runs in FP8, its tensor chosen among the controls
      fp8_chart_->setVisible(false);
    } else {
      cells_.push_back(cell);
    }
  }
  // The per-layer numerics beside the charts, as tall as their rows (ResNet-18 has some 40 layers), or below them on
  // a narrow page (place_cells); under the numerics, the precision divergence measured at the end of the run.
  auto* layers = layers_ = new QWidget;
  auto* layers_layout = new QVBoxLayout(layers);
  layers_layout->setContentsMargins(0, 0, 0, 0);
  layers_run_ = new QComboBox;
  layers_run_->setObjectName("layersRun");
  layers_run_->setToolTip(tr("The run whose per-layer numerics and precision divergence show here"));
  layers_run_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  layers_run_->setMinimumContentsLength(14);
  connect(layers_run_, &QComboBox::currentIndexChanged, this, &ChartPanel::refresh);
  layers_run_box_ = piece({new QLabel(tr("Layers of")), layers_run_});
  static_cast<QHBoxLayout*>(layers_run_box_->layout())->setStretch(1, 1);
  layers_run_box_->setVisible(false);
  layers_layout->addWidget(layers_run_box_);
  numerics_ = new NumericsHeatmap;
  layers_layout->addWidget(numerics_, 1);
  divergence_ = new DivergenceView;
  layers_layout->addWidget(divergence_, 1);
  fp8_in_place_of_ = chart("data-wait");  // until runs in FP8 say otherwise (update_fp8_tensors)
  place_cells();
  // No row stretch: equal stretch would make the grid's minimum twice the taller row's (the one with the note),
  // where the charts (expanding) share the height alike anyway.
  auto* scroll = chart_scroll_ = new QScrollArea;
  scroll->setObjectName("chartScroll");
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidgetResizable(true);
  auto* page = new QWidget;  // the scroll area reads its layout's height for width, not its widget's
  auto* page_layout = new QVBoxLayout(page);
  page_layout->setContentsMargins(0, 0, 0, 0);
  page_layout->addWidget(grid_area);
  scroll->setWidget(page);
  scroll->viewport()->installEventFilter(this);  // its width decides the columns (fit_columns)
  skipped_note_->installEventFilter(this);       // its width decides its lines (fit_skipped_note)
  layout->addWidget(scroll, 1);
  update_skipped_note();

  throttle_ = new QTimer(this);
  throttle_->setSingleShot(true);
  connect(throttle_, &QTimer::timeout, this, [this] {
    if (refresh_pending_) refresh();
  });
}

void ChartPanel::set_runs(RunList runs) {
  runs_ = std::move(runs);
  std::vector<int64_t> ids;
  for (const RunSeries* r : runs_) ids.push_back(r->run_id);
  const bool other_runs = ids != run_ids_;
  run_ids_ = std::move(ids);
  update_legend();
  update_layers_runs();
  fit_columns();  // the "Layers of" choice may have widened the layers
  // The histogram's epoch is for these runs: kept when the same runs come again, read anew (a comparison follows a
  // run still training every few seconds), back to the latest for others, which may never have reached it.
  if (other_runs) histogram_epoch_->setValue(0);
  refresh();
}

void ChartPanel::update_legend() {
  // An entry breaks only between entries, never inside a name: its spaces are no-break spaces and its hyphens
  // no-break hyphens (QLabel's rich text ignores CSS white-space: nowrap).
  auto entry = [](const QColor& color, const std::string& text) {
    const QString whole =
        QString::fromStdString(text).toHtmlEscaped().replace(' ', QChar(0x00a0)).replace('-', QChar(0x2011));
    return QStringLiteral("<span style='color:%1; font-size:large'>■</span>&nbsp;%2").arg(color.name(), whole);
  };
  QStringList entries;
  if (runs_.size() > 1)
    for (size_t i = 0; i < runs_.size(); ++i) entries << entry(run_color(runs_[i]->colour_index(i)), runs_[i]->label);
  QString text = entries.join(QStringLiteral(" &nbsp;&nbsp; "));
  // The groups, each in its first run's colour: the bold mean lines and shaded bands on the loss and accuracy.
  const std::string key = options().group_by.toStdString();
  if (runs_.size() > 1 && !key.empty()) {
    QStringList groups;
    for (const RunGroup& g : group_runs(runs_, key)) {
      const auto first = std::find(runs_.begin(), runs_.end(), g.runs.front()) - runs_.begin();
      groups << entry(run_color(runs_[static_cast<size_t>(first)]->colour_index(static_cast<size_t>(first))),
                      group_label(key, g));
    }
    text += tr("<br>Groups (validation mean ± std): ") + groups.join(QStringLiteral(" &nbsp;&nbsp; "));
  }
  run_legend_->setText(text);
  legend_area_->setVisible(!entries.isEmpty());
  fit_legend();
}

void ChartPanel::fit_legend() {
  // As high as its lines at the panel's width, up to four; a scroll area does not follow a label's height for width.
  const int lines = run_legend_->heightForWidth(std::max(1, width() - 12));
  legend_area_->setFixedHeight(std::clamp(lines, 0, 4 * run_legend_->fontMetrics().lineSpacing() + 8));  // -1: no text
}

void ChartPanel::update_layers_runs() {
  const QSignalBlocker block(layers_run_);
  const QVariant chosen = layers_run_->currentData();
  layers_run_->clear();
  for (const RunSeries* r : runs_)
    layers_run_->addItem(QString::fromStdString(r->label), QVariant::fromValue(r->run_id));
  int index = layers_run_->findData(chosen);
  if (index < 0) {  // a run whose layers differ from FP32's: one in a low-precision mode
    const auto low = std::find_if(runs_.begin(), runs_.end(), [](const RunSeries* r) {
      return mode_info(r->config.precision.mode).format != NumberFormat::Fp32;
    });
    index = low == runs_.end() ? 0 : static_cast<int>(low - runs_.begin());
  }
  layers_run_->setCurrentIndex(index);
  layers_run_box_->setVisible(runs_.size() > 1);
}

const RunSeries* ChartPanel::layers_run() const {
  if (runs_.empty()) return nullptr;
  const int index = layers_run_->currentIndex();
  return index >= 0 && index < static_cast<int>(runs_.size()) ? runs_[static_cast<size_t>(index)] : runs_.front();
}

ChartOptions ChartPanel::options() const {
  ChartOptions o;
  o.smoothing = smoothing_->value() / 100.0;
  o.group_by = group_by_->currentData().toString();
  o.histogram_kind = histogram_kind_->currentData().toString();
  o.histogram_epoch = histogram_epoch_->value();
  o.x_axis = static_cast<XAxis>(x_axis_->currentData().toInt());
  o.fp8_tensor = fp8_tensor_->currentData().toString();
  return o;
}

void ChartPanel::set_x_axis(XAxis axis) { x_axis_->setCurrentIndex(x_axis_->findData(static_cast<int>(axis))); }

void ChartPanel::set_smoothing(double weight) { smoothing_->setValue(static_cast<int>(weight * 100 + 0.5)); }

void ChartPanel::set_group_keys(const std::vector<std::string>& keys) {
  const bool seed_varies = std::find(keys.begin(), keys.end(), "seed") != keys.end();
  QStringList offered{QString()}, before;
  if (seed_varies) offered << QString(kAllButSeed);
  for (const std::string& key : keys) offered << QString::fromStdString(key);
  for (int i = 0; i < group_by_->count(); ++i) before << group_by_->itemData(i).toString();
  // The same runs read again, offering the same keys, keep the grouping chosen for them.
  const bool keep = offered == before && run_ids_ == grouped_run_ids_;
  grouped_run_ids_ = run_ids_;
  if (!keep) {
    const QSignalBlocker block(group_by_);
    group_by_->clear();
    group_by_->addItem(tr("none"), QString());
    // Runs that differ only by seed: the spread over seeds, the noise floor any other difference must beat.
    if (seed_varies) group_by_->addItem(tr(kAllButSeed), QString(kAllButSeed));
    for (const std::string& key : keys)
      group_by_->addItem(QString::fromStdString(key_label(key)), QString::fromStdString(key));
    group_by_->setCurrentIndex(seed_varies && keys.size() == 1 ? 1 : 0);
  }
  group_by_->setVisible(!keys.empty());
  group_by_label_->setVisible(!keys.empty());
  group_by_box_->setVisible(!keys.empty());
  update_legend();
  refresh();
  Q_EMIT group_by_changed();
}

void ChartPanel::set_group_by(const QString& key) {
  const int index = group_by_->findData(key);
  if (index >= 0) group_by_->setCurrentIndex(index);
}

MetricChart* ChartPanel::chart(const QString& metric) const {
  for (MetricChart* c : charts_)
    if (c->metric_key() == metric) return c;
  return nullptr;
}

void ChartPanel::refresh() {
  QElapsedTimer clock;
  clock.start();
  refresh_pending_ = false;
  // Nothing drawn, nothing to export: no run yet, a comparison of none, a deleted run's charts gone.
  const bool drawn = std::any_of(runs_.begin(), runs_.end(),
                                 [](const RunSeries* r) { return !r->steps.empty() || !r->epochs.empty(); });
  export_button_->setEnabled(drawn);
  export_button_->setToolTip(drawn ? QString() : tr("Nothing to export yet: train a run, or open one in the Runs tab"));
  update_fp8_tensors();  // before options(): they name the tensor chosen
  const ChartOptions o = options();
  for (MetricChart* c : charts_) c->update_from(runs_, o);
  const RunSeries* layers = layers_run();
  const RunList layers_runs = layers ? RunList{layers} : RunList{};
  numerics_->update_from(layers_runs);
  divergence_->update_from(layers_runs);
  update_skipped_note();
  const qint64 cost = clock.elapsed();
  if (cost > 8) throttle_->start(static_cast<int>(std::min<qint64>(1000, 2 * cost)));
}

void ChartPanel::refresh_soon() {
  if (throttle_->isActive())
    refresh_pending_ = true;
  else
    refresh();
}

bool ChartPanel::eventFilter(QObject* watched, QEvent* event) {
  // After the resize, not within it: new columns change the page, which may bring or take the scroll bar.
  if (watched == chart_scroll_->viewport() && event->type() == QEvent::Resize)
    QMetaObject::invokeMethod(this, &ChartPanel::fit_columns, Qt::QueuedConnection);
  // A new width may wrap the note on skipped steps anew; its own new height may not.
  if (watched == skipped_note_ && event->type() == QEvent::Resize &&
      static_cast<QResizeEvent*>(event)->oldSize().width() != skipped_note_->width())
    QMetaObject::invokeMethod(this, &ChartPanel::fit_skipped_note, Qt::QueuedConnection);
  return QWidget::eventFilter(watched, event);
}

void ChartPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fit_legend();
  refresh();  // the decimation follows the plot's width
}

void ChartPanel::place_cells() {
  const int columns = narrow_ ? 2 : 3;
  for (QWidget* w : cells_) grid_->removeWidget(w);
  for (QWidget* w : {fp8_chart_, layers_}) grid_->removeWidget(w);
  for (size_t i = 0; i < cells_.size(); ++i) {
    const int row = static_cast<int>(i) / columns, column = static_cast<int>(i) % columns;
    grid_->addWidget(cells_[i], row, column);
    if (cells_[i] == fp8_in_place_of_) grid_->addWidget(fp8_chart_, row, column);
  }
  const int rows = static_cast<int>(cells_.size() + columns - 1) / columns;
  if (narrow_)
    grid_->addWidget(layers_, rows, 0, 1, columns);  // below the charts, as wide as they are
  else
    grid_->addWidget(layers_, 0, columns, rows, 1);  // beside them, as tall
  for (int c = 0; c < 4; ++c) grid_->setColumnStretch(c, c < columns || !narrow_ ? 1 : 0);
}

void ChartPanel::fit_columns() {
  const int room = chart_scroll_->viewport()->width();
  if (!narrow_) {
    wide_minimum_ = grid_->minimumSize().width();
    if (room >= wide_minimum_) return;
  } else if (room < wide_minimum_) {
    return;
  }
  narrow_ = !narrow_;
  place_cells();
  // The layers' own minimum may have grown while they were below: three abreast must still fit.
  if (!narrow_ && room < (wide_minimum_ = grid_->minimumSize().width())) {
    narrow_ = true;
    place_cells();
  }
}

void ChartPanel::update_fp8_tensors() {
  const std::vector<Fp8TensorName> tensors = fp8_tensors(runs_);
  // Where no run scales its loss (amp-fp8 alone: its tensors' scales do that work), the FP8 chart takes the
  // loss-scale chart's place, a flat line at 1; beside runs that do, the data-wait chart's (a comparison of
  // precisions is about their numerics, and the loader's wait is much the same in each).
  const bool scaled =
      std::any_of(runs_.begin(), runs_.end(), [](const RunSeries* r) { return r->config.precision.scales_loss(); });
  const bool replaces = !tensors.empty() && !scaled;
  QWidget* replaced = replaces ? loss_scale_cell_ : chart("data-wait");
  if (replaced != fp8_in_place_of_) {
    fp8_in_place_of_ = replaced;
    place_cells();
  }
  loss_scale_cell_->setVisible(!replaces);
  chart("data-wait")->setVisible(tensors.empty() || replaces);
  fp8_chart_->setVisible(!tensors.empty());
  fp8_tensor_box_->setVisible(!tensors.empty());
  QStringList offered, names;
  for (int i = 0; i < fp8_tensor_->count(); ++i) offered << fp8_tensor_->itemData(i).toString();
  for (const Fp8TensorName& t : tensors) names << fp8_tensor_key(t);
  if (names == offered) return;
  const QSignalBlocker block(fp8_tensor_);
  const QString chosen = fp8_tensor_->currentData().toString();
  fp8_tensor_->clear();
  for (size_t i = 0; i < tensors.size(); ++i)
    fp8_tensor_->addItem(QString::fromStdString(tensors[i].layer) + " · " + fp8_role_text(tensors[i].role), names[i]);
  fp8_tensor_->setCurrentIndex(std::max(0, fp8_tensor_->findData(chosen)));
}

void ChartPanel::fit_skipped_note() {
  // As many lines as its text takes at its width, one at the least: a short note leaves its chart the line its x axis'
  // title needs, and a live run's new count of skipped steps re-lays out the charts only when it takes another line.
  const QFontMetrics metrics = skipped_note_->fontMetrics();
  const QRect room(0, 0, std::max(1, skipped_note_->contentsRect().width()), 1 << 20);
  const int height =
      std::max(metrics.boundingRect(room, Qt::TextWordWrap, skipped_note_->text()).height(), metrics.lineSpacing()) + 4;
  if (skipped_note_->height() != height) skipped_note_->setFixedHeight(height);
}

void ChartPanel::update_skipped_note() {
  int64_t total = 0, early = 0;
  bool scaled = false;  // some run scales its loss: only those skip steps
  for (const RunSeries* r : runs_) {
    const SkippedSteps s = count_skipped(*r);
    total += s.total;
    early += s.early;
    scaled = scaled || r->config.precision.scales_loss();
  }
  // Short enough for two lines under a narrow chart (a 1280×720 screen); the explanation is the tooltip.
  if (runs_.empty()) {  // nothing shown, nothing to say of it
    skipped_note_->clear();
    skipped_note_->setToolTip({});
  } else if (total == 0 && !scaled) {
    skipped_note_->setText(tr("No loss scaling: the scale stays 1, no step skipped."));
    skipped_note_->setToolTip(
        tr("What FP16 would do: with FP16 and dynamic loss scaling, a step whose gradients overflow (inf/NaN) is "
           "skipped and the scale halved. FP32, TF32 and BF16 have FP32's range and scale nothing: their scale stays "
           "1."));
  } else if (std::all_of(runs_.begin(), runs_.end(),
                         [](const RunSeries* r) { return r->run_id == 0 && r->steps.empty(); })) {  // none begun
    skipped_note_->setText(tr("Dynamic loss scaling: a skipped step shows as a red dot."));
    skipped_note_->setToolTip(
        tr("With dynamic loss scaling, a step whose gradients overflow (inf/NaN) is skipped and the scale halved."));
  } else if (total == 0) {
    skipped_note_->setText(tr("No skipped steps: no gradients overflowed."));
    skipped_note_->setToolTip(
        tr("With dynamic loss scaling, a step whose gradients overflow (inf/NaN) is skipped and the scale halved."));
  } else {
    skipped_note_->setText((total == 1
                                ? tr("■ 1 skipped step, %1 in the first 50: an overflow").arg(early)
                                : tr("■ %1 skipped steps, %2 in the first 50: overflows").arg(total).arg(early)));
    skipped_note_->setToolTip(
        tr("Gradients overflowed (inf/NaN), so the optimizer step was skipped and the scale backed off. The first "
           "steps usually overflow while the scale calibrates: expected. Many later ones mean the scale keeps hitting "
           "FP16's limit."));
  }
  fit_skipped_note();
}

void ChartPanel::export_one(MetricChart* chart) {
  QSettings settings;
  const QString dir = settings.value("export/folder", QDir::homePath()).toString();
  const QStringList formats{"png", "svg", "pdf"};
  const QStringList filters{tr("PNG image (*.png)"), tr("SVG drawing (*.svg)"), tr("PDF document (*.pdf)")};
  // The format chosen last time, offered first.
  const int last = std::max<int>(0, formats.indexOf(settings.value("export/format", "png").toString()));
  QString selected = filters[last];
  const QString path = choose_save_file(this, tr("Export %1").arg(chart->title()),
                                        QDir(dir).filePath(prefix_ + "-" + chart->metric_key() + "." + formats[last]),
                                        filters.join(";;"), &selected);
  if (path.isEmpty()) return;
  settings.setValue("export/folder", QFileInfo(path).absolutePath());
  try {
    export_chart(chart->metric_key(), runs_, options(), path);
    settings.setValue("export/format", export_format(path));
    Q_EMIT status_message(tr("Exported %1").arg(path));
  } catch (const std::exception& e) {
    plain_message(this, QMessageBox::Warning, tr("Export"), QString::fromUtf8(e.what()));  // it quotes the path
  }
}

void ChartPanel::export_all() {
  if (std::all_of(runs_.begin(), runs_.end(),
                  [](const RunSeries* r) { return r->steps.empty() && r->epochs.empty(); })) {
    Q_EMIT status_message(tr("Nothing to export yet: train a run, or open one in the Runs tab"));
    return;
  }
  QSettings settings;
  const QString folder =
      choose_folder(this, tr("Export all charts into"), settings.value("export/folder", QDir::homePath()).toString());
  if (folder.isEmpty()) return;
  bool ok = false;
  const QStringList formats{"png", "svg", "pdf"};
  const int last = std::max<int>(0, formats.indexOf(settings.value("export/format", "png").toString()));
  const QString format = QInputDialog::getItem(this, tr("Export all charts"), tr("Format"), formats, last, false, &ok);
  if (!ok || !confirm_replacing(this, tr("Export all charts"), chart_export_files(runs_, folder, prefix_, format)))
    return;
  settings.setValue("export/folder", folder);
  settings.setValue("export/format", format);
  try {
    const QStringList files = export_all_charts(runs_, options(), folder, prefix_, format);
    Q_EMIT status_message(tr("Exported %1 charts into %2").arg(files.size()).arg(folder));
  } catch (const std::exception& e) {
    plain_message(this, QMessageBox::Warning, tr("Export"), QString::fromUtf8(e.what()));
  }
}

}  // namespace ampwb::ui
