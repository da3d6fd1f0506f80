// About box text.
#include "about.h"

#include <QMessageBox>
#include <QSysInfo>
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
             "<p>Mixed-precision training experiments: train ResNets in FP32, FP16 and BF16, watch what the "
             "numerics do, compare runs.</p>"
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

}  // namespace ampwb::ui
