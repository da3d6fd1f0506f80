// Convolutions on cuDNN's graph API through cudnn-frontend (NVIDIA's header-only C++ API, fetched pinned by
// scripts/install-deps.sh for CUDA builds). cuDNN 9 deprecates the legacy per-op calls (cuda_conv.cpp), and its
// graph API offers engines the legacy API does not reach: in NHWC strict FP32 the legacy API has two implicit-GEMM
// algorithms only. Built without the headers, compiled() is false and nothing here runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>
#include <unordered_map>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_library_check.h"
#include "core/error.h"

#if AMPWB_HAVE_CUDNN_FRONTEND
#include <dlfcn.h>

#include <cudnn_frontend.h>

// The frontend, built to load its libraries itself, calls cuDNN through this handle (set by GraphApiConvs).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}
#endif

namespace ampwb::cuda {

#if AMPWB_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

namespace {

fe::DataType_t graph_type(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return fe::DataType_t::FLOAT;
    case CUDNN_DATA_HALF:
      return fe::DataType_t::HALF;
    case CUDNN_DATA_BFLOAT16:
      return fe::DataType_t::BFLOAT16;
    case CUDNN_DATA_FP8_E4M3:
      return fe::DataType_t::FP8_E4M3;
    case CUDNN_DATA_FP8_E5M2:
      return fe::DataType_t::FP8_E5M2;
    default:
      throw Error("cuDNN's graph API convolutions take FP32, FP16, BF16 or FP8");
  }
}

// A 4-d tensor's strides in the convolution's layout: NHWC (weights KRSC) or NCHW.
std::vector<int64_t> strides(bool nhwc, int64_t c, int64_t h, int64_t w) {
  if (nhwc) return {c * h * w, 1, c * w, c};
  return {c * h * w, h * w, w, 1};
}

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// One pass as a graph of one node: the inputs a, b and the output, each with its dimensions (N,C,H,W order) and
// strides in the shape's layout. With `epilogue` (mixed passes only) the convolution's result is multiplied by 1 in
// FP32 before it is written: a convolution and its pointwise scales is the shape of NVIDIA's FP8 convolution sample,
// which cuDNN's runtime fusion engines take where a convolution alone may find no engine. A scaled shape always has
// the epilogue, its factor an FP32 scalar in device memory given with each run (read there as the pass runs, so that
// a captured step replays with each step's factor).
struct PassGraph {
  std::shared_ptr<fe::graph::Graph> graph = std::make_shared<fe::graph::Graph>();
  TensorPtr a, b, out;
  TensorPtr scale;  // a scaled shape's factor
};

PassGraph make_graph(ConvPass pass, const ConvShape& s, bool epilogue = false) {
  PassGraph g;
  epilogue = epilogue || s.scaled;
  g.graph->set_io_data_type(graph_type(s.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);  // FP32 accumulation in every mode, as in the legacy API
  auto tensor = [&](const char* name, int64_t n, int64_t c, int64_t h, int64_t w) {
    return g.graph->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_dim({n, c, h, w}).set_stride(strides(s.nhwc, c, h, w)));
  };
  const std::vector<int64_t> padding{s.padding, s.padding}, stride{s.stride, s.stride}, dilation{1, 1};
  switch (pass) {
    case ConvPass::Forward: {
      g.a = tensor("x", s.n, s.c, s.h, s.w);
      g.b = tensor("w", s.k, s.c, s.r, s.s);
      g.out = g.graph->conv_fprop(
          g.a, g.b, fe::graph::Conv_fprop_attributes().set_padding(padding).set_stride(stride).set_dilation(dilation));
      // The output's dimensions are left to the frontend, and checked against the shape's (checked_graph).
      g.out->set_stride(strides(s.nhwc, s.k, s.p, s.q));
      break;
    }
    case ConvPass::BackwardData: {
      g.a = tensor("dy", s.n, s.k, s.p, s.q);
      g.b = tensor("w", s.k, s.c, s.r, s.s);
      g.out = g.graph->conv_dgrad(
          g.a, g.b, fe::graph::Conv_dgrad_attributes().set_padding(padding).set_stride(stride).set_dilation(dilation));
      g.out->set_dim({s.n, s.c, s.h, s.w}).set_stride(strides(s.nhwc, s.c, s.h, s.w));
      break;
    }
    case ConvPass::BackwardFilter: {
      g.a = tensor("x", s.n, s.c, s.h, s.w);
      g.b = tensor("dy", s.n, s.k, s.p, s.q);
      g.out = g.graph->conv_wgrad(
          g.b, g.a, fe::graph::Conv_wgrad_attributes().set_padding(padding).set_stride(stride).set_dilation(dilation));
      g.out->set_dim({s.k, s.c, s.r, s.s}).set_stride(strides(s.nhwc, s.c, s.r, s.s));
      break;
    }
  }
  if (epilogue) {
    const TensorPtr conv = g.out;  // virtual from here, in the intermediate type (FP32)
    if (s.scaled)
      g.scale = g.graph->tensor(fe::graph::Tensor_attributes()
                                    .set_name("scale")
                                    .set_dim({1, 1, 1, 1})
                                    .set_stride({1, 1, 1, 1})
                                    .set_data_type(fe::DataType_t::FLOAT));
    g.out = g.graph->pointwise(conv, s.scaled ? g.scale : g.graph->tensor(1.0f, fe::graph::ScalarType::RUNTIME_PARAM),
                               fe::graph::Pointwise_attributes()
                                   .set_mode(fe::PointwiseMode_t::MUL)
                                   .set_compute_data_type(fe::DataType_t::FLOAT));
    g.out->set_stride(conv->get_stride());
    if (pass != ConvPass::Forward) g.out->set_dim(conv->get_dim());
  }
  g.out->set_output(true);
  if (s.mixed) {  // the inputs in their types, the output in dtype (FP32)
    g.a->set_data_type(graph_type(s.a_type));
    g.b->set_data_type(graph_type(s.b_type));
    g.out->set_data_type(graph_type(s.dtype));
  }
  return g;
}

// The graph checked on the host: "" or what is wrong, including a forward output whose dimensions, as cuDNN's
// graph computes them, differ from the shape's.
std::string checked_graph(const PassGraph& g, ConvPass pass, const ConvShape& s) {
  auto status = g.graph->validate();
  if (status.is_bad()) return "validate: " + status.get_message();
  const std::vector<int64_t> expected{s.n, s.k, s.p, s.q};
  if (pass == ConvPass::Forward && g.out->get_dim() != expected) {
    std::ostringstream out;
    out << "the graph computes an output of";
    for (const int64_t d : g.out->get_dim()) out << ' ' << d;
    out << ", the shape says " << s.n << ' ' << s.k << ' ' << s.p << ' ' << s.q;
    return out.str();
  }
  return "";
}

// PyTorch's engine filter as notes: no mode lets cuDNN convert inputs down, strict FP32 takes no tensor cores
// (TF32), and deterministic runs no non-deterministic engine. Beyond PyTorch, no 16-bit or FP32 mode reduces in less
// than FP32 (the paper's FP32 accumulation), and exact FP32 takes no FFT or Winograd, as in the legacy path. FP8 may:
// Hopper's FP8 tensor cores sum in a narrower accumulator, promoted to FP32 along the way. FP8 values widened to FP16
// take no FFT or Winograd either, whose transforms would round the exact products the FP8 pass stands for.
std::vector<fe::NumericalNote_t> excluded_notes(const ConvShape& s, const ConvPolicy& policy) {
  using N = fe::NumericalNote_t;
  std::vector<N> notes{N::DOWN_CONVERT_INPUTS};
  if (!s.fp8_inputs()) notes.push_back(N::REDUCED_PRECISION_REDUCTION);
  if (policy.deterministic) notes.push_back(N::NONDETERMINISTIC);
  if (s.math == ConvMath::Fp32) notes.push_back(N::TENSOR_CORE);
  if ((s.math == ConvMath::Fp32 && policy.exact_fp32) || (s.mixed && !s.fp8_inputs()))
    for (const N note : {N::FFT, N::WINOGRAD, N::WINOGRAD_TILE_4x4, N::WINOGRAD_TILE_6x6, N::WINOGRAD_TILE_13x13})
      notes.push_back(note);
  return notes;
}

// Thrown by a step of plan making that the graph API refuses: the pass then runs on the legacy API.
struct Refused {
  std::string reason;
};

void require(fe::error_t status, const char* step) {
  if (status.is_bad()) throw Refused{std::string(step) + ": " + status.get_message()};
}

}  // namespace

struct GraphApiConvs::Impl {
  cudnnHandle_t handle;
  ConvPolicy policy;

  struct Plan {
    PassGraph g;
    bool chosen = false;  // the engine is chosen (timed or by the heuristics)
    int64_t index = -1;   // the chosen engine's plan, or -1: the heuristics' choice
    int64_t workspace = 0;
    float ms = -1;        // the chosen engine's time per run where timed
    size_t timed = 0;     // how many engines ran in the timing
    double choosing_s = 0;  // building the graph, its candidates and timing them
    std::string engine;   // the chosen engine's name
    std::string refused;  // why the legacy API runs this pass instead (a mixed pass: why it is computed another way)
    bool mixed = false;
    bool epilogue = false;      // the graph with a pointwise epilogue (make_graph), once one node is refused
    std::string refused_alone;  // ... and why the graph of one node was
  };
  std::unordered_map<std::string, Plan> plans;

  // The graph checked and its candidate engines listed (the heuristics' first built where nothing is timed).
  void build(Plan& p, ConvPass pass, const ConvShape& s) const {
    p.g = make_graph(pass, s, p.epilogue);
    fe::graph::Graph& graph = *p.g.graph;
    if (std::string wrong = checked_graph(p.g, pass, s); !wrong.empty()) throw Refused{wrong};
    require(graph.build_operation_graph(handle), "build_operation_graph");
    require(graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans");
    // Timing may keep an engine with a larger workspace where it pays (choose_timed); the heuristics' pick may not.
    const size_t limit =
        policy.benchmark ? std::max(policy.large_workspace_limit, policy.workspace_limit) : policy.workspace_limit;
    graph.deselect_numeric_notes(excluded_notes(s, policy))
        .deselect_workspace_greater_than(static_cast<int64_t>(limit));
    // Mixed passes may have runtime-compiled engines only (cuDNN's runtime fusion engines): they keep them.
    if (!policy.runtime_compiled && !s.mixed) graph.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
    require(graph.check_support(handle), "check_support");
    if (!policy.benchmark) require(graph.build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
  }

  // The engine to run: with benchmark, the fastest of the heuristics' first kTimedEngines that build and run on
  // these tensors (PyTorch's torch.backends.cudnn.benchmark_limit), timed as cudnnFind times them, in one workspace
  // of the largest's size (only these are built: the frontend's own autotune builds every candidate and times each
  // up to 100 times); else the heuristics' first. Of the candidates NVRTC must compile (up to seconds each, for every
  // shape of the model) only the first kTimedCompiled are built, kTimedFp8Compiled for FP8 inputs: cuDNN's FP8
  // engines are all runtime-compiled, one engine with other knobs, whose speed differs with them. The fastest is kept
  // as choose_timed weighs its workspace. Returns the timing's workspace, which the first execution reuses rather than
  // holding a second one beside it (nullptr where nothing was timed).
  static constexpr size_t kTimedEngines = 10;
  static constexpr size_t kTimedCompiled = 2;
  static constexpr size_t kTimedFp8Compiled = 6;
  static constexpr int kRuns = 3;  // timed runs of each candidate, after one untimed
  void* choose(Plan& p, std::unordered_map<int64_t, void*>& pack, const ScratchFn& scratch) const {
    fe::graph::Graph& graph = *p.g.graph;
    if (!policy.benchmark) {
      p.workspace = graph.get_workspace_size();
      require(graph.get_plan_name(p.engine), "get_plan_name");
      p.chosen = true;
      return nullptr;
    }
    std::vector<int64_t> candidates;
    size_t compiled = 0;
    const size_t compiled_limit =
        p.g.a->get_data_type() == fe::DataType_t::FP8_E4M3 || p.g.a->get_data_type() == fe::DataType_t::FP8_E5M2
            ? kTimedFp8Compiled
            : kTimedCompiled;
    std::string unbuilt;  // why the last candidate that did not build did not
    for (int64_t i = 0; i < graph.get_execution_plan_count() && candidates.size() < kTimedEngines; ++i) {
      std::vector<fe::BehaviorNote_t> behavior;
      const bool needs_nvrtc =
          graph.get_behavior_notes_for_plan_at_index(i, behavior).is_good() &&
          std::find(behavior.begin(), behavior.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) != behavior.end();
      if (needs_nvrtc && compiled == compiled_limit) continue;
      if (auto built = graph.build_plan_at_index(handle, i); built.is_bad()) {  // deselected, or it does not build
        unbuilt = built.get_message();
        continue;
      }
      compiled += needs_nvrtc;
      candidates.push_back(i);
    }
    if (candidates.empty()) throw Refused{"no engine builds" + (unbuilt.empty() ? "" : ": " + unbuilt)};
    const auto workspace_of = [&](int64_t i) { return static_cast<size_t>(graph.get_workspace_size_plan_at_index(i)); };
    const auto most = [&] {
      size_t m = 0;
      for (const int64_t i : candidates) m = std::max(m, workspace_of(i));
      return m;
    };
    const auto try_scratch = [&](size_t bytes) -> void* {
      try {
        return scratch(bytes);
      } catch (const Error&) {
        return nullptr;
      }
    };
    void* space = nullptr;
    if (most() > policy.workspace_limit) {
      // First at the largest size allowed, which the legacy API's search takes too: the caching allocator reuses a
      // block of the same size, so that the shapes' timings share one block rather than each leaving its own.
      space = try_scratch(std::max(policy.large_workspace_limit, policy.workspace_limit));
      if (!space) space = try_scratch(most());
      if (!space) {  // no memory for the larger workspaces: time those within the limit
        std::erase_if(candidates, [&](int64_t i) { return workspace_of(i) > policy.workspace_limit; });
        if (candidates.empty()) throw Refused{"no memory for any engine's workspace"};
      }
    }
    if (!space && most()) {
      try {
        space = scratch(most());
      } catch (const Error& e) {
        throw Refused{"no workspace to time the engines in (" + mib(most()) + "): " + e.what()};
      }
    }
    cudaStream_t stream = nullptr;
    CUDNN_CHECK(cudnnGetStream(handle, &stream));
    StreamTimer timer(stream);
    std::vector<TimedCandidate> timed;
    std::vector<int64_t> timed_index;  // timed[j] is candidate timed_index[j]
    for (const int64_t i : candidates) {
      if (graph.execute_plan_at_index(handle, pack, space, i).is_bad()) continue;  // the warm-up run failed
      bool ran = true;
      timer.start();
      for (int run = 0; run < kRuns && ran; ++run) ran = graph.execute_plan_at_index(handle, pack, space, i).is_good();
      const float ms = timer.stop();
      if (!ran) continue;
      timed.push_back({ms / kRuns, workspace_of(i)});
      timed_index.push_back(i);
    }
    const int best = choose_timed(timed, policy);
    if (best < 0) throw Refused{"no engine ran on these tensors"};
    p.index = timed_index[static_cast<size_t>(best)];
    p.ms = timed[static_cast<size_t>(best)].ms;
    p.timed = timed.size();
    p.workspace = graph.get_workspace_size_plan_at_index(p.index);
    require(graph.get_plan_name_at_index(p.index, p.engine), "get_plan_name_at_index");
    p.chosen = true;
    return space;
  }

  fe::error_t execute(const Plan& p, std::unordered_map<int64_t, void*>& pack, void* workspace) const {
    return p.index < 0 ? p.g.graph->execute(handle, pack, workspace)
                       : p.g.graph->execute_plan_at_index(handle, pack, workspace, p.index);
  }
};

bool GraphApiConvs::compiled() { return true; }

// The frontend opens the CUDA runtime itself, libcudart.so.12 before .13 where both are on the path; it must be the
// one this program runs on (the user's own choice stands). Set as the program loads, before any thread could read
// the environment beside it.
const bool kCudartNamed =
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", ("libcudart.so." + std::to_string(CUDART_VERSION / 1000)).c_str(), 0) == 0;

GraphApiConvs::GraphApiConvs(cudnnHandle_t handle, const ConvPolicy& policy) : impl_(new Impl{handle, policy, {}}) {
  // The cuDNN this program links (and the legacy API uses), found by its soname among those already loaded.
  if (!fe::cudnn_dlhandle) fe::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
  if (!fe::cudnn_dlhandle) throw Error(std::string("cuDNN's graph API: libcudnn.so.9 is not loaded: ") + dlerror());
}

GraphApiConvs::~GraphApiConvs() = default;

bool GraphApiConvs::run(ConvPass pass, const ConvShape& s, const void* a, const void* b, void* out,
                        const ScratchFn& scratch, bool capturing, const float* scale) {
  const std::string key = s.key(pass_key(pass));
  // The engines are chosen for 16-byte aligned tensors (the frontend's default): others run on the legacy API.
  for (const void* ptr : {a, b, static_cast<const void*>(out), static_cast<const void*>(scale)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16) return false;
  AMPWB_CHECK(!s.scaled || scale, "a scaled convolution (" << key << ") needs its factor in device memory");
  Impl::Plan& p = impl_->plans[key];
  if (!p.refused.empty()) return false;
  const bool first_call = !p.chosen;
  if (!p.chosen && capturing)
    throw Error("a convolution whose engine cuDNN has not chosen yet (" + key +
                "): the step is captured once eager steps have run every shape");
  try {
    const auto start = std::chrono::steady_clock::now();
    if (!p.g.out) impl_->build(p, pass, s);
    std::unordered_map<int64_t, void*> pack{
        {p.g.a->get_uid(), const_cast<void*>(a)}, {p.g.b->get_uid(), const_cast<void*>(b)}, {p.g.out->get_uid(), out}};
    if (p.g.scale) pack[p.g.scale->get_uid()] = const_cast<float*>(scale);
    void* workspace = nullptr;  // the timing's, on the first call (as large as the largest candidate's)
    if (!p.chosen) {
      workspace = impl_->choose(p, pack, scratch);
      p.choosing_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!workspace && p.workspace) workspace = scratch(static_cast<size_t>(p.workspace));
    auto status = impl_->execute(p, pack, workspace);
    if (status.is_bad()) {
      // Inside a capture nothing may run instead: the capture fails with the reason and the step runs eagerly.
      if (capturing) throw Error("cuDNN's graph API failed to run convolution " + key + ": " + status.get_message());
      throw Refused{"execute: " + status.get_message()};
    }
    return true;
  } catch (const Refused& r) {
    const std::string reason = r.reason.empty() ? std::string("no reason given") : r.reason;
    // A mixed pass once more as NVIDIA's FP8 sample builds it: the convolution, then a pointwise scale.
    if (s.mixed && !s.scaled && !p.epilogue) {
      p = Impl::Plan{};
      p.epilogue = true;
      p.refused_alone = reason;
      return run(pass, s, a, b, out, scratch, capturing, scale);
    }
    p.refused = "the graph API refused it: " + reason;
    p.mixed = s.mixed;
    if (!p.refused_alone.empty()) p.refused += "; as one node: " + p.refused_alone;
    p.g = {};  // the graph and its plans are not needed any more
    return false;
  } catch (const std::exception& e) {
    // Outside a capture, whatever else failed on a shape's first call (the frontend's loader, a CUDA call of the
    // timing, no memory for the workspace) leaves the pass to the legacy API with the reason, as a refusal does.
    if (capturing || !first_call) throw;
    cudaGetLastError();  // a failed CUDA call's error is not the legacy API's
    p = Impl::Plan{};
    p.refused = std::string("the graph API failed: ") + e.what();
    p.mixed = s.mixed;
    return false;
  }
}

TimedCandidate GraphApiConvs::timed(ConvPass pass, const ConvShape& s) const {
  const auto it = impl_->plans.find(s.key(pass_key(pass)));
  if (it == impl_->plans.end() || !it->second.refused.empty()) return {-1.0f, 0};
  return {it->second.ms, static_cast<size_t>(it->second.workspace)};
}

void GraphApiConvs::decline(ConvPass pass, const ConvShape& s, const std::string& reason) {
  Impl::Plan& p = impl_->plans[s.key(pass_key(pass))];
  p.refused = reason;
  p.g = {};
}

size_t GraphApiConvs::plans_run() const {
  size_t count = 0;
  for (const auto& [key, p] : impl_->plans) count += p.chosen && p.refused.empty();
  return count;
}

std::string GraphApiConvs::validate(ConvPass pass, const ConvShape& s, bool epilogue) {
  return checked_graph(make_graph(pass, s, epilogue), pass, s);
}

std::string GraphApiConvs::describe() const {
  std::ostringstream out;
  for (const auto& [key, p] : impl_->plans) {
    if (p.chosen && p.refused.empty()) {
      out << key << ": graph API, engine " << p.engine << (p.epilogue ? " (with a pointwise epilogue)" : "") << ", "
          << mib(static_cast<size_t>(p.workspace)) << " workspace";
      if (p.ms >= 0) out << ", " << ms_text(p.ms) << " (the fastest of " << p.timed << " timed)";
      out << ", chosen in " << std::fixed << std::setprecision(2) << p.choosing_s << " s" << std::defaultfloat << '\n';
    } else if (!p.refused.empty()) {
      out << key << (p.mixed ? ": computed another way (" : ": legacy API (") << p.refused << ")\n";
    }
  }
  return out.str();
}

#else  // built without cudnn-frontend's headers

struct GraphApiConvs::Impl {};

bool GraphApiConvs::compiled() { return false; }

GraphApiConvs::GraphApiConvs(cudnnHandle_t, const ConvPolicy&) {
  throw Error(
      "this build has no cudnn-frontend, so no cuDNN graph API: scripts/install-deps.sh fetches its headers for "
      "CUDA builds, then rebuild");
}

GraphApiConvs::~GraphApiConvs() = default;

bool GraphApiConvs::run(ConvPass, const ConvShape&, const void*, const void*, void*, const ScratchFn&, bool,
                        const float*) {
  return false;
}

std::string GraphApiConvs::validate(ConvPass pass, const ConvShape&, bool) {
  return std::string("no cudnn-frontend in this build (") + pass_key(pass) + ")";
}

TimedCandidate GraphApiConvs::timed(ConvPass, const ConvShape&) const { return {-1.0f, 0}; }

void GraphApiConvs::decline(ConvPass, const ConvShape&, const std::string&) {}

std::string GraphApiConvs::describe() const { return ""; }

size_t GraphApiConvs::plans_run() const { return 0; }

#endif

}  // namespace ampwb::cuda
