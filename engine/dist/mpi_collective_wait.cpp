// The wait for a non-blocking collective: MPI_Test between naps that grow from 10 µs to 250 µs, the other ranks'
// questions answered meanwhile, and past the timeout the questions of this rank to every other.
#include "dist/mpi_collective_wait.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "core/error.h"
#include "dist/collective_timeout.h"

namespace ampwb {
namespace {

using Clock = std::chrono::steady_clock;

// Tags on the duplicated communicator: a rank that waited too long asks, a rank that waits answers.
constexpr int kAreYouThere = 1, kHere = 2;
const int kMessage = 1;  // what both carry: only their arrival says something

// Tests back to back for the first 100 µs (a collective whose ranks are all there completes within it, and a nap
// would only add latency); after that a nap between tests, doubled up to 250 µs, so that a rank waiting for a slower
// one leaves the core to the data loader's threads or to backward on another thread. Measured on 2 ranks of a 2-core
// Zen 5: a 25 MiB all-reduce takes as long as MPI_Allreduce's (about 20 ms); a 1 MiB one about 0.5 ms more.
constexpr auto kSpin = std::chrono::microseconds(100);
constexpr auto kFirstNap = std::chrono::microseconds(10);
constexpr auto kLongestNap = std::chrono::microseconds(250);
// How long the questions wait for their answers: a rank that waits answers within a nap, one that computes answers
// when it next waits, which a rank that has left the others waiting for the whole timeout has little excuse not to.
constexpr auto kLongestQuestion = std::chrono::seconds(5);

std::atomic<bool> g_lost_a_rank{false};

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

MpiCollectiveWait::MpiCollectiveWait(int rank, int world_size, std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), timeout_(timeout), answers_(static_cast<size_t>(world_size), 0) {
  if (timeout <= std::chrono::milliseconds(0))
    throw Error("the collective timeout must be positive, not " + std::to_string(timeout.count()) + " ms");
  if (const int code = MPI_Comm_dup(MPI_COMM_WORLD, &questions_); code != MPI_SUCCESS) fail(code, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(questions_, MPI_ERRORS_RETURN);
}

MpiCollectiveWait::~MpiCollectiveWait() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && lost_.empty() && questions_ != MPI_COMM_NULL) MPI_Comm_free(&questions_);
}

bool MpiCollectiveWait::lost_a_rank() { return g_lost_a_rank.load(); }

void MpiCollectiveWait::fail(int code, const char* call) const {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string(call) + " failed on rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) +
              ": " + std::string(text, static_cast<size_t>(std::max(length, 0))));
}

void MpiCollectiveWait::throw_if_lost() const {
  if (!lost_.empty()) throw RankLostError(lost_, lost_ranks_);
}

void MpiCollectiveWait::complete(MPI_Request& request, const std::string& what) {
  throw_if_lost();
  const Clock::time_point start = Clock::now();
  std::chrono::microseconds nap = kFirstNap;
  for (;;) {
    int done = 0;
    if (const int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE); code != MPI_SUCCESS) fail(code, "MPI_Test");
    if (done) return;
    const Clock::duration waited = Clock::now() - start;
    if (waited < kSpin) continue;
    answer_questions();
    if (waited >= timeout_) break;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kLongestNap);
  }
  name_the_silent(request, what, start);
}

void MpiCollectiveWait::answer_questions() {
  for (;;) {
    int asked = 0;
    MPI_Status status;
    if (const int code = MPI_Iprobe(MPI_ANY_SOURCE, kAreYouThere, questions_, &asked, &status); code != MPI_SUCCESS)
      fail(code, "MPI_Iprobe");
    if (!asked) return;
    int question = 0;
    if (const int code =
            MPI_Recv(&question, 1, MPI_INT, status.MPI_SOURCE, kAreYouThere, questions_, MPI_STATUS_IGNORE);
        code != MPI_SUCCESS)
      fail(code, "MPI_Recv");
    // Freed at once: the answer needs no completion here, and its buffer is a constant.
    MPI_Request answer = MPI_REQUEST_NULL;
    if (const int code = MPI_Isend(&kMessage, 1, MPI_INT, status.MPI_SOURCE, kHere, questions_, &answer);
        code != MPI_SUCCESS)
      fail(code, "MPI_Isend");
    MPI_Request_free(&answer);
  }
}

void MpiCollectiveWait::name_the_silent(MPI_Request& request, const std::string& what, Clock::time_point start) {
  const Clock::time_point asked_at = Clock::now();
  std::vector<MPI_Request> answers(static_cast<size_t>(world_size_), MPI_REQUEST_NULL);
  std::vector<bool> answered(static_cast<size_t>(world_size_), false);
  answered[static_cast<size_t>(rank_)] = true;
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    if (const int code = MPI_Irecv(&answers_[static_cast<size_t>(r)], 1, MPI_INT, r, kHere, questions_,
                                   &answers[static_cast<size_t>(r)]);
        code != MPI_SUCCESS)
      fail(code, "MPI_Irecv");
    MPI_Request question = MPI_REQUEST_NULL;
    if (const int code = MPI_Isend(&kMessage, 1, MPI_INT, r, kAreYouThere, questions_, &question); code != MPI_SUCCESS)
      fail(code, "MPI_Isend");
    MPI_Request_free(&question);
  }
  // Unanswered questions are withdrawn, so that no late answer lands in a buffer after this wait.
  const auto withdraw = [&] {
    for (MPI_Request& answer : answers) {
      if (answer == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&answer);
      MPI_Request_free(&answer);
    }
  };
  const std::chrono::milliseconds asking = std::min<std::chrono::milliseconds>(timeout_, kLongestQuestion);
  while (Clock::now() - asked_at < asking) {
    int done = 0;
    if (const int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE); code != MPI_SUCCESS) fail(code, "MPI_Test");
    if (done) {  // the late rank came after all
      withdraw();
      return;
    }
    answer_questions();
    for (int r = 0; r < world_size_; ++r) {
      MPI_Request& answer = answers[static_cast<size_t>(r)];
      if (answer == MPI_REQUEST_NULL) continue;
      int arrived = 0;
      if (const int code = MPI_Test(&answer, &arrived, MPI_STATUS_IGNORE); code != MPI_SUCCESS) fail(code, "MPI_Test");
      if (arrived) answered[static_cast<size_t>(r)] = true;
    }
    std::this_thread::sleep_for(kLongestNap);
  }
  withdraw();

  std::vector<int> silent;
  for (int r = 0; r < world_size_; ++r)
    if (!answered[static_cast<size_t>(r)]) silent.push_back(r);
  const long long waited = std::llround(std::chrono::duration<double>(Clock::now() - start).count());
  std::string words = "rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + " waited " +
                      std::to_string(waited) + " s in " + what;
  if (silent.empty())
    words += ": every rank answered, yet the collective did not complete (the ranks called different collectives)";
  else
    words += " for " + rank_list(silent) + ", which did not answer: " + (silent.size() == 1 ? "it is" : "they are") +
             " hung or stopped";
  lost_ = words;
  lost_ranks_ = silent;
  g_lost_a_rank = true;
  throw RankLostError(lost_, lost_ranks_);
}

}  // namespace ampwb
