// MPI's start and end in the process, and the collectives as MPI calls on MPI_COMM_WORLD, each checked, its error
// naming the call and the rank.
#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/half.h"
#include "dist/mpi_collective_wait.h"

namespace ampwb {
namespace {

// MPI's counts are ints: larger buffers go in pieces of this many elements.
constexpr size_t kMaxPiece = size_t{1} << 30;

// MPI starts once per process and ends once, at exit: this owner's destructor, which runs after every communicator
// made during the run has gone (static objects are destroyed after main returns). Where a collective lost a rank, it
// ends the MPI job instead: MPI_Finalize would wait for the lost rank forever, and MPI_Abort makes mpirun end every
// rank, the hung one too. Where this process failed, MPI_Finalize waits for every rank, which may be waiting in a
// collective for this one: past a grace (collective_timeout.h), the job is ended too. The grace's MPI_Abort comes from
// a second thread while this one is in MPI_Finalize: outside MPI_THREAD_SERIALIZED's rules, but Open MPI's abort
// ends the job from any thread, and nothing else is left to run.
class MpiRuntime {
 public:
  static MpiRuntime& instance() {
    static MpiRuntime runtime;
    return runtime;
  }

  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (MpiCollectiveWait::lost_a_rank()) end_job("since a rank did not answer");
    if (!started_here_) return;
    std::thread watchdog;
    if (failed_) {
      watchdog = std::thread([this] {
        const std::chrono::seconds grace = rank_ == 0 ? kFailedRankGrace : kFailedRankGraceBesideRank0;
        std::unique_lock lock(mutex_);
        if (!finalized_.wait_for(lock, grace, [this] { return finalize_returned_; }))
          end_job("since the other ranks did not end within " + std::to_string(grace.count()) +
                  " s of this rank's failure");
      });
    }
    MPI_Finalize();
    if (watchdog.joinable()) {
      {
        std::lock_guard lock(mutex_);
        finalize_returned_ = true;
      }
      finalized_.notify_all();
      watchdog.join();
    }
  }

  void set_failed() { failed_ = true; }

  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  // MPI_Abort makes mpirun (or srun) end every rank of the job.
  void end_job(const std::string& why) {
    // Said here because mpirun's own account of the abort is not always printed (its help text can fail to send).
    std::fprintf(stderr, "rank %d: ending the MPI job, %s\n", rank_, why.c_str());
    std::fflush(nullptr);  // MPI_Abort ends the process before exit would flush what it printed
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (initialized) {
      MPI_Query_thread(&provided);
    } else {
      // SERIALIZED, not FUNNELED: the calls come from the trainer's thread (a worker thread in the GUI) and later
      // from a communication thread, never two at once, since every rank must issue its collectives in one order
      // anyway; MULTIPLE would only add MPI's own locking.
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed: MPI could not start in this process");
      started_here_ = true;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      if (started_here_) MPI_Finalize();
      throw Error("this MPI library offers thread level " + std::to_string(provided) +
                  ", below MPI_THREAD_SERIALIZED, which the communicator needs to be called from the trainer's thread");
    }
    // Errors come back as codes, so that a failed collective becomes an Error naming the rank instead of an abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }

  bool started_here_ = false;
  int rank_ = 0;
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::condition_variable finalized_;
  bool finalize_returned_ = false;
};

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(std::max(length, 0)));
  version = version.substr(0, version.find_first_of(",\n"));  // "Open MPI v4.1.4, package: ..." → "Open MPI v4.1.4"
  if (const size_t v = version.find(" v");
      v != std::string::npos && v + 2 < version.size() && std::isdigit(static_cast<unsigned char>(version[v + 2])))
    version.erase(v + 1, 1);
  while (!version.empty() && std::isspace(static_cast<unsigned char>(version.back()))) version.pop_back();
  return version.empty() ? "MPI" : version;
}

[[noreturn]] void fail(int code, const char* call, int rank, int world_size) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string(call) + " failed on rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
              ": " + std::string(text, static_cast<size_t>(std::max(length, 0))));
}

// Each piece started non-blocking and completed by `wait`, which bounds the wait for the other ranks.
template <class T>
void all_reduce_in_pieces(T* data, size_t count, MPI_Datatype type, const char* elements, MpiCollectiveWait& wait,
                          int rank, int world_size, MPI_Op op = MPI_SUM) {
  for (size_t done = 0; done < count;) {
    const size_t piece = std::min(kMaxPiece, count - done);
    MPI_Request request = MPI_REQUEST_NULL;
    const int code =
        MPI_Iallreduce(MPI_IN_PLACE, data + done, static_cast<int>(piece), type, op, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) fail(code, "MPI_Iallreduce", rank, world_size);
    wait.complete(request, "MPI_Iallreduce of " + std::to_string(piece) + " " + elements);
    done += piece;
  }
}

// MPI has no 16-bit float: a 2-byte type whose sums add in FP32 and round back to nearest even, one op per format.
template <uint16_t (*round)(float), float (*widen)(uint16_t)>
void add_16bit(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = round(widen(a[i]) + widen(b[i]));
}

struct Float16Sums {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op f16 = MPI_OP_NULL, bf16 = MPI_OP_NULL;

  // Made on first use, under the communicator's call lock, once MPI has started; MPI_Finalize frees them.
  static const Float16Sums& get() {
    static const Float16Sums sums = [] {
      Float16Sums s;
      MPI_Type_contiguous(2, MPI_BYTE, &s.type);
      MPI_Type_commit(&s.type);
      // Commutative: a + b and b + a round alike, so every rank ends with the same bits.
      MPI_Op_create(&add_16bit<float_to_half_bits, half_bits_to_float>, 1, &s.f16);
      MPI_Op_create(&add_16bit<float_to_bfloat16_bits, bfloat16_bits_to_float>, 1, &s.bf16);
      return s;
    }();
    return sums;
  }
};

}  // namespace

MpiCommunicator::MpiCommunicator(const LaunchInfo& launch, std::chrono::milliseconds collective_timeout)
    : local_rank_(launch.local_rank) {
  MpiRuntime::instance();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  if (rank_ != launch.rank || world_size_ != launch.world_size)
    throw Error("the launcher's variables say " + ampwb::describe(launch) + ", but MPI says rank " +
                std::to_string(rank_) + " of " + std::to_string(world_size_) +
                ": was this process started by the launcher itself (mpirun, or srun inside an sbatch script)?");
  description_ = library_version() + ", " + std::to_string(world_size_) + (world_size_ == 1 ? " rank" : " ranks");
  wait_ = std::make_unique<MpiCollectiveWait>(rank_, world_size_, collective_timeout);
}

MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::all_reduce_sum(float* data, size_t count) {
  std::lock_guard lock(call_mutex_);
  wait_->throw_if_lost();
  all_reduce_in_pieces(data, count, MPI_FLOAT, "floats", *wait_, rank_, world_size_);
}

void MpiCommunicator::all_reduce_sum(double* data, size_t count) {
  std::lock_guard lock(call_mutex_);
  wait_->throw_if_lost();
  all_reduce_in_pieces(data, count, MPI_DOUBLE, "doubles", *wait_, rank_, world_size_);
}

void MpiCommunicator::all_reduce_sum(int64_t* data, size_t count) {
  std::lock_guard lock(call_mutex_);
  wait_->throw_if_lost();
  all_reduce_in_pieces(data, count, MPI_INT64_T, "64-bit counts", *wait_, rank_, world_size_);
}

void MpiCommunicator::all_reduce_sum(uint16_t* data, size_t count, Float16Format format) {
  std::lock_guard lock(call_mutex_);
  wait_->throw_if_lost();
  const Float16Sums& sums = Float16Sums::get();
  all_reduce_in_pieces(data, count, sums.type, format == Float16Format::F16 ? "FP16 values" : "BF16 values", *wait_,
                       rank_, world_size_, format == Float16Format::F16 ? sums.f16 : sums.bf16);
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  // Checked here, not by MPI: a root outside the ranks is a caller's error worth its own words.
  if (root < 0 || root >= world_size_)
    throw Error("broadcast from rank " + std::to_string(root) + ", but the ranks are 0 .. " +
                std::to_string(world_size_ - 1));
  std::lock_guard lock(call_mutex_);
  wait_->throw_if_lost();
  auto* bytes_at = static_cast<char*>(data);
  for (size_t done = 0; done < bytes;) {
    const size_t piece = std::min(kMaxPiece, bytes - done);
    MPI_Request request = MPI_REQUEST_NULL;
    const int code = MPI_Ibcast(bytes_at + done, static_cast<int>(piece), MPI_BYTE, root, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) fail(code, "MPI_Ibcast", rank_, world_size_);
    wait_->complete(request, "MPI_Ibcast of " + std::to_string(piece) + " bytes from rank " + std::to_string(root));
    done += piece;
  }
}

void MpiCommunicator::exiting_on_failure() { MpiRuntime::instance().set_failed(); }

void MpiCommunicator::barrier() {
  std::lock_guard lock(call_mutex_);
  wait_->throw_if_lost();
  MPI_Request request = MPI_REQUEST_NULL;
  const int code = MPI_Ibarrier(MPI_COMM_WORLD, &request);
  if (code != MPI_SUCCESS) fail(code, "MPI_Ibarrier", rank_, world_size_);
  wait_->complete(request, "MPI_Ibarrier");
}

}  // namespace ampwb
