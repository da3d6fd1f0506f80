#include "postgres_proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <list>
#include <stdexcept>
#include <vector>

namespace fs = std::filesystem;

namespace ampwb::test {
namespace {

sockaddr_un address_of(const fs::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof address.sun_path)
    throw std::runtime_error("socket path too long: " + path.string());
  std::strcpy(address.sun_path, path.c_str());
  return address;
}

// The length of the whole message at the front of `bytes` (its type byte, where it has one, included), or 0 while
// it has not all come.
size_t message_size(const std::string& bytes, bool typed) {
  const size_t header = typed ? 5 : 4;
  if (bytes.size() < header) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + (typed ? 1 : 0);
  const uint32_t length = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  const size_t size = (typed ? 1 : 0) + length;
  return bytes.size() >= size ? size : 0;
}

// A Parse message of the statement `sql` (libpq sends each statement of a pipeline so).
bool parses(const std::string& message, const char* sql) {
  if (message[0] != 'P') return false;
  const char* name = message.data() + 5;
  return std::strcmp(name + std::strlen(name) + 1, sql) == 0;
}

// The server's description of rows whose first column is `column`.
bool describes(const std::string& message, const char* column) {
  return message[0] == 'T' && std::strcmp(message.data() + 7, column) == 0;
}

// The server's CommandComplete of a COMMIT that committed (a failed transaction's COMMIT completes as ROLLBACK).
bool answers_commit(const std::string& message) {
  return message[0] == 'C' && std::strcmp(message.data() + 5, "COMMIT") == 0;
}

bool send_all(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

struct Link {
  int client = -1, server = -1;
  std::string from_client, from_server;  // received, not yet a whole message
  bool started = false;                  // the client's startup message (the only one without a type) passed
  bool holding = false;                  // a COMMIT held back: the connection is cut once the id is answered
  enum { Unasked, Described, Answered } xact_id = Unasked;  // the transaction's pg_current_xact_id()
  bool open = true;

  void close() {
    for (int fd : {client, server})
      if (fd >= 0) ::close(fd);
    client = server = -1;
    open = false;
  }
};

}  // namespace

PostgresProxy::PostgresProxy(const fs::path& server_socket) : server_socket_(server_socket) {
  std::string pattern = (fs::temp_directory_path() / "ampwb-pgproxy-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot make a folder for the proxy's socket");
  folder_ = pattern;
  const sockaddr_un address = address_of(folder_ / server_socket.filename());
  listener_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener_, 16) != 0 || ::pipe(wake_) != 0) {
    const std::string where = (folder_ / server_socket.filename()).string();
    release();
    throw std::runtime_error("cannot listen on " + where);
  }
  thread_ = std::thread([this] { serve(); });
}

PostgresProxy::~PostgresProxy() {
  if (::write(wake_[1], "x", 1) != 1) {
  }
  thread_.join();
  release();
}

void PostgresProxy::release() noexcept {
  for (int fd : {listener_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
  std::error_code ignored;
  fs::remove_all(folder_, ignored);
}

std::string PostgresProxy::uri_of(const std::string& server_uri) const {
  const size_t host = server_uri.find("host=");
  if (host == std::string::npos) throw std::runtime_error("no host in " + server_uri);
  const size_t end = server_uri.find('&', host);
  return server_uri.substr(0, host + 5) + folder_.string() + (end == std::string::npos ? "" : server_uri.substr(end));
}

void PostgresProxy::serve() {
  std::list<Link> links;
  const auto claim = [this](Cut cut) {
    Cut expected = cut;
    return cut_.compare_exchange_strong(expected, Cut::None);
  };
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    std::vector<std::pair<Link*, bool>> owners;  // fds[i + 2]: the link and whether it is its client's side
    for (Link& link : links) {
      fds.push_back({link.client, POLLIN, 0});
      owners.emplace_back(&link, true);
      fds.push_back({link.server, POLLIN, 0});
      owners.emplace_back(&link, false);
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      for (Link& link : links) link.close();
      return;
    }
    if (fds[0].revents) {
      for (Link& link : links) link.close();
      return;
    }
    if (fds[1].revents & POLLIN) {
      Link link;
      link.client = ::accept(listener_, nullptr, nullptr);
      const sockaddr_un address = address_of(server_socket_);
      link.server = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (link.client >= 0 && link.server >= 0 &&
          ::connect(link.server, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
        links.push_back(link);
      else
        link.close();
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      auto [link, from_client] = owners[i - 2];
      if (!link->open || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      const ssize_t n = ::recv(fds[i].fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        link->close();
        continue;
      }
      std::string& pending = from_client ? link->from_client : link->from_server;
      pending.append(buffer, static_cast<size_t>(n));
      for (;;) {
        const bool typed = !from_client || link->started;
        const size_t size = message_size(pending, typed);
        if (size == 0) break;
        const std::string message = pending.substr(0, size);
        pending.erase(0, size);
        if (from_client) {
          link->started = true;
          if (parses(message, "BEGIN")) link->xact_id = Link::Unasked;
          if (!link->holding && cut_ == Cut::BeforeCommitSent && parses(message, "COMMIT") &&
              claim(Cut::BeforeCommitSent))
            link->holding = true;
          if (!link->holding && !send_all(link->server, message)) link->close();
        } else if (cut_ == Cut::BeforeCommitAnswer && answers_commit(message) && claim(Cut::BeforeCommitAnswer)) {
          link->close();
          ++cuts_;
        } else {
          if (describes(message, "pg_current_xact_id")) link->xact_id = Link::Described;
          if (message[0] == 'C' && link->xact_id == Link::Described) link->xact_id = Link::Answered;
          if (!send_all(link->client, message)) link->close();
        }
        // A COMMIT held back: the connection is cut once the client has the transaction's id (the server sends it
        // at once), as a server's end or the network could cut it.
        if (link->open && link->holding && link->xact_id == Link::Answered) {
          link->close();
          ++cuts_;
        }
        if (!link->open) break;
      }
    }
    links.remove_if([](const Link& link) { return !link.open; });
  }
}

}  // namespace ampwb::test
