// User text (run names, tags, notes, paths, and the errors that quote them) shown as written. Qt guesses rich text
// from content (Qt::AutoText, Qt::mightBeRichText) in labels, message boxes and tooltips, so a run named
// "<h1>big</h1>" would otherwise render as a heading; QtCharts always draws titles and legend names as HTML.
#pragma once

#include <QMessageBox>
#include <QString>
#include <QTextDocument>

namespace ampwb::ui {

// QMessageBox::warning and its siblings, with the text always plain: it may quote a run name or a path.
inline QMessageBox::StandardButton plain_message(QWidget* parent, QMessageBox::Icon icon, const QString& title,
                                                 const QString& text,
                                                 QMessageBox::StandardButtons buttons = QMessageBox::Ok,
                                                 QMessageBox::StandardButton default_button = QMessageBox::NoButton) {
  QMessageBox box(icon, title, text, buttons, parent);
  box.setTextFormat(Qt::PlainText);
  if (default_button != QMessageBox::NoButton) box.setDefaultButton(default_button);
  return static_cast<QMessageBox::StandardButton>(box.exec());
}

// The engine's words ("cannot write ..."), which follow "error: " on the command line, begun as a sentence is where
// they stand alone: in a dialog, a tooltip, a message line.
inline QString as_sentence(const QString& text) { return text.left(1).toUpper() + text.mid(1); }

// A tooltip of plain text: escaped, its line breaks kept (QToolTip has no plain-text mode).
inline QString plain_tooltip(const QString& text) { return text.isEmpty() ? text : Qt::convertFromPlainText(text); }

}  // namespace ampwb::ui
