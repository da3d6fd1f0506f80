// ChartLegend: the entries of a chart's markers, flowed into rows under its plot, and their samples.
#include "chart_legend.h"

#include <QAbstractSeries>
#include <QChart>
#include <QFontMetricsF>
#include <QLegend>
#include <QLegendMarker>
#include <QPainter>
#include <QScatterSeries>
#include <QTextDocumentFragment>
#include <QXYSeries>
#include <algorithm>
#include <cmath>

namespace ampwb::ui {
namespace {

constexpr qreal kSampleWidth = 22;  // long enough to show a dash pattern
constexpr qreal kGap = 4;           // between the sample and its name
constexpr qreal kSpacing = 12;      // between entries of a row
constexpr qreal kSide = 6;          // from the chart's left and right edges
constexpr int kChartMargin = 4;     // the chart's own margins (chart_style.cpp) besides the legend's room

bool is_line(const QAbstractSeries* s) {
  return s && (s->type() == QAbstractSeries::SeriesTypeLine || s->type() == QAbstractSeries::SeriesTypeSpline);
}

}  // namespace

ChartLegend::ChartLegend(QChart* chart) : QGraphicsItem(chart), chart_(chart) {
  // The chart's own legend stays, unseen and out of the chart's layout: it keeps the markers (names, brushes) up to
  // date as series come and go.
  QLegend* own = chart->legend();
  own->detachFromChart();
  own->setGeometry(QRectF(0, 0, 1, 1));
  own->setOpacity(0);
  own->setAcceptedMouseButtons(Qt::NoButton);
  own->setAcceptHoverEvents(false);
  setZValue(10);  // above the plot's background
}

void ChartLegend::hide_entry(const QAbstractSeries* series) {
  hidden_.push_back(series);
  laid_out_for_.clear();
}

void ChartLegend::forget_hidden() {
  hidden_.clear();
  laid_out_for_.clear();
}

bool ChartLegend::shown(QLegendMarker* marker) const {
  return marker->series()->isVisible() && std::find(hidden_.begin(), hidden_.end(), marker->series()) == hidden_.end();
}

QFont ChartLegend::font() const { return chart_->legend()->font(); }

void ChartLegend::relayout() {
  const qreal width = chart_->size().width();
  QString signature = QStringLiteral("%1×%2%3").arg(width).arg(chart_->size().height()).arg(isVisible());
  const QList<QLegendMarker*> markers = chart_->legend()->markers();
  for (QLegendMarker* m : markers)
    if (shown(m)) signature += QString::number(reinterpret_cast<quintptr>(m), 16) + m->label() + '\n';
  // A rebuilt chart has its theme's margins again (chart_style.cpp): the legend's room is then reserved anew.
  if (signature == laid_out_for_ && chart_->margins().bottom() == margin_) return;
  laid_out_for_ = signature;
  prepareGeometryChange();
  entries_.clear();

  if (isVisible()) {
    const QFontMetricsF metrics(font());
    const qreal line = metrics.height();
    const qreal room = std::max(kSampleWidth + kGap + metrics.averageCharWidth() * 4, width - 2 * kSide);
    // Entries flow left to right into rows, each row centred; a name longer than a whole row wraps at its spaces.
    struct Row {
      size_t first;
      qreal width;
    };
    std::vector<Row> rows{{0, 0}};
    qreal x = 0, y = 0, row_height = line;
    for (QLegendMarker* m : markers) {
      if (!shown(m)) continue;
      // Names are HTML for QtCharts' legend (metric_chart.h: add_line escapes them): drawn here as the text they say.
      const QString label = QTextDocumentFragment::fromHtml(m->label()).toPlainText();
      if (label.trimmed().isEmpty()) continue;  // a series without a name (a run not started yet) has no entry
      const qreal text_room = room - kSampleWidth - kGap;
      QSizeF text(metrics.horizontalAdvance(label), line);
      if (text.width() > text_room)
        text = metrics.boundingRect(QRectF(0, 0, text_room, 1e6), Qt::TextWordWrap, label).size();
      const qreal entry_width = kSampleWidth + kGap + std::ceil(text.width());
      if (x > 0 && x + entry_width > room) {  // the next row
        rows.back().width = x - kSpacing;
        rows.push_back({entries_.size(), 0});
        y += row_height;
        x = 0;
        row_height = line;
      }
      Entry e;
      e.label = label;
      e.marker = m;
      e.sample = QRectF(x, y, kSampleWidth, line);
      e.text = QRectF(x + kSampleWidth + kGap, y, std::ceil(text.width()), std::ceil(text.height()));
      entries_.push_back(e);
      x += entry_width + kSpacing;
      row_height = std::max(row_height, e.text.height());
    }
    rows.back().width = x - kSpacing;
    const qreal height = entries_.empty() ? 0 : y + row_height;
    // Under the plot, inside the chart's bottom margin: each row centred across the chart.
    const qreal top = chart_->size().height() - kChartMargin - 2 - height;
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t end = r + 1 < rows.size() ? rows[r + 1].first : entries_.size();
      const qreal left = kSide + std::max(0.0, (room - rows[r].width) / 2);
      for (size_t i = rows[r].first; i < end; ++i) {
        entries_[i].sample.translate(left, top);
        entries_[i].text.translate(left, top);
      }
    }
    bounds_ = QRectF(kSide, top, room, height);
    margin_ = kChartMargin + (height > 0 ? static_cast<int>(std::ceil(height)) + 4 : 0);
  } else {
    bounds_ = QRectF();
    margin_ = kChartMargin;
  }
  if (chart_->margins().bottom() != margin_) {
    QMargins m = chart_->margins();
    m.setBottom(margin_);
    chart_->setMargins(m);
  }
  update();
}

void ChartLegend::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  painter->setRenderHint(QPainter::Antialiasing);
  painter->setFont(font());
  const QColor text_color = chart_->legend()->labelColor();
  for (const Entry& e : entries_) {
    const QAbstractSeries* series = e.marker->series();
    const QPointF centre = e.sample.center();
    if (is_line(series)) {  // the curve's own pen: solid, dashed or dotted as on the plot
      QPen pen = static_cast<const QXYSeries*>(series)->pen();
      pen.setWidthF(std::clamp(pen.widthF(), 1.0, 2.5));
      pen.setCosmetic(true);
      painter->setPen(pen);
      painter->drawLine(QPointF(e.sample.left() + 1, centre.y()), QPointF(e.sample.right() - 1, centre.y()));
    } else if (series && series->type() == QAbstractSeries::SeriesTypeScatter) {  // its marks' own shape
      painter->setPen(Qt::NoPen);
      painter->setBrush(e.marker->brush());
      if (static_cast<const QScatterSeries*>(series)->markerShape() == QScatterSeries::MarkerShapeRectangle)
        painter->drawRect(QRectF(centre.x() - 3.5, centre.y() - 3.5, 7, 7));
      else
        painter->drawEllipse(centre, 4, 4);
    } else {  // areas and bars: a swatch of their fill
      const qreal side = std::min(e.sample.height() * 0.7, e.sample.width());
      painter->setPen(e.marker->pen().style() == Qt::NoPen ? QPen(e.marker->brush().color().darker(130))
                                                           : e.marker->pen());
      painter->setBrush(e.marker->brush());
      painter->drawRect(QRectF(centre.x() - side / 2, centre.y() - side / 2, side, side));
    }
    painter->setPen(text_color);
    painter->drawText(e.text, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, e.label);
  }
}

}  // namespace ampwb::ui
