// Chart export: lay out a fresh chart offscreen, then render its scene into an image, an SVG or a PDF painter.
#include "chart_export.h"

#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QGraphicsScene>
#include <QImage>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <memory>

#include "chart_factory.h"
#include "core/error.h"

namespace ampwb::ui {
namespace {

// The chart's background colour (themes use gradients): what a raster export is filled with first.
QColor background(const QBrush& brush) {
  if (const QGradient* g = brush.gradient(); g && !g->stops().isEmpty()) return g->stops().first().second;
  return brush.style() == Qt::NoBrush ? QColor(Qt::white) : brush.color();
}

void render(MetricChart& view, QPainter& painter, QSize size) {
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setRenderHint(QPainter::TextAntialiasing);
  view.scene()->render(&painter, QRectF(QPointF(0, 0), size), view.sceneRect());
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
  // Laid out at the export size without ever appearing on a screen.
  view->setAttribute(Qt::WA_DontShowOnScreen);
  view->setMinimumSize(1, 1);
  view->resize(size);
  view->show();
  QApplication::processEvents();
  view->update_from(runs, options);
  QApplication::processEvents();
  view->update_from(runs, options);  // again, now that the plot area (and so the decimation) is known

  const QString dir = QFileInfo(path).absolutePath();
  if (!QDir().mkpath(dir)) throw Error("cannot create the folder '" + dir.toStdString() + "'");
  bool ok = true;
  if (format == "png") {
    QImage image(size, QImage::Format_ARGB32_Premultiplied);
    image.fill(background(view->chart()->backgroundBrush()));
    {
      QPainter painter(&image);
      render(*view, painter, size);
    }
    ok = image.save(path, "PNG");
  } else if (format == "svg") {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    svg.setTitle(view->title());
    svg.setDescription(QStringLiteral("AMP Workbench chart: %1").arg(metric));
    QPainter painter;
    ok = painter.begin(&svg);
    if (ok) render(*view, painter, size);
  } else {
    QPdfWriter pdf(path);
    pdf.setCreator(QStringLiteral("AMP Workbench"));
    pdf.setTitle(view->title());
    pdf.setResolution(96);
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
    pdf.setPageSize(QPageSize(QSizeF(size.width() * 0.75, size.height() * 0.75), QPageSize::Point));  // 96 dpi
    QPainter painter;
    ok = painter.begin(&pdf);
    if (ok) {
      painter.scale(pdf.width() / double(size.width()), pdf.height() / double(size.height()));
      render(*view, painter, size);
    }
  }
  if (!ok || !QFileInfo(path).exists() || QFileInfo(path).size() == 0)
    throw Error("could not write the chart to '" + path.toStdString() + "'");
}

QStringList export_all_charts(const RunList& runs, const ChartOptions& options, const QString& folder,
                              const QString& prefix, const QString& format, QSize size) {
  QStringList written;
  for (const QString& metric : chart_metrics()) {
    const QString path = QDir(folder).filePath(QStringLiteral("%1-%2.%3").arg(prefix, metric, format));
    export_chart(metric, runs, options, path, size);
    written << path;
  }
  return written;
}

}  // namespace ampwb::ui
