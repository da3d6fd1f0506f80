// A fixed band of text lines that scrolls when its text is longer: the run's status and notes and the comparison's
// speed lines keep their height, so a longer text never re-lays out the charts, yet none of it is cut off.
#pragma once

class QScrollArea;
class QWidget;

namespace ampwb::ui {

// `content` (word-wrapped labels) in a frameless area `lines` lines of its font high, scrolling vertically.
QScrollArea* text_lines_area(QWidget* content, int lines);

}  // namespace ampwb::ui
