// The application-wide filter that keeps the wheel from unfocused fields (focused_wheel.h).
#include "focused_wheel.h"

#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QEvent>

namespace ampwb::ui {
namespace {

class FocusedWheel : public QObject {
 public:
  using QObject::QObject;

  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() != QEvent::Wheel && event->type() != QEvent::Polish) return false;
    auto* field = qobject_cast<QWidget*>(watched);
    if (!field || !(qobject_cast<QAbstractSpinBox*>(field) || qobject_cast<QComboBox*>(field))) return false;
    // Qt gives a field whose policy is Qt::WheelFocus (theirs by default) the focus before any filter sees the
    // wheel: a click or Tab focuses them instead.
    if (event->type() == QEvent::Polish) {
      if (field->focusPolicy() == Qt::WheelFocus) field->setFocusPolicy(Qt::StrongFocus);
      return false;
    }
    if (field->hasFocus()) return false;
    // Kept from the field and left unaccepted: QApplication passes it on to what holds the field, and a scroll area
    // there scrolls.
    event->ignore();
    return true;
  }
};

}  // namespace

void wheel_only_when_focused(QApplication& app) { app.installEventFilter(new FocusedWheel(&app)); }

}  // namespace ampwb::ui
