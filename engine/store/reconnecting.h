// A PostgreSQL store's connection that the server ends (a restart, an administrator, the network) is made again with
// the next statement (postgres.h). Work that must outlive that, such as a sweep's bookkeeping through a night, runs
// each of its transactions through reconnecting(): one that found the connection lost is made again, at once and then
// a second apart, for about ten seconds (a server restarts in a few); a longer loss is the caller's to report.
#pragma once

#include <chrono>
#include <thread>

#include "store/sqlite.h"

namespace ampwb {

inline constexpr int kReconnectAttempts = 11;

// `transaction` must be one transaction, or reads alone: a commit whose outcome the loss hid is looked up on the new
// connection (PostgresConnection::committed_after_loss), so none is made twice. SQLite never loses its connection.
template <class F>
decltype(auto) reconnecting(F&& transaction) {
  for (int attempt = 1;; ++attempt) {
    try {
      return transaction();
    } catch (const StoreError& e) {
      if (!e.connection_lost() || attempt == kReconnectAttempts) throw;
      if (attempt > 1) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}

}  // namespace ampwb
