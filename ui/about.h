// The About box: versions (AMP Workbench, Qt, oneDNN through the CPU backend's description), the CPU's ISA,
// the GPUs found, and where the runs are stored; and the Documentation box, which says where the guides are.
#pragma once

#include <QString>

class QWidget;

namespace ampwb::ui {

QString about_text(const QString& db_path);  // rich text
void show_about(QWidget* parent, const QString& db_path);

// Where the guides are (README.md and docs/ of the source this build came from, as links) and how to list every
// command; rich text.
QString documentation_text();
void show_documentation(QWidget* parent);

}  // namespace ampwb::ui
