// Chart colours and the palette-following theme.
#include "chart_style.h"

#include <QApplication>
#include <QChart>
#include <QPalette>
#include <algorithm>
#include <array>

namespace ampwb::ui {

QColor run_color(int index) {
  static const std::array<QColor, 8> colors = {QColor(0, 114, 178),   QColor(230, 159, 0),  QColor(0, 158, 115),
                                               QColor(204, 121, 167), QColor(86, 180, 233), QColor(213, 94, 0),
                                               QColor(120, 120, 120), QColor(240, 200, 50)};
  // Past the eight, each round again darker, then lighter: a ninth run must not look like the first.
  const size_t i = static_cast<size_t>(std::max(0, index));
  const QColor base = colors[i % colors.size()];
  switch (i / colors.size() % 3) {
    case 1:
      return base.darker(170);
    case 2:
      return base.lighter(145);
    default:
      return base;
  }
}

QColor train_color() { return run_color(0); }
QColor validation_color() { return run_color(1); }
QColor topk_color() { return run_color(2); }
QColor skipped_color() { return QColor(213, 40, 40); }
QColor fp16_range_color() { return QColor(0, 158, 115, 45); }

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
