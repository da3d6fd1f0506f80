// Captured steps on the GPU: the compute stream recorded into a CUDA graph (stream capture) and replayed with one
// launch. The graph holds the addresses it was captured with, so what the capture allocates comes from a private pool
// of the allocator's, which nothing else is handed until the graph is gone.
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace ampwb {
namespace {

class CudaGraph final : public CapturedWork {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream, int device, Allocator& allocator, int pool,
            std::vector<Tensor> kept)
      : exec_(exec), stream_(stream), device_(device), allocator_(allocator), pool_(pool), kept_(std::move(kept)) {}
  ~CudaGraph() override {
    cuda::DeviceScope scope(device_);
    cudaStreamSynchronize(stream_);  // a replay still queued writes to the pool's blocks
    cudaGraphExecDestroy(exec_);
    cudaGetLastError();
    allocator_.release_pool(pool_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay() override {
    cuda::DeviceScope scope(device_);
    CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  int device_;
  Allocator& allocator_;
  int pool_;
  std::vector<Tensor> kept_;  // what the graph reads outside its pool (Impl::bytes_beside_capture)
};

std::string cuda_failure(const char* what, cudaError_t status) {
  return std::string(what) + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
}

}  // namespace

std::unique_ptr<CapturedWork> CudaBackend::capture(const std::function<void()>& queue, std::string& why_not) {
  cuda::DeviceScope scope(impl_->device.index);
  Impl& m = *impl_;
  AMPWB_CHECK(!m.capturing, "capture() inside a capture");
  // A graph cannot wait for an event recorded outside it: the uploads finish first and are forgotten. The steps
  // queued before finish too, once per capture: the segment tables below are written on the copy stream into
  // blocks from the shared cache, which their kernels may still be reading.
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.copy_stream));
  m.ready({});
  // The segment tables (the gradients', the parameters') are made again inside the capture (bytes_beside_capture):
  // the graph reads them for as long as it lives, whatever other tensor lists come meanwhile.
  m.scale_table = {};
  m.update_table = {};
  Allocator& allocator = allocator_for(m.device);
  allocator.empty_cache();  // the op-by-op steps' cached blocks: the pool holds a step of its own from here
  const int pool = allocator.new_pool();
  allocator.begin_pool(pool);
  m.capture_pool = pool;
  m.capture_kept.clear();
  m.capturing = true;
  m.conv->set_capturing(true);
  std::string failure;
  cudaGraph_t graph = nullptr;
  cudaError_t status = cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeRelaxed);
  if (status != cudaSuccess) {
    failure = cuda_failure("cudaStreamBeginCapture", status);
  } else {
    try {
      queue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    status = cudaStreamEndCapture(m.stream, &graph);  // also after a failure: the stream records no longer
    if (failure.empty() && status != cudaSuccess) failure = cuda_failure("cudaStreamEndCapture", status);
  }
  m.capturing = false;
  m.conv->set_capturing(false);
  allocator.end_pool();
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    status = cudaGraphInstantiate(&exec, graph, 0);
    if (status != cudaSuccess) failure = cuda_failure("cudaGraphInstantiate", status);
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture's error is reported below, not by the next launch check
  std::vector<Tensor> kept = std::move(m.capture_kept);
  m.capture_kept.clear();
  if (!failure.empty()) {
    allocator.release_pool(pool);  // nothing ran: what the capture allocated is anybody's again once freed
    why_not = failure;
    return nullptr;
  }
  return std::make_unique<CudaGraph>(exec, m.stream, m.device.index, allocator, pool, std::move(kept));
}

}  // namespace ampwb
