// The single process's collectives: nothing to exchange, but a root other than 0 is a caller's error.
#include "dist/single_process_communicator.h"

#include <string>

#include "core/error.h"

namespace ampwb {

void SingleProcessCommunicator::broadcast(void*, size_t, int root) {
  // Refused as MPI would refuse it, so that a wrong root is found on one process before it hangs many.
  if (root != 0) throw Error("broadcast from rank " + std::to_string(root) + ", but a single process has rank 0 only");
}

}  // namespace ampwb
