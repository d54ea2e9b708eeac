// cuDNN's fused attention behind CudnnAttentionForward/Backward (cudnn_attention.h): the graphs,
// their cache, the handles, and libcudnn opened at run time.
#include "executor/cuda/cudnn/cudnn_attention.h"

#include <dlfcn.h>

#include <cudnn_frontend.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_status.h"
#include "ir/status.h"

// The frontend (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) calls cuDNN through this handle.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace pdist::exec::cuda {
namespace {

namespace fe = cudnn_frontend;

// Tensor ids of the graphs' operands, the keys of their variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Library {
  std::string error;  // why cuDNN cannot be used here ("" when it can)
};

constexpr int64_t kDpWorkspaceLimitBytes = int64_t{1} << 30;

// Opens libcudnn.so.9 once per process. The frontend needs cuDNN 9 (its SDPA graphs: 9.0 on).
const Library& OpenLibrary() {
  static const Library* library = [] {
    auto* l = new Library;
    void* handle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      // dlerror says which: not found, a dependency missing, a newer glibc needed.
      l->error = absl::StrCat("libcudnn.so.9 could not be loaded (", why != nullptr ? why : "dlopen failed",
                              "): put cuDNN 9's library directory, with its dependencies, on LD_LIBRARY_PATH");
      return l;
    }
    // A cuDNN built for another CUDA major (a Python wheel's, say) loads and then fails inside
    // its calls with errors that do not say so: refuse it here, naming both.
    using VersionFn = size_t (*)();
    auto cudart_version = reinterpret_cast<VersionFn>(dlsym(handle, "cudnnGetCudartVersion"));
    auto version = reinterpret_cast<VersionFn>(dlsym(handle, "cudnnGetVersion"));
    if (cudart_version == nullptr || version == nullptr) {
      l->error = "the libcudnn.so.9 found lacks cudnnGetVersion / cudnnGetCudartVersion: not cuDNN 9";
      return l;
    }
    const size_t built_for = cudart_version();
    if (built_for / 1000 != static_cast<size_t>(CUDART_VERSION / 1000)) {
      l->error = absl::StrCat("the libcudnn.so.9 found (cuDNN ", version(), ") is built for CUDA ", built_for / 1000,
                              ", pdist for CUDA ", CUDART_VERSION / 1000, ": put a cuDNN 9 for CUDA ",
                              CUDART_VERSION / 1000, " first on LD_LIBRARY_PATH");
      return l;
    }
    fe::cudnn_dlhandle = handle;
    return l;
  }();
  return *library;
}

// The frontend's settings, read by it through getenv: set while the process starts, on its one
// thread, because setenv beside another thread's getenv (ranks as threads, NCCL's) may crash.
// A user's settings win (no overwrite).
[[maybe_unused]] const bool kFrontendEnvironment = [] {
  // The frontend opens a CUDA runtime of its own for a few calls: pdist's, not another major
  // version that happens to be on the library path (a Python package's, say).
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", absl::StrCat("libcudart.so.", CUDART_VERSION / 1000).c_str(),
         /*overwrite=*/0);
  // The deterministic backward keeps dP in a workspace of b·hq·sq·sk·2 bytes. Past 1 GiB (about
  // what the GEMM form holds for its scores: GemmAttentionScratchBytes, launch.h), cuDNN 9.25+ on
  // Hopper switches to its ordered-dQ deterministic kernels, whose workspace grows linearly;
  // older versions keep dP whatever its size (and past CudnnAttentionWorkspaceBound the GEMM
  // form runs instead).
  setenv("CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT", absl::StrCat(kDpWorkspaceLimitBytes).c_str(), /*overwrite=*/0);
  return true;
}();

absl::Status Unavailable(const std::string& what) { return absl::UnavailableError(absl::StrCat("cuDNN attention: ", what)); }

// What cuDNN cannot do here (this version, this GPU, this shape) is Unavailable: the GEMM form
// runs instead. Anything else says pdist described the graph wrongly: an error, not a fallback.
absl::Status FeStatus(fe::error_t e, const char* step) {
  if (e.is_good()) return absl::OkStatus();
  const std::string message = absl::StrCat(step, ": ", e.get_message());
  switch (e.get_code()) {
    case fe::error_code_t::GRAPH_NOT_SUPPORTED:
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
    case fe::error_code_t::HEURISTIC_QUERY_FAILED:
    case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT:
    case fe::error_code_t::CUDNN_BACKEND_API_FAILED:
    case fe::error_code_t::NVRTC_COMPILATION_FAILED:
      return Unavailable(message);
    default:
      return absl::InternalError(absl::StrCat("cuDNN attention: ", message));
  }
}

// A cuDNN handle made on the kernel's thread, which has its device current; a failure to make one
// is kept, so that each later call on the device falls back at once.
absl::StatusOr<cudnnHandle_t> MakeHandle() {
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t status = fe::detail::create_handle(&handle);
  if (status != CUDNN_STATUS_SUCCESS) return Unavailable(absl::StrCat("cudnnCreate failed (status ", status, ")"));
  return handle;
}

// One built graph: the forward's or the backward's for one shape on one device.
struct Built {
  fe::graph::Graph graph;
  int64_t workspace_bytes = 0;
};

// What a graph depends on.
using Key = std::tuple<int, bool, ElemType, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

Key KeyOf(int device, bool backward, ElemType type, const AttentionShape& a) {
  return {device, backward, type, a.batch, a.seq_q, a.seq_k, a.heads_q, a.heads_k, a.head_dim, a.v_dim, a.causal};
}

// [batch, seq, heads, head_dim] storage as cuDNN's [batch, heads, seq, head_dim] dims.
fe::graph::Tensor_attributes HeadsTensor(const char* name, Uid uid, int64_t batch, int64_t seq, int64_t heads,
                                         int64_t dim) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({batch, heads, seq, dim})
      .set_stride({seq * heads * dim, dim, heads * dim, 1});
}

void SetOutput(const std::shared_ptr<fe::graph::Tensor_attributes>& t, const fe::graph::Tensor_attributes& like) {
  t->set_output(true).set_uid(like.get_uid()).set_dim(like.get_dim()).set_stride(like.get_stride());
}

// The diagonal pdist's causal mask keeps: query i sees keys j <= i + sk - sq (bottom-right). With
// sq = sk that is cuDNN's top-left causal mask too, which every cuDNN 9 supports.
template <typename Attributes>
void SetCausal(Attributes& options, const AttentionShape& a) {
  if (!a.causal) return;
  options.set_diagonal_alignment(a.seq_q == a.seq_k ? fe::DiagonalAlignment_t::TOP_LEFT
                                                    : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
  options.set_diagonal_band_right_bound(0);
}

absl::Status Build(Built& b, cudnnHandle_t handle, bool backward, ElemType type, const AttentionShape& a) {
  fe::graph::Graph& g = b.graph;
  g.set_io_data_type(type == ElemType::kBF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const auto q_like = HeadsTensor("q", kQ, a.batch, a.seq_q, a.heads_q, a.head_dim);
  const auto k_like = HeadsTensor("k", kK, a.batch, a.seq_k, a.heads_k, a.head_dim);
  const auto v_like = HeadsTensor("v", kV, a.batch, a.seq_k, a.heads_k, a.v_dim);
  const auto o_like = HeadsTensor("out", kO, a.batch, a.seq_q, a.heads_q, a.v_dim);
  const auto stats_like = fe::graph::Tensor_attributes()
                              .set_name("lse")
                              .set_uid(kStats)
                              .set_dim({a.batch, a.heads_q, a.seq_q, 1})
                              .set_stride({a.heads_q * a.seq_q, a.seq_q, 1, 1})
                              .set_data_type(fe::DataType_t::FLOAT);
  auto q = g.tensor(q_like), k = g.tensor(k_like), v = g.tensor(v_like);
  const float scale = static_cast<float>(a.scale);
  if (!backward) {
    fe::graph::SDPA_attributes options;
    options.set_name("flash_attn").set_generate_stats(true).set_attn_scale(scale);
    SetCausal(options, a);
    auto [o, stats] = g.sdpa(q, k, v, options);
    SetOutput(o, o_like);
    SetOutput(stats, stats_like);
    stats->set_data_type(fe::DataType_t::FLOAT);
  } else {
    auto o = g.tensor(o_like);
    auto dout = g.tensor(HeadsTensor("out_grad", kDO, a.batch, a.seq_q, a.heads_q, a.v_dim));
    auto stats = g.tensor(stats_like);
    fe::graph::SDPA_backward_attributes options;
    // Deterministic: pdist's runs repeat bit for bit (a profiled step equals the timed one).
    options.set_name("flash_attn_grad").set_attn_scale(scale).set_deterministic_algorithm(true);
    SetCausal(options, a);
    auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dout, stats, options);
    SetOutput(dq, HeadsTensor("q_grad", kDQ, a.batch, a.seq_q, a.heads_q, a.head_dim));
    SetOutput(dk, HeadsTensor("k_grad", kDK, a.batch, a.seq_k, a.heads_k, a.head_dim));
    SetOutput(dv, HeadsTensor("v_grad", kDV, a.batch, a.seq_k, a.heads_k, a.v_dim));
  }
  PDIST_RETURN_IF_ERROR(FeStatus(g.validate(), "validate"));
  PDIST_RETURN_IF_ERROR(FeStatus(g.build_operation_graph(handle), "build_operation_graph"));
  PDIST_RETURN_IF_ERROR(FeStatus(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
                                 "create_execution_plans"));
  PDIST_RETURN_IF_ERROR(FeStatus(g.check_support(), "check_support"));
  PDIST_RETURN_IF_ERROR(FeStatus(g.build_plans(), "build_plans"));
  return FeStatus(g.get_workspace_size(b.workspace_bytes), "get_workspace_size");
}

// One device's handle, built graphs and remembered failures, behind its own lock: cuDNN's handles
// and graphs are not thread-safe, but two devices' ranks share nothing, and one lock over all
// devices could stall a rank's first launch on another rank's graph building (with lazily loaded
// modules, a launch may wait for the device, whose collective waits for the stalled rank).
struct DeviceGraphs {
  std::mutex mu;
  std::optional<absl::StatusOr<cudnnHandle_t>> handle;  // made on first use
  std::map<Key, std::shared_ptr<Built>> cache;
  std::map<Key, absl::Status> failures;
};

DeviceGraphs& GraphsOf(int device) {
  static std::mutex mu;
  static auto* devices = new std::map<int, std::unique_ptr<DeviceGraphs>>();  // for the process's life
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<DeviceGraphs>& graphs = (*devices)[device];
  if (!graphs) graphs = std::make_unique<DeviceGraphs>();
  return *graphs;
}

// Builds (once per key; a failure is remembered too) and runs a graph on the kernel's stream.
absl::Status RunUnguarded(KernelContext& ctx, bool backward, ElemType type, const AttentionShape& a,
                          std::unordered_map<int64_t, void*>& pointers) {
  if (const Library& library = OpenLibrary(); !library.error.empty()) return Unavailable(library.error);
  const int device = ctx.device().index;
  const Key key = KeyOf(device, backward, type, a);
  DeviceGraphs& graphs = GraphsOf(device);
  std::lock_guard<std::mutex> lock(graphs.mu);
  if (!graphs.handle) graphs.handle = MakeHandle();
  PDIST_ASSIGN_OR_RETURN(cudnnHandle_t handle, *graphs.handle);
  std::shared_ptr<Built> built;
  if (auto f = graphs.failures.find(key); f != graphs.failures.end()) return f->second;
  if (auto it = graphs.cache.find(key); it != graphs.cache.end()) {
    built = it->second;
  } else {
    built = std::make_shared<Built>();
    absl::Status status;
    try {
      status = Build(*built, handle, backward, type, a);
    } catch (const std::bad_alloc&) {
      throw;  // out of memory is the executor's to report, naming the op
    } catch (const std::exception& e) {  // the frontend throws where a cuDNN symbol is missing
      status = Unavailable(e.what());
    }
    // The deterministic backward keeps dP for the whole batch where the GEMM form takes the
    // batch in chunks: past what the GEMM form would hold (and some), that form runs instead.
    if (status.ok() && built->workspace_bytes > CudnnAttentionWorkspaceBound(a)) {
      status = Unavailable(absl::StrFormat(
          "cuDNN's workspace of %.2f GiB is more than the %.2f GiB allowed (the GEMM form holds %.2f GiB)",
          static_cast<double>(built->workspace_bytes) / (1 << 30),
          static_cast<double>(CudnnAttentionWorkspaceBound(a)) / (1 << 30),
          static_cast<double>(GemmAttentionScratchBytes(a)) / (1 << 30)));
    }
    if (!status.ok()) {
      graphs.failures[key] = status;
      return status;
    }
    graphs.cache[key] = built;
  }
  void* workspace = nullptr;
  if (built->workspace_bytes > 0) {
    workspace = ctx.Scratch({{(built->workspace_bytes + 7) / 8}, ir::DataType::kInt64}).raw();
  }
  if (const cudnnStatus_t s = fe::detail::set_stream(handle, StreamOf(ctx)); s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuDNN attention: cudnnSetStream failed (status ", s, ")"));
  }
  fe::error_t run = built->graph.execute(handle, pointers, workspace);
  if (run.is_bad()) {
    return absl::InternalError(
        absl::StrCat(backward ? "flash_attn_grad" : "flash_attn", " through cuDNN: ", run.get_message()));
  }
  return absl::OkStatus();
}

absl::Status Run(KernelContext& ctx, bool backward, ElemType type, const AttentionShape& a,
                 std::unordered_map<int64_t, void*> pointers) {
  try {
    return RunUnguarded(ctx, backward, type, a, pointers);
  } catch (const std::bad_alloc&) {
    throw;  // the workspace did not fit: the executor names the op and the allocator's state
  } catch (const std::exception& e) {  // a frontend call through a symbol this libcudnn lacks
    return Unavailable(e.what());
  }
}

}  // namespace

absl::Status CudnnAttentionForward(KernelContext& ctx, const AttentionShape& a, ElemType type, const void* q,
                                   const void* k, const void* v, void* out, void* lse) {
  return Run(ctx, /*backward=*/false, type, a,
             {{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)}, {kV, const_cast<void*>(v)}, {kO, out},
              {kStats, lse}});
}

absl::Status CudnnAttentionBackward(KernelContext& ctx, const AttentionShape& a, ElemType type, const void* q,
                                    const void* k, const void* v, const void* out, const void* out_grad,
                                    const void* lse, void* q_grad, void* k_grad, void* v_grad) {
  return Run(ctx, /*backward=*/true, type, a,
             {{kQ, const_cast<void*>(q)},
              {kK, const_cast<void*>(k)},
              {kV, const_cast<void*>(v)},
              {kO, const_cast<void*>(out)},
              {kDO, const_cast<void*>(out_grad)},
              {kStats, const_cast<void*>(lse)},
              {kDQ, q_grad},
              {kDK, k_grad},
              {kDV, v_grad}});
}

}  // namespace pdist::exec::cuda
