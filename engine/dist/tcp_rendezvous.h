// The meeting of torchrun-style ranks, which have no MPI to meet through: rank 0 listens at MASTER_ADDR:MASTER_PORT,
// every other rank connects there, and rank 0 sends each the same bytes (NCCL's unique id). Plain POSIX sockets.
#pragma once

#include <chrono>
#include <cstddef>

#include "dist/launch.h"

namespace ampwb {

// How long every rank waits for the others, as torchrun's own rendezvous does by default (its --rdzv-timeout is
// longer, but a rank that has not started a minute after the first is not coming).
inline constexpr std::chrono::milliseconds kRendezvousDeadline{60'000};

// Like a broadcast from rank 0: rank 0's `bytes` bytes at `blob` copied into every other rank's `blob`. Rank 0 listens
// on every interface at launch.master_port and returns once each of the world_size - 1 other ranks has connected and
// taken the bytes; another rank connects to launch.master_addr:master_port, retrying until the deadline, since rank 0
// may start after it. A world of one returns at once. Throws Error, naming the address and this rank, where the
// deadline passes (the ranks missing, or what the last connection attempt said), where a peer is not an ampwb rank of
// the same run (another program on the port; another world size or blob size), or where two peers say the same rank.
void tcp_rendezvous(const LaunchInfo& launch, void* blob, size_t bytes,
                    std::chrono::milliseconds deadline = kRendezvousDeadline);

}  // namespace ampwb
