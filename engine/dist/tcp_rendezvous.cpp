// The rendezvous over TCP: rank 0's listener and the other ranks' retried connections, each read and write bounded
// by the one deadline. On the wire, a rank's greeting is "ampwb-rv", its rank, the world size and the bytes it expects
// (big-endian); rank 0 answers with "ampwb-rv", the byte count and the bytes.
#include "dist/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace ampwb {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<char, 8> kMagic = {'a', 'm', 'p', 'w', 'b', '-', 'r', 'v'};
constexpr size_t kGreetingBytes = 8 + 4 + 4 + 8;  // magic, rank, world size, blob bytes
constexpr size_t kAnswerBytes = 8 + 8;            // magic, blob bytes; then the blob
// Between two attempts to reach rank 0: short enough that a rank starting late costs little.
constexpr std::chrono::milliseconds kRetryPause{100};

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

// Waits for `events` on `fd` until `until`; false where the time runs out first.
bool wait_for(int fd, short events, Clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1'000'000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

// All `n` bytes, or as many as came before the peer closed, failed or the time ran out.
size_t receive(int fd, void* data, size_t n, Clock::time_point until) {
  auto* at = static_cast<char*>(data);
  size_t done = 0;
  while (done < n && wait_for(fd, POLLIN, until)) {
    const ssize_t got = ::recv(fd, at + done, n - done, 0);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    done += static_cast<size_t>(got);
  }
  return done;
}

// Whether all `n` bytes went (MSG_NOSIGNAL: a peer gone is an answer, not a SIGPIPE).
bool send_all(int fd, const void* data, size_t n, Clock::time_point until) {
  const auto* at = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    if (!wait_for(fd, POLLOUT, until)) return false;
    const ssize_t sent = ::send(fd, at + done, n - done, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    done += static_cast<size_t>(sent);
  }
  return true;
}

void put_u32(char* at, uint32_t value) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>(value >> (24 - 8 * i));
}
void put_u64(char* at, uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(value >> (56 - 8 * i));
}
uint64_t get_u(const char* at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) value = (value << 8) | static_cast<unsigned char>(at[i]);
  return value;
}
bool has_magic(const char* at) { return std::memcmp(at, kMagic.data(), kMagic.size()) == 0; }

std::string address_text(const sockaddr* address) {
  sockaddr_in v4{};  // an IPv4 peer of the dual-stack listener, said as IPv4 (not [::ffff:10.0.0.5])
  if (const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
      address->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
    v4.sin_family = AF_INET;
    v4.sin_port = v6->sin6_port;
    std::memcpy(&v4.sin_addr, v6->sin6_addr.s6_addr + 12, 4);
    address = reinterpret_cast<const sockaddr*>(&v4);
  }
  char host[NI_MAXHOST] = {};
  char port[NI_MAXSERV] = {};
  const socklen_t length = address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(address, length, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "an unknown address";
  const std::string h(host);
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
}

// Every interface, IPv6 with IPv4 mapped where the machine has IPv6, else IPv4: ranks may reach rank 0 by any of the
// machine's names, as torchrun's store allows.
Socket listen_on(uint16_t port) {
  std::string why;
  for (const int family : {AF_INET6, AF_INET}) {
    Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.fd() < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int yes = 1, no = 0;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // a port just freed by a previous run
    sockaddr_storage address{};
    socklen_t length = 0;
    if (family == AF_INET6) {
      ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&address);
      a6->sin6_family = AF_INET6;
      a6->sin6_addr = in6addr_any;
      a6->sin6_port = htons(port);
      length = sizeof(sockaddr_in6);
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&address);
      a4->sin_family = AF_INET;
      a4->sin_addr.s_addr = htonl(INADDR_ANY);
      a4->sin_port = htons(port);
      length = sizeof(sockaddr_in);
    }
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&address), length) == 0 && ::listen(s.fd(), 128) == 0) return s;
    why = std::strerror(errno);
    if (errno == EADDRINUSE) break;  // the other family would say the same
  }
  throw Error("rank 0 cannot listen on MASTER_PORT=" + std::to_string(port) + ": " + why +
              " (another program, or a previous run still ending, holds it: choose another MASTER_PORT)");
}

// Rank 0: one connection per other rank, each greeted, checked and answered with the blob.
void serve_ranks(const LaunchInfo& launch, const void* blob, size_t bytes, std::chrono::milliseconds deadline) {
  const uint16_t port = *launch.master_port;
  const std::string where = "rank 0 (listening on MASTER_PORT=" + std::to_string(port) + ")";
  const Clock::time_point until = Clock::now() + deadline;
  Socket listener = listen_on(port);
  std::vector<std::string> arrived_from(static_cast<size_t>(launch.world_size));
  int missing = launch.world_size - 1;
  while (missing > 0) {
    if (!wait_for(listener.fd(), POLLIN, until)) {
      std::string absent;
      for (int r = 1; r < launch.world_size; ++r)
        if (arrived_from[static_cast<size_t>(r)].empty()) absent += (absent.empty() ? "" : ", ") + std::to_string(r);
      throw Error(where + " waited " + seconds_text(deadline) + ", but rank" + (missing == 1 ? " " : "s ") + absent +
                  " of WORLD_SIZE=" + std::to_string(launch.world_size) +
                  " never connected: did they start, with MASTER_ADDR naming this machine and MASTER_PORT=" +
                  std::to_string(port) + "?");
    }
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    Socket connection(::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&peer), &peer_length, SOCK_CLOEXEC));
    if (connection.fd() < 0) continue;  // the peer gave up before it was taken: it will retry
    const std::string from = address_text(reinterpret_cast<sockaddr*>(&peer));

    char greeting[kGreetingBytes] = {};
    const size_t got = receive(connection.fd(), greeting, sizeof greeting, until);
    if (got < sizeof greeting || !has_magic(greeting))
      throw Error(where + ": a connection from " + from +
                  " did not greet as an ampwb rank (another program using MASTER_PORT? choose a free port)");
    const auto rank = static_cast<int64_t>(get_u(greeting + 8, 4));
    const auto world_size = static_cast<int64_t>(get_u(greeting + 12, 4));
    const uint64_t expected = get_u(greeting + 16, 8);
    if (world_size != launch.world_size)
      throw Error(where + ": the rank at " + from + " has WORLD_SIZE=" + std::to_string(world_size) +
                  ", this one WORLD_SIZE=" + std::to_string(launch.world_size) + ": start every rank with the same");
    if (rank < 1 || rank >= launch.world_size)
      throw Error(where + ": the rank at " + from + " says RANK=" + std::to_string(rank) + ", not within 1 .. " +
                  std::to_string(launch.world_size - 1));
    std::string& first = arrived_from[static_cast<size_t>(rank)];
    if (!first.empty())
      throw Error(where + ": two processes say RANK=" + std::to_string(rank) + " (from " + first + " and " + from +
                  "): every rank needs its own RANK");
    if (expected != bytes)
      throw Error(where + ": the rank at " + from + " expects " + std::to_string(expected) + " bytes, not " +
                  std::to_string(bytes) + ": every rank must run the same ampwb");
    char answer[kAnswerBytes] = {};
    std::memcpy(answer, kMagic.data(), kMagic.size());
    put_u64(answer + 8, bytes);
    if (!send_all(connection.fd(), answer, sizeof answer, until) || !send_all(connection.fd(), blob, bytes, until))
      throw Error(where + ": rank " + std::to_string(rank) + " at " + from + " left before it took the run's id");
    first = from;
    --missing;
  }
}

// A connection to rank 0 from one of `addresses`, each attempt bounded by `until`; invalid Socket and `why` where
// none answered.
Socket connect_once(const addrinfo* addresses, Clock::time_point until, std::string& why) {
  for (const addrinfo* a = addresses; a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (s.fd() < 0) {
      why = std::strerror(errno);
      continue;
    }
    int code = ::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (code == EINPROGRESS) {
      if (!wait_for(s.fd(), POLLOUT, until)) {
        why = "no answer";
        continue;
      }
      socklen_t length = sizeof code;
      ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &code, &length);
    }
    if (code == 0) return s;
    why = std::strerror(code);
  }
  return Socket();
}

// A rank other than 0: connects (retrying), greets, and reads the blob.
void join_rank0(const LaunchInfo& launch, void* blob, size_t bytes, std::chrono::milliseconds deadline) {
  const std::string port = std::to_string(*launch.master_port);
  const std::string target = "rank 0 at MASTER_ADDR:MASTER_PORT=" + launch.master_addr + ":" + port;
  const std::string me = "rank " + std::to_string(launch.rank);
  const Clock::time_point until = Clock::now() + deadline;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (const int code = ::getaddrinfo(launch.master_addr.c_str(), port.c_str(), &hints, &addresses); code != 0)
    throw Error(me + " cannot find MASTER_ADDR='" + launch.master_addr + "': " + ::gai_strerror(code));
  std::string why;
  int attempts = 0;
  Socket connection;
  for (;;) {
    ++attempts;
    connection = connect_once(addresses, until, why);
    if (connection.fd() >= 0 || Clock::now() + kRetryPause >= until) break;
    std::this_thread::sleep_for(kRetryPause);  // rank 0 may not be listening yet
  }
  ::freeaddrinfo(addresses);
  if (connection.fd() < 0)
    throw Error(me + " could not reach " + target + " within " + seconds_text(deadline) + " (" +
                std::to_string(attempts) + (attempts == 1 ? " attempt" : " attempts") + ", the last: " + why +
                "): is rank 0 running, with the same MASTER_ADDR and MASTER_PORT as this rank?");

  char greeting[kGreetingBytes] = {};
  std::memcpy(greeting, kMagic.data(), kMagic.size());
  put_u32(greeting + 8, static_cast<uint32_t>(launch.rank));
  put_u32(greeting + 12, static_cast<uint32_t>(launch.world_size));
  put_u64(greeting + 16, bytes);
  char answer[kAnswerBytes] = {};
  const bool sent = send_all(connection.fd(), greeting, sizeof greeting, until);
  const size_t got = sent ? receive(connection.fd(), answer, sizeof answer, until) : 0;
  if (got == 0)
    throw Error(me + ": " + target +
                " closed the connection without an answer (it refused this rank: see its message)");
  if (got < sizeof answer || !has_magic(answer))
    throw Error(me + ": " + target + " answered, but not as rank 0 of an ampwb run (another program on that port?)");
  if (get_u(answer + 8, 8) != bytes)
    throw Error(me + ": " + target + " sends " + std::to_string(get_u(answer + 8, 8)) + " bytes, not " +
                std::to_string(bytes) + ": every rank must run the same ampwb");
  if (receive(connection.fd(), blob, bytes, until) < bytes)
    throw Error(me + ": " + target + " stopped before it had sent the run's id");
}

}  // namespace

void tcp_rendezvous(const LaunchInfo& launch, void* blob, size_t bytes, std::chrono::milliseconds deadline) {
  if (launch.world_size == 1) return;
  if (!launch.master_port || (launch.rank != 0 && launch.master_addr.empty()))
    throw Error("rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world_size) +
                " has no MASTER_ADDR and MASTER_PORT to meet the other ranks at");
  if (launch.rank == 0)
    serve_ranks(launch, blob, bytes, deadline);
  else
    join_rank0(launch, blob, bytes, deadline);
}

}  // namespace ampwb
