// Characters no installed font draws: Qt shows them as empty boxes, so a run or class named in Chinese on a machine
// without a Chinese font would be unreadable in the window and the charts, and nothing would say why.
#pragma once

#include <QString>
#include <QStringList>

namespace ampwb::ui {

// What to tell the user where characters of `texts` are drawn by neither the application's font nor any fallback:
// which (by code point, as they cannot be shown) and how to mend it; empty where every character is drawn. Needs a
// QGuiApplication.
QString missing_font_warning(const QStringList& texts);

}  // namespace ampwb::ui
