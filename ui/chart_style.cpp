// Chart colours and the palette-following theme.
#include "chart_style.h"

#include <QApplication>
#include <QChart>
#include <QPalette>
#include <algorithm>

#include "analysis/run_colours.h"

namespace ampwb::ui {

QColor run_color(int index) {
  const Rgb c = run_colour(static_cast<size_t>(std::max(0, index)));  // the report's colour for the run, too
  return QColor(c.red, c.green, c.blue);
}

QColor train_color() { return run_color(0); }
QColor validation_color() { return run_color(1); }
QColor topk_color() { return run_color(2); }
QColor skipped_color() { return QColor(213, 40, 40); }
// Grey, as no run is: in a run's colour the band would read as that run's.
QColor fp16_range_color() { return QColor(128, 128, 128, 40); }

QPen curve_pen(const QColor& color, double width, Qt::PenStyle style) {
  QPen pen(color, width, style);
  pen.setCosmetic(true);
  return pen;
}

bool palette_is_dark() {
  const QPalette p = QApplication::palette();
  return p.color(QPalette::Window).lightness() < p.color(QPalette::WindowText).lightness();
}

void apply_theme(QChart* chart) {
  const bool dark = palette_is_dark();
  chart->setTheme(dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
  chart->setBackgroundRoundness(0);
  chart->setMargins(QMargins(4, 4, 4, 4));
  QFont title = chart->titleFont();
  title.setBold(true);
  title.setPointSizeF(QApplication::font().pointSizeF() + 0.5);
  chart->setTitleFont(title);
  chart->setAnimationOptions(QChart::NoAnimation);  // live data: animations would lag behind and cost frames
}

}  // namespace ampwb::ui
