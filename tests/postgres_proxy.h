// A Unix socket that passes a PostgreSQL server's connections on byte for byte, so that a test can cut one where a
// server's end or the network would: just before the server's answer to a COMMIT (the commit made, the client never
// told), or before the client's COMMIT reaches the server, once the client has the transaction's id that the run
// store asks for (the transaction left open, then ended by the cut).
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

namespace ampwb::test {

class PostgresProxy {
 public:
  enum class Cut { None, BeforeCommitAnswer, BeforeCommitSent };

  // Listens in a folder of its own, passing each connection on to `server_socket` (PostgresServer::socket_file()).
  explicit PostgresProxy(const std::filesystem::path& server_socket);
  ~PostgresProxy();
  PostgresProxy(const PostgresProxy&) = delete;
  PostgresProxy& operator=(const PostgresProxy&) = delete;

  // `server_uri` (PostgresServer::uri()) through the proxy: its host is the proxy's folder.
  std::string uri_of(const std::string& server_uri) const;
  // The next COMMIT of any connection is cut as `cut` says; once, then connections pass again.
  void cut_next_commit(Cut cut) { cut_ = cut; }
  int cuts() const { return cuts_; }  // connections cut so far

 private:
  void serve();
  void release() noexcept;  // the sockets and the folder

  std::filesystem::path folder_, server_socket_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // written by the destructor to end serve()
  std::atomic<Cut> cut_{Cut::None};
  std::atomic<int> cuts_{0};
  std::thread thread_;
};

}  // namespace ampwb::test
