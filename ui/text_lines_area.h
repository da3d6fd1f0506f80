// A fixed band of text lines that scrolls when its text is longer: the run's status and notes keep their height, so a
// longer text never re-lays out the charts, yet none of it is cut off. The comparison's speed lines, under its
// charts, are made as high as their text instead (CompareView::fit_speed_lines), for the table under them.
#pragma once

class QScrollArea;
class QWidget;

namespace ampwb::ui {

// `content` (word-wrapped labels) in a frameless area `lines` lines of its font high, scrolling vertically.
QScrollArea* text_lines_area(QWidget* content, int lines);

}  // namespace ampwb::ui
