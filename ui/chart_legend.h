// A chart's legend that wraps: its entries flow into as many rows as the chart's width needs, each drawn whole
// (QtCharts' own legend keeps one row and cuts names short: "per st…", "validation …" twice). It reads the entries
// from the chart's QLegend (its markers: names, brushes), which is never drawn, and draws a short sample
// of each series' line (dashes and dots as on the plot), a dot for marks, or a swatch for areas and bars. The
// chart keeps room for it below the plot (its bottom margin), so it never covers a curve.
#pragma once

#include <QFont>
#include <QGraphicsItem>
#include <QRectF>
#include <QString>
#include <vector>

class QAbstractSeries;
class QChart;
class QLegendMarker;

namespace ampwb::ui {

class ChartLegend : public QGraphicsItem {
 public:
  struct Entry {
    QString label;  // plain text, as the marker names it
    QRectF sample;  // in chart coordinates, like text
    QRectF text;    // where the whole label is drawn (on several lines only where it is wider than the chart)
    QLegendMarker* marker = nullptr;
  };

  explicit ChartLegend(QChart* chart);  // a child item of the chart, in place of the chart's own legend

  // Re-reads the markers and lays the entries out across the chart's width, and reserves that height under the
  // plot. Cheap when nothing changed (names, visibility, width): call it after every refresh and resize.
  void relayout();
  const std::vector<Entry>& entries() const { return entries_; }
  // Series drawn without an entry (a band, a fill under an outline), until the chart's series are replaced; a series
  // not visible has none either. (The
  // markers' own visibility cannot tell: QtCharts shows them only once its unseen legend has been laid out.)
  void hide_entry(const QAbstractSeries* series);
  void forget_hidden();
  QFont font() const;

  QRectF boundingRect() const override { return bounds_; }
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

 private:
  bool shown(QLegendMarker* marker) const;  // (QLegendMarker::series() is not const)
  QChart* chart_;
  std::vector<const QAbstractSeries*> hidden_;
  std::vector<Entry> entries_;
  QRectF bounds_;
  QString laid_out_for_;  // the names, visibility and size of the last layout
  int margin_ = 4;        // the chart's bottom margin it asked for
};

}  // namespace ampwb::ui
