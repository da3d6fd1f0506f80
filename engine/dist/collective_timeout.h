// How long a collective waits for the other ranks, and the error it ends with when one of them never comes: a rank
// that is hung or stopped (SIGSTOP, a debugger, a stuck file system) would otherwise leave every other rank waiting
// forever in its all-reduce.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ampwb {

// PyTorch's default for NCCL: far above a legitimate wait (a slow rank's first step, with its data loading and
// oneDNN's primitive creation; rank 0 writing a checkpoint while the others wait), yet a bound.
inline constexpr std::chrono::milliseconds kDefaultCollectiveTimeout = std::chrono::minutes(10);

// How long a rank that failed waits at exit for the others to end too (Communicator::exiting_on_failure): a failure
// every rank shares reaches their exits within it; one the others do not share leaves them in a collective, and the
// job is ended. Rank 0 waits kFailedRankGrace; the others wait longer, so that rank 0 can record the end of a failure
// they share, a busy store's retries included, before any of them ends the job.
inline constexpr std::chrono::seconds kFailedRankGrace{15};
inline constexpr std::chrono::seconds kFailedRankGraceBesideRank0{75};

// A collective waited past its timeout for `ranks` (those that did not answer; empty where every rank answered but
// the collective still did not complete). The run can go on from its last checkpoint, so the trainer ends it as
// interrupted, not failed; the communicator is unusable afterwards, and the process ends the whole MPI job at exit.
class RankLostError : public Error {
 public:
  RankLostError(const std::string& what, std::vector<int> ranks) : Error(what), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const { return ranks_; }

 private:
  std::vector<int> ranks_;
};

}  // namespace ampwb
