// Colours and themes shared by every chart: one colour per run in a comparison, fixed colours for the curves of a
// single run, and the chart theme that follows the system palette (light or dark).
#pragma once

#include <QColor>
#include <QPen>

class QChart;

namespace ampwb::ui {

QColor run_color(int index);  // distinct, colour-blind-friendly (Okabe-Ito); darker, then lighter past 8
QColor train_color();
QColor validation_color();
QColor topk_color();
QColor skipped_color();
QColor fp16_range_color();  // translucent: the shaded representable range
QPen curve_pen(const QColor& color, double width = 2.0, Qt::PenStyle style = Qt::SolidLine);

bool palette_is_dark();
void apply_theme(QChart* chart);  // the light or dark theme, transparent-free, legend at the bottom

}  // namespace ampwb::ui
