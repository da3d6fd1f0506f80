#include "runs_poller.h"

#include <optional>

#include "store_reader.h"

namespace ampwb::ui {

struct RunsPoller::Seen {
  std::optional<RunStore::ChangeMarker> marker;
  std::vector<RunsModel::Row> rows;
};

RunsPoller::RunsPoller(std::string location, QObject* parent)
    : QObject(parent), reader_(new StoreReader(std::move(location), this)), seen_(std::make_shared<Seen>()) {}

void RunsPoller::poll(bool reread) {
  auto changed = std::make_shared<std::optional<std::vector<RunsModel::Row>>>();  // this poll's rows, where read
  reader_->start(
      [seen = seen_, reread, changed](RunStore& store) {
        try {
          const RunStore::ChangeMarker marker = store.change_marker();
          if (reread || !seen->marker || !(marker == *seen->marker)) {
            seen->rows = RunsModel::read_rows(store, reread ? std::vector<RunsModel::Row>{} : seen->rows);
            seen->marker = marker;
            *changed = seen->rows;
          }
        } catch (...) {  // the store is opened again: its marker is read anew
          seen->marker.reset();
          throw;
        }
      },
      [this, changed](const QString& error) {
        if (!error.isEmpty()) {
          if (on_failed) on_failed(error);
        } else if (*changed) {
          if (on_changed) on_changed(std::move(**changed));
        } else if (on_unchanged) {
          on_unchanged();
        }
      });
}

bool RunsPoller::busy() const { return reader_->busy(); }

}  // namespace ampwb::ui
