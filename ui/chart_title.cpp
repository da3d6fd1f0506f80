// ChartTitle: the chart's title broken into lines at its spaces, drawn centred at the top of the chart.
#include "chart_title.h"

#include <QChart>
#include <QFontMetricsF>
#include <QPainter>
#include <QTextDocumentFragment>
#include <cmath>

namespace ampwb::ui {
namespace {

constexpr qreal kSide = 6;       // from the chart's left and right edges
constexpr int kChartMargin = 4;  // the chart's own top margin (chart_style.cpp)

}  // namespace

ChartTitle::ChartTitle(QChart* chart) : QGraphicsItem(chart), chart_(chart) { setZValue(10); }

QFont ChartTitle::font() const { return chart_->titleFont(); }

QRectF ChartTitle::line_rect(int line) const {
  const qreal height = QFontMetricsF(font()).lineSpacing();
  return QRectF(bounds_.left(), bounds_.top() + line * height, bounds_.width(), height);
}

void ChartTitle::relayout() {
  // A theme applied anew (a rebuilt chart, a palette change) draws the chart's own title again: it only keeps room.
  if (chart_->titleBrush().color().alpha() != 0) {
    color_ = chart_->titleBrush().color();
    chart_->setTitleBrush(Qt::transparent);
  }
  const qreal width = chart_->size().width();
  const QString signature = QString::number(width) + '\n' + chart_->title();
  if (signature == laid_out_for_ && chart_->margins().top() == margin_) return;
  laid_out_for_ = signature;
  prepareGeometryChange();

  // Titles are HTML to QtCharts: drawn here as the text they say, broken at spaces into lines that fit.
  const QString text = QTextDocumentFragment::fromHtml(chart_->title()).toPlainText().simplified();
  const QFontMetricsF metrics(font());
  const qreal room = std::max(metrics.averageCharWidth() * 8, width - 2 * kSide);
  lines_.clear();
  QString line;
  for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
    const QString longer = line.isEmpty() ? word : line + ' ' + word;
    if (!line.isEmpty() && metrics.horizontalAdvance(longer) > room) {
      lines_ << line;
      line = word;
    } else {
      line = longer;
    }
  }
  if (!line.isEmpty()) lines_ << line;

  const qreal line_height = metrics.lineSpacing();
  // The chart's own (transparent) title holds the last line's room; the lines before it take the top margin.
  bounds_ = QRectF(kSide, kChartMargin, room, lines_.size() * line_height);
  margin_ = kChartMargin + static_cast<int>(std::ceil(std::max<qsizetype>(0, lines_.size() - 1) * line_height));
  if (chart_->margins().top() != margin_) {
    QMargins m = chart_->margins();
    m.setTop(margin_);
    chart_->setMargins(m);
  }
  update();
}

void ChartTitle::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  painter->setFont(font());
  painter->setPen(color_);
  for (int i = 0; i < lines_.size(); ++i) painter->drawText(line_rect(i), Qt::AlignCenter, lines_[i]);
}

}  // namespace ampwb::ui
