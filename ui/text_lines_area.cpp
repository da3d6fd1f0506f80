// A fixed-height, vertically scrolling band of text (text_lines_area.h).
#include "text_lines_area.h"

#include <QFontMetrics>
#include <QScrollArea>

namespace ampwb::ui {

QScrollArea* text_lines_area(QWidget* content, int lines) {
  auto* area = new QScrollArea;
  area->setObjectName(content->objectName() + "Area");
  area->setFrameShape(QFrame::NoFrame);
  area->setWidgetResizable(true);  // the text wraps at the area's width, and its height follows
  area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  area->setWidget(content);
  area->setFixedHeight(content->fontMetrics().lineSpacing() * lines + 1);
  return area;
}

}  // namespace ampwb::ui
