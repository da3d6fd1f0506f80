// A chart's title that wraps: on a narrow chart its words flow onto a second or third line instead of ending in
// "..." (QtCharts' own title keeps one line: "Data wait vs compute: 0...." hid the very figure it was for). The
// chart keeps its title (QChart::title(), which the charts set and tests read), drawn transparent so that it only
// keeps its line of room; this item draws the words over that room and as many lines above it as they need.
#pragma once

#include <QColor>
#include <QGraphicsItem>
#include <QStringList>

class QChart;

namespace ampwb::ui {

class ChartTitle : public QGraphicsItem {
 public:
  explicit ChartTitle(QChart* chart);  // a child item of the chart

  // Re-reads the chart's title and wraps it to the chart's width, reserving the lines past the first above the
  // plot (the chart's top margin). Cheap when neither changed: call it after every refresh and resize.
  void relayout();
  const QStringList& lines() const { return lines_; }
  QRectF line_rect(int line) const;  // in chart coordinates
  QFont font() const;

  QRectF boundingRect() const override { return bounds_; }
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

 private:
  QChart* chart_;
  QStringList lines_;
  QColor color_;  // the theme's title colour (the chart's own title is made transparent)
  QRectF bounds_;
  QString laid_out_for_;  // the title and width of the last layout
  int margin_ = 4;        // the chart's top margin it asked for
};

}  // namespace ampwb::ui
