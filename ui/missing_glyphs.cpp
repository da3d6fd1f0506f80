#include "missing_glyphs.h"

#include <QFontMetrics>
#include <QGuiApplication>

namespace ampwb::ui {

namespace {
// Marks and format characters (a zero-width space, a variation selector) draw nothing of their own: none is missed.
bool invisible(char32_t c) {
  const QChar::Category category = QChar::category(c);
  return category == QChar::Other_Format || category == QChar::Mark_NonSpacing || category == QChar::Mark_Enclosing;
}
}  // namespace

QString missing_font_warning(const QStringList& texts) {
  const QFontMetrics metrics(QGuiApplication::font());  // its fallbacks included: what a label draws with
  QList<char32_t> missing;
  for (const QString& text : texts)
    for (const char32_t c : text.toUcs4())
      if (c > 0x7F && !invisible(c) && !missing.contains(c) && !metrics.inFontUcs4(c)) missing.append(c);
  if (missing.isEmpty()) return {};
  constexpr qsizetype kNamed = 3;
  QStringList codes;
  for (qsizetype i = 0; i < missing.size() && i < kNamed; ++i)
    codes << QStringLiteral("U+%1").arg(static_cast<uint>(missing[i]), 4, 16, QChar('0')).toUpper();
  if (missing.size() > kNamed) codes << QObject::tr("%n more", nullptr, static_cast<int>(missing.size() - kNamed));
  return QObject::tr("no installed font draws %1, shown as empty boxes: install one that does (Chinese, Japanese "
                     "and Korean on Debian: sudo apt install fonts-wqy-microhei)")
      .arg(codes.join(", "));
}

}  // namespace ampwb::ui
