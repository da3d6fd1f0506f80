// The rendezvous of torchrun-style ranks (engine/dist/tcp_rendezvous.h) on this machine's loopback: ranks as threads
// of this process, on a port the kernel says is free, rank 0's bytes reaching every other rank whoever starts first,
// and every failure (nobody listening, a rank that never comes, a peer that is not an ampwb rank, ranks that disagree)
// an Error in words, bounded by the deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/tcp_rendezvous.h"

namespace ampwb {
namespace {

using std::chrono::milliseconds;

constexpr size_t kIdBytes = 128;  // NCCL's unique id

// A loopback socket bound to a port the kernel chose: the port is free once the socket is closed.
int bound_loopback_socket(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  port = ntohs(address.sin_port);
  return fd;
}

uint16_t free_port() {
  uint16_t port = 0;
  ::close(bound_loopback_socket(port));
  return port;
}

LaunchInfo rank_of(int rank, int world_size, uint16_t port) {
  LaunchInfo launch;
  launch.launcher = Launcher::Torchrun;
  launch.rank = rank;
  launch.world_size = world_size;
  launch.local_rank = rank;
  launch.master_addr = "127.0.0.1";
  launch.master_port = port;
  return launch;
}

std::vector<uint8_t> id_pattern() {
  std::vector<uint8_t> id(kIdBytes);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i * 7 + 3);
  return id;
}

// The rendezvous of `launch` on its own thread; the future's value is what this rank ends with, or the Error's text.
std::future<std::string> start(const LaunchInfo& launch, std::vector<uint8_t>& blob, milliseconds deadline) {
  return std::async(std::launch::async, [launch, &blob, deadline]() -> std::string {
    try {
      tcp_rendezvous(launch, blob.data(), blob.size(), deadline);
      return "ok";
    } catch (const Error& e) {
      return e.what();
    }
  });
}

// A raw client: connects to the port and sends `bytes`, then closes.
void send_raw(uint16_t port, const std::string& bytes) {
  for (int attempt = 0; attempt < 600; ++attempt) {  // until rank 0 listens
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
      ::close(fd);
      return;
    }
    ::close(fd);
    ::usleep(10'000);
  }
  ADD_FAILURE() << "rank 0 never listened on port " << port;
}

TEST(TcpRendezvous, RankZerosBytesReachEveryRank) {
  const uint16_t port = free_port();
  std::vector<uint8_t> id0 = id_pattern(), id1(kIdBytes), id2(kIdBytes);
  // The other ranks start first: they retry until rank 0 listens.
  std::future<std::string> rank1 = start(rank_of(1, 3, port), id1, milliseconds(60'000));
  std::future<std::string> rank2 = start(rank_of(2, 3, port), id2, milliseconds(60'000));
  std::future<std::string> rank0 = start(rank_of(0, 3, port), id0, milliseconds(60'000));
  EXPECT_EQ(rank0.get(), "ok");
  EXPECT_EQ(rank1.get(), "ok");
  EXPECT_EQ(rank2.get(), "ok");
  EXPECT_EQ(id0, id_pattern());  // rank 0 keeps its own
  EXPECT_EQ(id1, id_pattern());
  EXPECT_EQ(id2, id_pattern());
}

TEST(TcpRendezvous, AWorldOfOneMeetsNobody) {
  std::vector<uint8_t> id = id_pattern();
  LaunchInfo alone;  // no MASTER_ADDR, no MASTER_PORT: nothing to listen on
  tcp_rendezvous(alone, id.data(), id.size(), milliseconds(1));
  EXPECT_EQ(id, id_pattern());
}

TEST(TcpRendezvous, NobodyListeningEndsAtTheDeadlineNamingTheAddress) {
  const uint16_t port = free_port();
  std::vector<uint8_t> id(kIdBytes);
  const std::string error = start(rank_of(1, 2, port), id, milliseconds(300)).get();
  EXPECT_NE(error.find("rank 1 could not reach rank 0 at MASTER_ADDR:MASTER_PORT=127.0.0.1:" + std::to_string(port) +
                       " within 300 ms ("),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("the last: Connection refused): is rank 0 running, with the same MASTER_ADDR and MASTER_PORT"),
            std::string::npos)
      << error;
}

TEST(TcpRendezvous, RankZeroNamesTheRanksThatNeverCame) {
  const uint16_t port = free_port();
  std::vector<uint8_t> id0 = id_pattern(), id2(kIdBytes);
  std::future<std::string> rank2 = start(rank_of(2, 3, port), id2, milliseconds(60'000));
  const std::string error = start(rank_of(0, 3, port), id0, milliseconds(2'000)).get();
  EXPECT_EQ(rank2.get(), "ok");  // taken before rank 0 gave up on rank 1
  EXPECT_EQ(id2, id_pattern());
  EXPECT_NE(error.find("rank 0 (listening on MASTER_PORT=" + std::to_string(port) +
                       ") waited 2 s, but rank 1 of WORLD_SIZE=3 never connected"),
            std::string::npos)
      << error;
}

TEST(TcpRendezvous, RankZeroRefusesAPeerThatIsNoRank) {
  const uint16_t port = free_port();
  std::vector<uint8_t> id0 = id_pattern();
  std::future<std::string> rank0 = start(rank_of(0, 2, port), id0, milliseconds(60'000));
  send_raw(port, "GET / HTTP/1.1\r\n\r\n");
  const std::string error = rank0.get();
  EXPECT_NE(error.find("rank 0 (listening on MASTER_PORT=" + std::to_string(port) + "): a connection from 127.0.0.1:"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("did not greet as an ampwb rank (another program using MASTER_PORT?"), std::string::npos)
      << error;
}

TEST(TcpRendezvous, ARankRefusesAnAnswerThatIsNoRankZero) {
  uint16_t port = 0;
  const int listener = bound_loopback_socket(port);
  ASSERT_EQ(::listen(listener, 1), 0);
  std::vector<uint8_t> id(kIdBytes);
  std::future<std::string> rank1 = start(rank_of(1, 2, port), id, milliseconds(60'000));
  const int connection = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(connection, 0);
  const std::string answer = "HTTP/1.1 400 Bad Request\r\n\r\n";
  EXPECT_EQ(::send(connection, answer.data(), answer.size(), MSG_NOSIGNAL), static_cast<ssize_t>(answer.size()));
  ::close(connection);
  ::close(listener);
  const std::string error = rank1.get();
  EXPECT_NE(error.find("rank 1: rank 0 at MASTER_ADDR:MASTER_PORT=127.0.0.1:" + std::to_string(port) +
                       " answered, but not as rank 0 of an ampwb run"),
            std::string::npos)
      << error;
}

TEST(TcpRendezvous, RanksOfDifferentWorldSizesAreRefusedOnBothSides) {
  const uint16_t port = free_port();
  std::vector<uint8_t> id0 = id_pattern(), id1(kIdBytes);
  std::future<std::string> rank0 = start(rank_of(0, 2, port), id0, milliseconds(60'000));
  std::future<std::string> rank1 = start(rank_of(1, 3, port), id1, milliseconds(60'000));
  const std::string error0 = rank0.get();
  const std::string error1 = rank1.get();
  EXPECT_NE(error0.find("has WORLD_SIZE=3, this one WORLD_SIZE=2: start every rank with the same"), std::string::npos)
      << error0;
  EXPECT_NE(error1.find("rank 1: rank 0 at MASTER_ADDR:MASTER_PORT=127.0.0.1:" + std::to_string(port) +
                        " closed the connection without an answer (it refused this rank: see its message)"),
            std::string::npos)
      << error1;
}

TEST(TcpRendezvous, TwoProcessesSayingOneRankAreRefused) {
  const uint16_t port = free_port();
  std::vector<uint8_t> id0 = id_pattern(), first(kIdBytes), second(kIdBytes);
  std::future<std::string> rank1 = start(rank_of(1, 3, port), first, milliseconds(60'000));
  std::future<std::string> rank0 = start(rank_of(0, 3, port), id0, milliseconds(60'000));
  EXPECT_EQ(rank1.get(), "ok");  // the first to say RANK=1 is taken
  const std::string again = start(rank_of(1, 3, port), second, milliseconds(60'000)).get();
  const std::string error = rank0.get();
  EXPECT_NE(error.find("two processes say RANK=1 (from 127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(again.find("closed the connection without an answer"), std::string::npos) << again;
}

}  // namespace
}  // namespace ampwb
