// Spin boxes and lists take the mouse wheel only once they have the focus. Otherwise scrolling the setup panel
// changed whichever field passed under the pointer (an initial loss scale of 65536 became 44032, a batch of 64
// became 67) without a word; unfocused, the wheel scrolls what holds the field instead.
#pragma once

class QApplication;

namespace ampwb::ui {

// For every QAbstractSpinBox and QComboBox of the application, now and later: they take the focus by a click or Tab,
// not by the wheel.
void wheel_only_when_focused(QApplication& app);

}  // namespace ampwb::ui
