// Charts to files: PNG (raster, at the size asked), SVG (QSvgGenerator) and PDF (QPdfWriter), chosen by the
// file's extension. A fresh chart is laid out at the export size, so a file never depends on the window's size.
// Works offscreen (no display needed).
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

#include "metric_chart.h"

namespace ampwb::ui {

inline constexpr QSize kDefaultExportSize{1200, 800};

// "png", "svg" or "pdf" from the path's extension; throws ampwb::Error for anything else.
QString export_format(const QString& path);

// Draws `metric` for `runs` into `path`. Throws ampwb::Error naming the file when it cannot be written.
void export_chart(const QString& metric, const RunList& runs, const ChartOptions& options, const QString& path,
                  QSize size = kDefaultExportSize);

// Every chart into `folder` as PREFIX-METRIC.FORMAT; returns the files written.
// The files export_all_charts writes, in its order: what a caller may say it would replace.
QStringList chart_export_files(const RunList& runs, const QString& folder, const QString& prefix,
                               const QString& format);
QStringList export_all_charts(const RunList& runs, const ChartOptions& options, const QString& folder,
                              const QString& prefix, const QString& format, QSize size = kDefaultExportSize);

}  // namespace ampwb::ui
