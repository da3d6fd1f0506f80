// The run store the workbench opens, and what the user may do with it. A store this user may only read (a
// colleague's folder, a write-protected file) still opens: its runs are shown, compared and exported, while what
// would write into it (training, resuming, renaming, tagging, deleting) is refused up front with the reason.
#pragma once

#include <QString>
#include <memory>

#include "store/run_store.h"

namespace ampwb::ui {

// An existing store as it is (read-only where this user may not write it); a new one created. Throws StoreError.
std::unique_ptr<RunStore> open_workbench_store(const QString& location);

// Why nothing can be recorded in `store`, in the user's words; empty where it can.
QString read_only_reason(const RunStore& store);

// A store's error as a sentence that says it is the run store's ("Run store: ..." unless it names the store itself).
QString store_trouble(const QString& error);

}  // namespace ampwb::ui
