// The About box: versions (AMP Workbench, Qt, oneDNN through the CPU backend's description), the CPU's ISA,
// the GPUs found, and where the runs are stored.
#pragma once

#include <QString>

class QWidget;

namespace ampwb::ui {

QString about_text(const QString& db_path);  // rich text
void show_about(QWidget* parent, const QString& db_path);

}  // namespace ampwb::ui
