#include "workbench_store.h"

#include <QCoreApplication>
#include <QDir>
#include <filesystem>

#include "plain_text.h"
#include "store/store_location.h"

namespace ampwb::ui {

std::unique_ptr<RunStore> open_workbench_store(const QString& location) {
  const std::string where = location.toStdString();
  bool existing_file = false;
  try {
    std::error_code ec;
    existing_file = !is_database_server(where) && std::filesystem::exists(where, ec);
  } catch (const StoreError&) {  // a location no store can have: opening it says why
  }
  // Creating would refuse a store that cannot be written; opening an existing one reads it where it cannot.
  return std::make_unique<RunStore>(where, existing_file ? RunStore::Mode::Existing : RunStore::Mode::Create);
}

QString read_only_reason(const RunStore& store) {
  if (!store.read_only()) return {};
  return QCoreApplication::translate(
             "ampwb::ui::WorkbenchStore",
             "the run store %1 is read-only here: its runs can be looked at and exported, but nothing can be "
             "recorded in it (check its permissions, or start the workbench on another store with --db)")
      .arg(QDir::toNativeSeparators(QString::fromStdString(location_without_password(store.path()))));
}

QString store_trouble(const QString& error) {
  return as_sentence(error.contains(QStringLiteral("run store")) ? error : QObject::tr("Run store: %1").arg(error));
}

}  // namespace ampwb::ui
