// User text (run names, tags, notes, paths, and the errors that quote them) shown as written. Qt guesses rich text
// from content (Qt::AutoText, Qt::mightBeRichText) in labels, message boxes and tooltips, so a run named
// "<h1>big</h1>" would otherwise render as a heading; QtCharts always draws titles and legend names as HTML.
#pragma once

#include <QMessageBox>
#include <QString>
#include <QTextBoundaryFinder>
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

// A tooltip of plain text that wraps at its spaces within QToolTip's width (plain_tooltip's spaces never break, so a
// long one ran off the screen), `whole` (a run's name) kept on one line where it is short enough to fit one.
inline QString wrapping_tooltip(const QString& text, const QString& whole = {}) {
  if (text.isEmpty()) return text;
  QString kept = text;
  if (!whole.isEmpty() && whole.size() <= 40 && text.contains(whole)) {
    // Each place the line may break inside it made one where it may not: a no-break space or hyphen, else a word
    // joiner (a slash, a bracket); all of them read and print as what they stand for.
    QString bound;
    QTextBoundaryFinder breaks(QTextBoundaryFinder::Line, whole);
    qsizetype from = 0;
    for (qsizetype at = breaks.toNextBoundary(); at > 0 && at < whole.size(); at = breaks.toNextBoundary()) {
      bound += whole.mid(from, at - from);
      if (bound.endsWith(' '))
        for (qsizetype i = bound.size() - 1; i >= 0 && bound[i] == ' '; --i) bound[i] = QChar::Nbsp;
      else if (bound.endsWith('-'))
        bound.back() = QChar(0x2011);
      else
        bound += QChar(0x2060);
      from = at;
    }
    kept.replace(whole, bound + whole.mid(from));
  }
  return Qt::convertFromPlainText(kept, Qt::WhiteSpaceNormal);
}

}  // namespace ampwb::ui
