// Completing MPI's non-blocking collectives within a time limit: a rank waits for a collective by testing it (MPI_Test
// drives MPI's progress), napping between tests so that a waiting rank leaves the core to others, and answers the
// other ranks' "are you there?" meanwhile. Past the limit it asks every other rank the same and names those that do
// not answer. Only mpi_communicator.cpp uses it: MPI's types stay inside engine/dist/.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace ampwb {

class MpiCollectiveWait {
 public:
  // Duplicates MPI_COMM_WORLD for the questions, so that they never match a collective's messages; collective, as
  // every MpiCommunicator is made by every rank at the same point.
  MpiCollectiveWait(int rank, int world_size, std::chrono::milliseconds timeout);
  ~MpiCollectiveWait();
  MpiCollectiveWait(const MpiCollectiveWait&) = delete;
  MpiCollectiveWait& operator=(const MpiCollectiveWait&) = delete;

  // Returns once `request` (the collective `what`, as "MPI_Iallreduce of 1000 floats") has completed. Throws
  // RankLostError when it has not after the timeout and the questions that follow (up to 5 s more), naming the ranks
  // that did not answer; Error where MPI reports an error. After a RankLostError every call throws it again at once:
  // the collective left behind still holds its buffers, so no MPI call may follow but the MPI_Abort at exit.
  void complete(MPI_Request& request, const std::string& what);

  // Whether any wait in this process lost a rank: then MPI_Finalize, which waits for every rank, would never return,
  // and the process ends the MPI job with MPI_Abort instead (mpi_communicator.cpp).
  static bool lost_a_rank();

  // Throws the RankLostError again where a wait has lost a rank: called before a collective starts.
  void throw_if_lost() const;

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  void answer_questions();
  [[noreturn]] void fail(int code, const char* call) const;
  // Asks every other rank whether it is there and waits for the answers while still testing `request`: returns where
  // `request` completed meanwhile, else throws RankLostError.
  void name_the_silent(MPI_Request& request, const std::string& what, std::chrono::steady_clock::time_point start);

  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
  MPI_Comm questions_ = MPI_COMM_NULL;  // MPI_COMM_WORLD duplicated
  std::vector<int> answers_;            // each rank's answer lands here (MPI keeps the buffer until it arrives)
  std::string lost_;                    // the RankLostError's words once a rank is lost
  std::vector<int> lost_ranks_;
};

}  // namespace ampwb
