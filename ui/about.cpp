// About box text.
#include "about.h"

#include <QMessageBox>
#include <QSysInfo>
#include <QtGlobal>

#include "backend/cpu/cpu_backend.h"
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace ampwb::ui {

QString about_text(const QString& db_path) {
  const CpuBackend cpu;
  QString gpus;
#ifdef AMPWB_HAVE_CUDA
  for (const CudaDeviceInfo& d : cuda_devices())
    gpus += QStringLiteral("<br>GPU %1: %2, %3 GiB, compute capability %4.%5")
                .arg(d.index)
                .arg(QString::fromStdString(d.name).toHtmlEscaped())
                .arg(d.total_memory_bytes / double(1 << 30), 0, 'f', 0)
                .arg(d.compute_capability_major)
                .arg(d.compute_capability_minor);
  if (gpus.isEmpty())
    gpus = QObject::tr("<br>GPU: none found (CUDA runtime %1)").arg(QString::fromStdString(cuda_runtime_version()));
#else
  gpus = QObject::tr("<br>GPU: this build has no CUDA backend");
#endif
  return QObject::tr(
             "<h3>AMP Workbench %1</h3>"
             "<p>Mixed-precision training experiments: train ResNets in FP32, FP16 and BF16, watch what the "
             "numerics do, compare runs.</p>"
             "<p>Qt %2 (built with %3)<br>CPU backend: %4<br>ISA: %5%6</p>"
             "<p>%7<br>Run store: %8</p>")
      .arg(QStringLiteral(AMPWB_VERSION), QString::fromUtf8(qVersion()), QStringLiteral(QT_VERSION_STR),
           QString::fromStdString(cpu.description()).toHtmlEscaped(), QString::fromStdString(cpu.isa()), gpus,
           QSysInfo::prettyProductName().toHtmlEscaped(), db_path.toHtmlEscaped());
}

void show_about(QWidget* parent, const QString& db_path) {
  QMessageBox::about(parent, QObject::tr("About AMP Workbench"), about_text(db_path));
}

}  // namespace ampwb::ui
