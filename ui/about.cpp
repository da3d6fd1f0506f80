// About box text.
#include "about.h"

#include <QDir>
#include <QFileInfo>
#include <QMessageBox>
#include <QSysInfo>
#include <QUrl>
#include <QtGlobal>

#include "facade/devices.h"
#include "store/store_location.h"

namespace ampwb::ui {

QString about_text(const QString& db_path) {
  const std::vector<DeviceInfo> devices = list_devices();  // the CPU first
  const DeviceInfo& cpu = devices.front();
  QString gpus;
  for (size_t i = 1; i < devices.size(); ++i)
    gpus += QStringLiteral("<br>GPU %1: %2, %3 GiB, %4")
                .arg(QString::fromStdString(devices[i].id.name()))
                .arg(QString::fromStdString(devices[i].name).toHtmlEscaped())
                .arg(devices[i].memory_bytes / double(1 << 30), 0, 'f', 0)
                .arg(QString::fromStdString(devices[i].isa));
  if (gpus.isEmpty()) gpus = QObject::tr("<br>GPU: %1").arg(QString::fromStdString(gpu_absence_reason()));
  return QObject::tr(
             "<h3>AMP Workbench %1</h3>"
             "<p>Mixed-precision training experiments: train ResNets in FP32, TF32, FP16, BF16 and FP8, watch what "
             "the numerics do, compare runs.</p>"
             "<p>Qt %2 (built with %3)<br>CPU backend: %4<br>ISA: %5%6</p>"
             "<p>%7<br>Run store: %8</p>")
      .arg(QStringLiteral(AMPWB_VERSION), QString::fromUtf8(qVersion()), QStringLiteral(QT_VERSION_STR),
           QString::fromStdString(cpu.description).toHtmlEscaped(), QString::fromStdString(cpu.isa), gpus,
           QSysInfo::prettyProductName().toHtmlEscaped(),
           // A PostgreSQL URI may hold a password: libpq alone sees it.
           QString::fromStdString(location_without_password(db_path.toStdString())).toHtmlEscaped());
}

void show_about(QWidget* parent, const QString& db_path) {
  QMessageBox::about(parent, QObject::tr("About AMP Workbench"), about_text(db_path));
}

QString documentation_text() {
  const QDir source(QStringLiteral(AMPWB_SOURCE_DIR));
  const auto link = [&](const QString& path, const QString& what) {
    const QString file = source.filePath(path);
    return QFileInfo::exists(file) ? QStringLiteral("<a href=\"%1\">%2</a> (%3)")
                                         .arg(QUrl::fromLocalFile(file).toString(), path, what.toHtmlEscaped())
                                   : QStringLiteral("%1 (%2)").arg(path, what.toHtmlEscaped());
  };
  return QObject::tr(
             "<h3>Documentation</h3>"
             "<p>In the AMP Workbench source this build came from (%1):</p>"
             "<ul><li>%2</li><li>%3</li><li>%4</li><li>%5</li></ul>"
             "<p>Every command of <code>ampwb</code> with every flag: <code>ampwb help</code>, or "
             "<code>ampwb help COMMAND</code>.</p>")
      .arg(QDir::toNativeSeparators(source.absolutePath()).toHtmlEscaped(),
           link(QStringLiteral("README.md"), QObject::tr("a first run, the workbench's tabs, the commands")),
           link(QStringLiteral("docs/diagnosis.md"), QObject::tr("what the diagnosis says and why")),
           link(QStringLiteral("docs/reliability.md"), QObject::tr("checkpoints, resuming, the run store")),
           link(QStringLiteral("docs"), QObject::tr("every guide: export, clusters, FP8, GPUs")));
}

void show_documentation(QWidget* parent) {
  QMessageBox box(QMessageBox::Information, QObject::tr("Documentation"), documentation_text(), QMessageBox::Ok,
                  parent);
  box.setTextFormat(Qt::RichText);
  box.setTextInteractionFlags(Qt::TextBrowserInteraction);  // the links open in the desktop's viewer
  box.exec();
}

}  // namespace ampwb::ui
