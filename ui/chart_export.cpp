// Chart export: lay out a fresh chart offscreen, then render its scene into an image, an SVG or a PDF painter.
#include "chart_export.h"

#include <QApplication>
#include <QBuffer>
#include <QDir>
#include <QFileInfo>
#include <QFontMetrics>
#include <QGraphicsScene>
#include <QGraphicsTextItem>
#include <QImage>
#include <QLegend>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <algorithm>
#include <memory>
#include <vector>

#include "chart_factory.h"
#include "chart_style.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "fp8_scaling_chart.h"
#include "run_groups.h"

namespace ampwb::ui {
namespace {

// The chart's background colour (themes use gradients): what a raster export is filled with first.
QColor background(const QBrush& brush) {
  if (const QGradient* g = brush.gradient(); g && !g->stops().isEmpty()) return g->stops().first().second;
  return brush.style() == Qt::NoBrush ? QColor(Qt::white) : brush.color();
}

// A comparison's runs (and its groups) by colour. In the GUI the chart panel shows them above every chart, so a
// chart of several runs has no legend of its own: an exported one draws this under the chart.
struct LegendEntry {
  QColor color;
  QString text;
};

// The groups' entries only under a chart that draws them (the epoch-time chart has no mean ± std). A chart of one
// run, drawn in its curves' own colours, names the run without a colour: a file shared alone says whose it is.
std::vector<LegendEntry> run_legend(const RunList& runs, const ChartOptions& options, bool groups) {
  std::vector<LegendEntry> entries;
  if (runs.size() == 1 && !runs[0]->label.empty())
    entries.push_back({Qt::transparent, "run " + QString::fromStdString(runs[0]->label)});
  if (runs.size() < 2) return entries;
  for (size_t i = 0; i < runs.size(); ++i)
    entries.push_back({run_color(runs[i]->colour_index(i)), QString::fromStdString(runs[i]->label)});
  const std::string key = options.group_by.toStdString();
  if (groups && !key.empty())
    for (const RunGroup& g : group_runs(runs, key)) {
      const auto first = std::find(runs.begin(), runs.end(), g.runs.front()) - runs.begin();
      entries.push_back({run_color(runs[static_cast<size_t>(first)]->colour_index(static_cast<size_t>(first))),
                         QStringLiteral("mean ± std: ") + QString::fromStdString(group_label(key, g))});
    }
  return entries;
}

// Lays the entries out in lines across `width`, from `top` down, and draws them where `painter` is given. Returns
// the height they take (0 for none).
int draw_legend(const std::vector<LegendEntry>& entries, QPainter* painter, const QFont& font, int width, int top) {
  if (entries.empty()) return 0;
  const QFontMetrics metrics(font);
  const int line = metrics.height() * 3 / 2, box = metrics.height() * 2 / 3, gap = metrics.height();
  int x = gap, y = top;
  for (const LegendEntry& e : entries) {
    const int text_width = metrics.horizontalAdvance(e.text), entry_width = box + gap / 2 + text_width;
    if (x > gap && x + entry_width > width - gap) {
      x = gap;
      y += line;
    }
    if (painter) {
      painter->fillRect(x, y + (line - box) / 2, box, box, e.color);
      painter->setFont(font);
      painter->setPen(Qt::black);
      painter->drawText(QRect(x + box + gap / 2, y, text_width + 1, line), Qt::AlignLeft | Qt::AlignVCenter, e.text);
    }
    x += entry_width + gap;
  }
  return y + line + gap / 2 - top;
}

// The chart into the top `chart_size` of the page, the legend under it.
void render(MetricChart& view, QPainter& painter, QSize chart_size, const std::vector<LegendEntry>& legend) {
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setRenderHint(QPainter::TextAntialiasing);
  // Transparent text (the chart's own title, which only keeps room for ChartTitle's lines) is left out: in an SVG or
  // a PDF, words no one sees would still be found by a search and read aloud.
  std::vector<QGraphicsTextItem*> unseen;
  for (QGraphicsItem* item : view.scene()->items())
    if (auto* text = dynamic_cast<QGraphicsTextItem*>(item);
        text && text->isVisible() && text->defaultTextColor().alpha() == 0)
      unseen.push_back(text);
  for (QGraphicsTextItem* text : unseen) text->hide();
  view.scene()->render(&painter, QRectF(QPointF(0, 0), chart_size), view.sceneRect());
  for (QGraphicsTextItem* text : unseen) text->show();
  draw_legend(legend, &painter, view.chart()->legend()->font(), chart_size.width(), chart_size.height());
}

}  // namespace

QString export_format(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == "png" || suffix == "svg" || suffix == "pdf") return suffix;
  throw Error("cannot tell the format of '" + path.toStdString() + "': name it .png, .svg or .pdf");
}

void export_chart(const QString& metric, const RunList& runs, const ChartOptions& options, const QString& path,
                  QSize size) {
  const QString format = export_format(path);
  std::unique_ptr<MetricChart> view(make_chart(metric));
  if (!view) throw Error("unknown chart '" + metric.toStdString() + "'");
  view->update_from(runs, options);  // builds its series: whether it draws groups is known then
  const std::vector<LegendEntry> legend = run_legend(runs, options, view->draws_groups());
  const QFont legend_font = view->chart()->legend()->font();
  const QSize chart_size(
      size.width(),
      std::max(size.height() / 2, size.height() - draw_legend(legend, nullptr, legend_font, size.width(), 0)));
  // Laid out at the export size without ever appearing on a screen.
  view->setAttribute(Qt::WA_DontShowOnScreen);
  view->setMinimumSize(1, 1);
  view->resize(chart_size);
  view->show();
  QApplication::processEvents();
  view->update_from(runs, options);
  QApplication::processEvents();
  view->update_from(runs, options);  // again, now that the plot area (and so the decimation) is known

  const QString dir = QFileInfo(path).absolutePath();
  if (!QDir().mkpath(dir)) throw Error("cannot create the folder '" + dir.toStdString() + "'");
  // Drawn into memory, then written beside the file and renamed over it once whole (core/atomic_file.h): a full
  // disk leaves an earlier chart there as it was. Qt's own file writes lose a short write without a word.
  QBuffer bytes;
  bytes.open(QIODevice::WriteOnly);
  bool ok = true;
  if (format == "png") {
    QImage image(size, QImage::Format_ARGB32_Premultiplied);
    image.fill(background(view->chart()->backgroundBrush()));
    {
      QPainter painter(&image);
      render(*view, painter, chart_size, legend);
    }
    ok = image.save(&bytes, "PNG");
  } else if (format == "svg") {
    QSvgGenerator svg;
    svg.setOutputDevice(&bytes);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    svg.setTitle(view->title());
    svg.setDescription(QStringLiteral("AMP Workbench chart: %1").arg(metric));
    QPainter painter;
    ok = painter.begin(&svg);
    if (ok) render(*view, painter, chart_size, legend);
  } else {
    QPdfWriter pdf(&bytes);
    pdf.setCreator(QStringLiteral("AMP Workbench"));
    pdf.setTitle(view->title());
    pdf.setResolution(96);
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
    pdf.setPageSize(QPageSize(QSizeF(size.width() * 0.75, size.height() * 0.75), QPageSize::Point));  // 96 dpi
    QPainter painter;
    ok = painter.begin(&pdf);
    if (ok) {
      painter.scale(pdf.width() / double(size.width()), pdf.height() / double(size.height()));
      render(*view, painter, chart_size, legend);
    }
  }
  // The painters have ended: the whole file is in `bytes`.
  if (!ok || bytes.data().isEmpty()) throw Error("could not draw the chart for '" + path.toStdString() + "'");
  try {
    write_file_atomically(path.toStdString(), std::string_view(bytes.data().constData(), bytes.data().size()));
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + (QFileInfo::exists(path) ? " (the chart there before is kept)" : ""));
  }
}

namespace {
// The charts an export of `runs` draws.
QStringList exported_metrics(const RunList& runs) {
  QStringList metrics = chart_metrics();
  if (fp8_tensors(runs).empty()) metrics.removeAll("fp8-scaling");  // a chart of nothing for other modes
  return metrics;
}

QString chart_file(const QString& folder, const QString& prefix, const QString& metric, const QString& format) {
  return QDir(folder).filePath(QStringLiteral("%1-%2.%3").arg(prefix, metric, format));
}
}  // namespace

QStringList chart_export_files(const RunList& runs, const QString& folder, const QString& prefix,
                               const QString& format) {
  QStringList files;
  for (const QString& metric : exported_metrics(runs)) files << chart_file(folder, prefix, metric, format);
  return files;
}

QStringList export_all_charts(const RunList& runs, const ChartOptions& options, const QString& folder,
                              const QString& prefix, const QString& format, QSize size) {
  QStringList written;
  for (const QString& metric : exported_metrics(runs)) {
    const QString path = chart_file(folder, prefix, metric, format);
    export_chart(metric, runs, options, path, size);
    written << path;
  }
  return written;
}

}  // namespace ampwb::ui
