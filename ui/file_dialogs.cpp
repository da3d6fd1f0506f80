// File dialogs whose listings never open a file (file_dialogs.h).
#include "file_dialogs.h"

#include <QFileDialog>
#include <QFileIconProvider>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QRegularExpression>

#include "plain_text.h"

namespace ampwb::ui {
namespace {

// Icons and type names from what stat() says and the name's suffix: Qt's own provider asks QMimeDatabase, which
// opens files whose suffix it does not know.
class NameOnlyIconProvider : public QFileIconProvider {
 public:
  QIcon icon(IconType type) const override { return QFileIconProvider::icon(type); }
  QIcon icon(const QFileInfo& info) const override { return QFileIconProvider::icon(info.isDir() ? Folder : File); }
  QString type(const QFileInfo& info) const override {
    if (info.isDir()) return QFileDialog::tr("Folder");
    const QString suffix = info.suffix();
    return suffix.isEmpty() ? QFileDialog::tr("File") : QFileDialog::tr("%1 File").arg(suffix);
  }
};

}  // namespace

QFileDialog* new_file_dialog(QWidget* parent, const QString& caption, const QString& start) {
  auto* dialog = new QFileDialog(parent, caption, start);
  dialog->setOption(QFileDialog::DontUseNativeDialog);
  auto* icons = new NameOnlyIconProvider;
  dialog->setIconProvider(icons);  // the dialog does not own it
  QObject::connect(dialog, &QObject::destroyed, [icons] { delete icons; });
  return dialog;
}

QString choose_folder(QWidget* parent, const QString& caption, const QString& start) {
  QFileDialog* dialog = new_file_dialog(parent, caption, start);
  dialog->setFileMode(QFileDialog::Directory);
  dialog->setOption(QFileDialog::ShowDirsOnly);
  const bool chosen = dialog->exec() == QDialog::Accepted && !dialog->selectedFiles().isEmpty();
  const QString folder = chosen ? dialog->selectedFiles().front() : QString();
  delete dialog;
  return folder;
}

QString choose_save_file(QWidget* parent, const QString& caption, const QString& suggested, const QString& filters,
                         QString* selected_filter, const QString& note) {
  const QFileInfo proposal(suggested);
  QFileDialog* dialog = new_file_dialog(parent, caption, proposal.absolutePath());
  if (auto* grid = qobject_cast<QGridLayout*>(dialog->layout()); grid && !note.isEmpty()) {
    auto* said = new QLabel(note);
    said->setObjectName("saveNote");
    said->setTextFormat(Qt::PlainText);  // it names runs: user text, never HTML
    said->setWordWrap(true);
    grid->addWidget(said, grid->rowCount(), 0, 1, grid->columnCount());  // under the file name and its type
  }
  dialog->selectFile(proposal.fileName());
  dialog->setAcceptMode(QFileDialog::AcceptSave);
  dialog->setFileMode(QFileDialog::AnyFile);
  dialog->setNameFilter(filters);
  if (selected_filter && !selected_filter->isEmpty()) dialog->selectNameFilter(*selected_filter);
  const bool chosen = dialog->exec() == QDialog::Accepted && !dialog->selectedFiles().isEmpty();
  QString file = chosen ? dialog->selectedFiles().front() : QString();
  if (chosen && selected_filter) *selected_filter = dialog->selectedNameFilter();
  // A name whose suffix none of the filters offers ("Bericht", "report.v2", "chart.png" for HTML) gets the chosen
  // filter's, or it would be a file no browser or viewer opens: another file, so asked about where it exists.
  static const QRegularExpression pattern(R"(\*\.(\w+))");  // "*.html" in "HTML (*.html)"
  const QString suffix = pattern.match(dialog->selectedNameFilter()).captured(1);
  bool offered = false;
  for (const QRegularExpressionMatch& m : pattern.globalMatch(filters))
    offered = offered || QFileInfo(file).suffix().compare(m.captured(1), Qt::CaseInsensitive) == 0;
  if (chosen && !suffix.isEmpty() && !offered) {
    file += '.' + suffix;
    if (!confirm_replacing(parent, caption, {file})) file.clear();
  }
  delete dialog;
  return file;
}

bool confirm_replacing(QWidget* parent, const QString& title, const QStringList& files) {
  QStringList existing;
  for (const QString& f : files)
    if (QFileInfo::exists(f)) existing << QFileInfo(f).fileName();
  if (existing.isEmpty()) return true;
  constexpr int kNamed = 6;
  QString names = QStringList(existing.mid(0, kNamed)).join(", ");
  if (existing.size() > kNamed) names += QObject::tr(" and %1 more").arg(existing.size() - kNamed);
  const QString text =
      existing.size() == 1
          ? QObject::tr("%1 already exists in %2.\n\nReplace it?").arg(names, QFileInfo(files.front()).absolutePath())
          : QObject::tr(
                "%1 of these files already exist in %2: %3.\n\nReplace them? The folder's other files stay "
                "as they are.")
                .arg(existing.size())
                .arg(QFileInfo(files.front()).absolutePath(), names);
  return plain_message(parent, QMessageBox::Question, title, text, QMessageBox::Yes | QMessageBox::No,
                       QMessageBox::No) == QMessageBox::Yes;
}

}  // namespace ampwb::ui
