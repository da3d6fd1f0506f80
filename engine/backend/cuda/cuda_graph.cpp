// Captured steps on the GPU: the compute stream recorded into a CUDA graph (stream capture) and replayed with one
// launch. The graph holds the addresses it was captured with, so what the capture allocates comes from a pool of
// the allocator's, which nothing else is handed while a graph that uses it lives. Every captured step of a backend
// shares one pool (they replay one after another, never at once), and each is recorded twice: the first recording
// only measures what the step allocates and when it frees it, so that the second places every block at an offset
// planned in advance (core/memory_plan.h) and the pool holds little more than the step's peak.
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace ampwb {
namespace {

class CudaGraph final : public CapturedWork {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream, int device, std::shared_ptr<CapturePool> pool,
            std::vector<Tensor> kept)
      : exec_(exec), stream_(stream), device_(device), pool_(std::move(pool)), kept_(std::move(kept)) {}
  ~CudaGraph() override {
    cuda::DeviceScope scope(device_);
    cudaStreamSynchronize(stream_);  // a replay still queued writes to the pool's blocks
    cudaGraphExecDestroy(exec_);
    cudaGetLastError();
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
  std::shared_ptr<CapturePool> pool_;  // released with the last graph
  std::vector<Tensor> kept_;           // what the graph reads outside its pool (Impl::bytes_beside_capture)
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
  Allocator& allocator = allocator_for(m.device);
  allocator.empty_cache();  // the op-by-op steps' cached blocks: the pool holds a step of its own from here
  std::shared_ptr<CapturePool> pool = m.captures_pool.lock();
  if (!pool) m.captures_pool = pool = std::make_shared<CapturePool>(allocator, allocator.new_pool());

  // Records queue() into a graph, its memory from `into`; "" or why it failed.
  auto record = [&](int into, cudaGraph_t& graph) -> std::string {
    // The segment tables (the gradients', the parameters') are made again inside each recording
    // (bytes_beside_capture): the graph reads them for as long as it lives, whatever other tensor lists come.
    m.scale_table = {};
    m.update_table = {};
    m.capture_kept.clear();
    allocator.begin_pool(into);
    m.capture_pool = into;
    m.capturing = true;
    m.conv->set_capturing(true);
    std::string failure;
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
    cudaGetLastError();  // a failed capture's error is reported below, not by the next launch check
    return failure;
  };

  // The first recording, into a pool of its own, measures the step's memory; its graph is never run. Its pool goes
  // before the arena is made, so that the two are never held at once: its blocks still held go to the shared cache
  // when the second recording frees them.
  const int measuring = allocator.new_pool();
  cudaGraph_t graph = nullptr;
  std::string failure = record(measuring, graph);
  if (graph) cudaGraphDestroy(graph);
  graph = nullptr;
  const MemoryTrace trace = allocator.pool_trace(measuring);
  allocator.release_pool(measuring);
  allocator.empty_cache();
  if (failure.empty()) {
    try {
      allocator.plan_pool(pool->id, trace);
    } catch (const std::exception& e) {  // out of memory for the arena
      failure = e.what();
    }
  }
  if (failure.empty()) failure = record(pool->id, graph);
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    if (status != cudaSuccess) failure = cuda_failure("cudaGraphInstantiate", status);
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  allocator.empty_cache();  // the first recording's blocks that the second freed
  std::vector<Tensor> kept = std::move(m.capture_kept);
  m.capture_kept.clear();
  if (!failure.empty()) {
    // Nothing ran. What the recordings allocated from the shared pool stays its own while other graphs use it.
    why_not = failure;
    return nullptr;
  }
  return std::make_unique<CudaGraph>(exec, m.stream, m.device.index, std::move(pool), std::move(kept));
}

}  // namespace ampwb
