// Every CUDA kernel against the CPU kernel of the same op on the same inputs: f32 and f64 within
// 1e-5 relative, bf16 within one bf16 rounding (2^-8 relative: both compute in f32 and round the
// result once, so they differ only where f32 contraction or summation order moves a value across
// a rounding boundary), dropout masks identical. GEMMs sum in another order than Eigen, so a
// result that cancels can differ more than that relative to itself: they are compared by the
// relative norm of each result (f32 1e-5, f64 1e-12, bf16 2^-8), the project's standard. The comparisons run where there is a GPU
// (scripts/device-check.sh) and report themselves skipped, with the reason, where there is none;
// the list check runs wherever the CUDA backend is built.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/cpu_stream.h"
#include "executor/comm/comm_groups.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "executor/comm/kv_store.h"
#include "executor/executor.h"
#include "executor/random.h"
#include "ir/builder.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/ops/merged_updates.h"
#include "ir/status.h"
#include "passes/distributed_programs.h"
#include "passes/optimizer.h"

#ifdef PDIST_HAVE_CUDA
#include "executor/cuda/nccl_communicator.h"
#endif

namespace pdist::exec {
namespace {

using ir::DataType;

const std::vector<std::string> kBinaryOps = {"add", "subtract", "multiply", "divide", "maximum"};
const std::vector<std::string> kActivations = {"relu", "gelu", "silu", "tanh", "exp", "sigmoid", "erf", "sqrt", "rsqrt"};

// The op types the comparisons below exercise.
std::set<std::string> Covered() {
  std::set<std::string> ops = {"dropout", "c_dropout", "dropout_grad", "scale", "cast", "transpose", "expand", "slice", "slice_grad",
                               "sgd", "momentum", "count_nonfinite", "update_loss_scaling", "max", "min", "max_grad",
                               "min_grad", "greater_than", "less_than", "equal", "where", "gather", "gather_grad",
                               "c_embedding", "c_embedding_grad", "c_softmax_with_cross_entropy", "c_softmax_with_cross_entropy_grad", "c_softmax_with_cross_entropy_grad_from_logits", "reshape", "unsqueeze", "squeeze",
                               "split", "split_with_num", "concat", "full", "matmul", "matmul_grad", "fused_gemm_epilogue", "fused_gemm_epilogue_grad", "layer_norm", "layer_norm_grad", "adamw", "merged_adamw", "merged_sgd", "merged_momentum", "sum", "mean", "sum_grad", "mean_grad", "embedding", "embedding_grad", "softmax", "log_softmax", "softmax_grad", "log_softmax_grad",
                               "cross_entropy_with_softmax", "cross_entropy_with_softmax_grad", "cross_entropy_with_softmax_grad_from_logits", "flash_attn", "flash_attention", "flash_attn_grad", "rms_norm", "rms_norm_grad", "fused_rope", "fused_rope_grad"};
  for (const std::string& op : kActivations) {
    ops.insert(op);
    ops.insert(op + "_grad");
  }
  for (const std::string& op : kBinaryOps) {
    ops.insert(op);
    ops.insert(op + "_grad");
  }
  return ops;
}

// The collective kernels are one device-neutral implementation (executor/collective_kernels.cc)
// that both backends register; what differs per device is the communicator (NCCL) and the block
// moves (Backend::SwapBlocks, CopyBytes). The distributed equivalence suites run them on host
// devices; comparing them on GPUs takes two GPUs (docs/gpu.md).
const std::set<std::string> kSharedCollectiveKernels = {"c_allreduce",           "c_allgather",
                                                        "c_reduce_scatter",      "c_alltoall",
                                                        "c_allreduce_coalesced", "c_reduce_scatter_coalesced",
                                                        "c_send",                "c_recv"};

TEST(CudaKernelListTest, EveryCudaKernelIsComparedWithTheCpus) {
  const std::vector<std::string> registered = KernelRegistry::Global().OpTypes(DeviceType::kCUDA);
  bool built = false;
  for (const Backend* backend : Backends()) built |= backend->type() == DeviceType::kCUDA;
  if (!built) GTEST_SKIP() << "this build has no CUDA backend (-DPDIST_WITH_CUDA=ON)";
  const std::set<std::string> covered = Covered();
  for (const std::string& op : registered) {
    EXPECT_TRUE(covered.count(op) || kSharedCollectiveKernels.count(op))
        << "CUDA kernel '" << op << "' has no comparison in this file";
    EXPECT_NE(KernelRegistry::Global().Find(DeviceType::kCPU, op), nullptr) << op << " has no CPU kernel";
  }
  for (const std::string& op : covered) {
    EXPECT_NE(KernelRegistry::Global().Find(DeviceType::kCUDA, op), nullptr) << op << " is compared but not registered";
  }
}

// The README's GPT (4 layers, hidden 128, 4 heads, vocab 256, seq 64, batch 16) as one rank's
// training program with AdamW, fused as the engine fuses it on a GPU (merged updates, bias adds
// in GEMM epilogues).
absl::StatusOr<ir::Program> ReadmeGptTrainingProgram() {
  ir::models::GptConfig config;
  config.layers = 4;
  config.hidden = 128;
  config.heads = 4;
  config.vocab = 256;
  config.seq_len = 64;
  config.batch = 16;
  PDIST_ASSIGN_OR_RETURN(ir::Program program, ir::models::BuildGpt(config));
  passes::PassContext context;
  PDIST_RETURN_IF_ERROR(passes::RunPipeline(passes::SingleRankPipeline({}, {.optimizer = true, .gemm_epilogue = true}), program,
                                            context, "training program"));
  return program;
}

TEST(CudaKernelListTest, EveryOpOfTheGptAndLlamaTrainingStepsHasACudaKernel) {
  bool built = false;
  for (const Backend* backend : Backends()) built |= backend->type() == DeviceType::kCUDA;
  if (!built) GTEST_SKIP() << "this build has no CUDA backend (-DPDIST_WITH_CUDA=ON)";
  absl::StatusOr<ir::Program> gpt = ReadmeGptTrainingProgram();
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  absl::StatusOr<ir::Program> llama = ir::models::BuildLlama({});
  ASSERT_TRUE(llama.ok()) << llama.status();
  passes::PassContext context;
  ASSERT_TRUE(passes::RunPipeline(passes::SingleRankPipeline({}), *llama, context, "training program").ok());
  for (const ir::Program* program : {&*gpt, &*llama}) {
    for (const auto& op : program->block().ops()) {
      EXPECT_NE(KernelRegistry::Global().Find(DeviceType::kCUDA, op->type()), nullptr) << op->type();
    }
  }
}

Tensor Random(const ir::TensorType& type, uint64_t seed, double low, double high) {
  std::vector<double> values(static_cast<size_t>(type.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = low + (high - low) * UniformAt(seed, i);
  return TensorFromDoubles(type, values);
}

// Runs `program` on `device` with `feeds` and returns every op's results, on the host, by id.
// `groups`: the communicators of an op that communicates inside its kernel.
absl::StatusOr<std::map<int64_t, Tensor>> RunOn(const ir::Program& program, const Feeds& feeds, Device device,
                                                std::shared_ptr<comm::CommGroups> groups = nullptr) {
  std::vector<int64_t> fetch;
  for (const auto& op : program.block().ops()) {
    for (const ir::Value* r : op->results()) fetch.push_back(r->id());
  }
  PDIST_ASSIGN_OR_RETURN(Executor executor,
                         Executor::Create(program, {.device = device, .fetch_ids = fetch, .comm_groups = groups}));
  Feeds placed;
  for (const auto& [name, t] : feeds) {
    PDIST_ASSIGN_OR_RETURN(placed[name], ToDevice(t, device));
  }
  Workspace workspace;
  PDIST_ASSIGN_OR_RETURN(RunResult run, executor.Run(placed, workspace));
  std::map<int64_t, Tensor> out;
  for (const auto& [id, t] : run.fetched) {
    PDIST_ASSIGN_OR_RETURN(out[id], ToDevice(t, Device::Cpu()));
  }
  return out;
}

double Tolerance(DataType dtype) { return dtype == DataType::kBFloat16 ? 1.0 / 256 : 1e-5; }

// Each element within Tolerance(dtype), the whole within NormTolerance, each element exactly, or
// each element within Tolerance(dtype) or one unit in the last place of its dtype, whichever is
// more: an update of low-precision values, whose f32 arithmetic the two compilers contract
// differently (an FMA here, two roundings there), rounds to neighbouring values now and then.
enum class Compare { kEachElement, kNorm, kExact, kOneUlp };

// One unit in the last place of a normal `x` of `dtype` (bf16: 8 significant bits, f16: 11).
double UnitInTheLastPlace(DataType dtype, double x) {
  const int bits = dtype == DataType::kBFloat16 ? 8 : dtype == DataType::kFloat16 ? 11 : 0;
  if (bits == 0 || x == 0) return 0;
  return std::ldexp(1.0, std::ilogb(x) - (bits - 1));
}

// bf16: `roundings` of 2^-8 (one for the result, one more where an operand is rounded too);
// f16 the same count of 2^-11.
double NormTolerance(DataType dtype, int bf16_roundings = 1) {
  switch (dtype) {
    case DataType::kBFloat16: return bf16_roundings / 256.0;
    case DataType::kFloat16: return bf16_roundings / 2048.0;
    case DataType::kFloat64: return 1e-12;
    default: return 1e-5;
  }
}

// The (x, parameter) dtype pairs of the norms: one dtype, and amp o2's low-precision activation
// with f32 parameters.
const std::vector<std::pair<DataType, DataType>> kNormDtypes = {{DataType::kFloat32, DataType::kFloat32},
                                                                 {DataType::kFloat64, DataType::kFloat64},
                                                                 {DataType::kBFloat16, DataType::kBFloat16},
                                                                 {DataType::kFloat16, DataType::kFloat16},
                                                                 {DataType::kBFloat16, DataType::kFloat32},
                                                                 {DataType::kFloat16, DataType::kFloat32}};

// An op that communicates runs on a group of one rank, in-process on the CPU and over NCCL on
// the GPU.
struct OneRankGroups {
  std::shared_ptr<comm::CommGroups> cpu, cuda;
};

// Runs `program` on the CPU and on GPU 0 and compares every result.

void ExpectSameOnGpu(const ir::Program& program, const Feeds& feeds, const std::string& what,
                     Compare compare = Compare::kEachElement, int bf16_roundings = 1, const OneRankGroups& groups = {}) {
  absl::StatusOr<std::map<int64_t, Tensor>> cpu = RunOn(program, feeds, Device::Cpu(), groups.cpu);
  ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
  absl::StatusOr<std::map<int64_t, Tensor>> cuda = RunOn(program, feeds, Device::Cuda(0), groups.cuda);
  ASSERT_TRUE(cuda.ok()) << what << ": " << cuda.status();
  for (const auto& [id, expected] : *cpu) {
    const Tensor& got = cuda->at(id);
    ASSERT_EQ(got.type(), expected.type()) << what;
    if (compare == Compare::kNorm) {
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < expected.num_elements(); ++i) {
        diff += (expected.At(i) - got.At(i)) * (expected.At(i) - got.At(i));
        norm += expected.At(i) * expected.At(i);
      }
      EXPECT_LE(std::sqrt(diff), NormTolerance(expected.dtype(), bf16_roundings) * std::sqrt(norm))
          << what << ": value " << program.FindValue(id)->name();
      continue;
    }
    const double tolerance = compare == Compare::kExact ? 0 : Tolerance(expected.dtype());
    for (int64_t i = 0; i < expected.num_elements(); ++i) {
      const double a = expected.At(i), b = got.At(i);
      if (a == b) continue;  // ±inf included, where a - b is NaN
      if (expected.dtype() == DataType::kBool) {
        ASSERT_EQ(a, b) << what << ": mask element " << i;
      } else if (std::isnan(a) || std::isnan(b)) {
        ASSERT_TRUE(std::isnan(a) && std::isnan(b)) << what << ": value " << program.FindValue(id)->name()
                                                    << " element " << i << " cpu " << a << " cuda " << b;
      } else {
        const double magnitude = std::max({std::abs(a), std::abs(b), 1e-30});
        const double ulp = compare == Compare::kOneUlp ? UnitInTheLastPlace(expected.dtype(), magnitude) : 0;
        ASSERT_LE(std::abs(a - b), std::max(tolerance * magnitude, ulp))
            << what << ": value " << program.FindValue(id)->name() << " element " << i << " cpu " << a << " cuda " << b;
      }
    }
  }
}

class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Backend*> gpu = BackendFor(Device::Cuda(0));
    if (!gpu.ok()) GTEST_SKIP() << "no GPU here: " << gpu.status().message();
  }
};

struct ShapePair {
  ir::Shape x, y;
};

// op(x, y) and op_grad on the CPU and on GPU 0; inputs drawn from `seed` on (y away from 0, for
// divide).
void ExpectBinaryOpSameOnGpu(const std::string& op, DataType dtype, const ShapePair& s, uint64_t seed,
                             Compare compare = Compare::kEachElement) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {s.x, dtype});
  ir::Value* y = b.Data("y", {s.y, dtype});
  absl::StatusOr<ir::Value*> out = b.Op1(op, {x, y});
  ASSERT_TRUE(out.ok()) << out.status();
  ir::Value* g = b.Data("g", (*out)->type());
  ASSERT_TRUE(b.Create(op + "_grad", {x, y, g}).ok());
  const Feeds feeds = {{"x", Random(x->type(), seed, -2, 2)},
                       {"y", Random(y->type(), seed + 1, 0.5, 2.5)},
                       {"g", Random(g->type(), seed + 2, -1, 1)}};
  ExpectSameOnGpu(p, feeds,
                  absl::StrCat(op, " ", ir::DataTypeName(dtype), " ", ir::ShapeToString(s.x), " with ",
                               ir::ShapeToString(s.y)),
                  compare);
}

TEST_F(CudaKernelTest, BroadcastArithmeticAndItsGradientsMatchTheCpu) {
  const std::vector<ShapePair> shapes = {{{4, 8}, {4, 8}}, {{3, 1, 8}, {4, 1}}, {{5, 6}, {}}, {{2, 3, 4}, {3, 1}}};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const std::string& op : kBinaryOps) {
      for (const ShapePair& s : shapes) ExpectBinaryOpSameOnGpu(op, dtype, s, 1);
    }
  }
}

// A bias's gradient sums every row: the GPU splits each sum over a block (few outputs: [16] of
// 1536 terms, a scalar of 3072) or over a block's warps and chunks of the rows (32 outputs per
// block, executor/cuda/column_split.h: [96] of 64 terms in one chunk; [40] of 700 in 10 chunks;
// [72], 3 tiles the last partial, of 600 terms over two dims in 9 chunks, the last shorter), so
// the order differs from the CPU's; compared by norm.
TEST_F(CudaKernelTest, BroadcastGradientsOfManyTermsMatchTheCpu) {
  const std::vector<ShapePair> shapes = {
      {{32, 48, 16}, {16}}, {{64, 96}, {96}}, {{64, 48}, {}}, {{700, 40}, {40}}, {{300, 2, 72}, {72}}};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const std::string op : {"add", "multiply"}) {
      for (const ShapePair& s : shapes) ExpectBinaryOpSameOnGpu(op, dtype, s, 4, Compare::kNorm);
    }
  }
}

TEST_F(CudaKernelTest, ActivationsTheirGradientsAndScaleMatchTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const std::string& op : kActivations) {
      for (bool approximate : {false, true}) {
        if (approximate && op != "gelu") continue;
        const ir::AttributeMap attrs = op == "gelu" ? ir::AttributeMap{{"approximate", approximate}} : ir::AttributeMap{};
        ir::Program p;
        ir::Builder b(&p);
        const ir::TensorType type{{6, 40}, dtype};
        ASSERT_TRUE(b.Op1(op, {b.Data("x", type)}, attrs).ok());
        ASSERT_TRUE(b.Op1(op + "_grad", {b.Data("saved", type), b.Data("g", type)}, attrs).ok());
        const bool positive = op == "sqrt" || op == "rsqrt";
        const Feeds feeds = {{"x", Random(type, 7, positive ? 0.05 : -3, 3)},
                             {"saved", Random(type, 8, positive ? 0.05 : -3, 3)},
                             {"g", Random(type, 9, -1, 1)}};
        ExpectSameOnGpu(p, feeds, absl::StrCat(op, approximate ? " (tanh form) " : " ", ir::DataTypeName(dtype)));
      }
    }
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{5, 7}, dtype});
    ASSERT_TRUE(b.Op1("scale", {x}, {{"scale", 0.3}, {"bias", 1.25}}).ok());
    ASSERT_TRUE(b.Op1("scale", {x}, {{"scale", -2.0}, {"bias", 0.5}, {"bias_after_scale", false}}).ok());
    ExpectSameOnGpu(p, {{"x", Random({{5, 7}, dtype}, 10, -2, 2)}}, absl::StrCat("scale ", ir::DataTypeName(dtype)));
  }
}

// A conversion rounds once, as the CPU's does: every pair of floating dtypes, bit for bit, on
// values that need rounding in bf16 and f16, up to f16's largest.
TEST_F(CudaKernelTest, CastsMatchTheCpuExactly) {
  const std::vector<DataType> dtypes = {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16};
  for (DataType from : dtypes) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{9, 13}, from});
    for (DataType to : dtypes) ASSERT_TRUE(b.Op1("cast", {x}, {{"dtype", to}}).ok());
    ExpectSameOnGpu(p, {{"x", Random(x->type(), 50, -6e4, 6e4)}}, absl::StrCat("cast from ", ir::DataTypeName(from)),
                    Compare::kExact);
  }
}

// Transpose, expand, slice (with a dropped axis) and slice_grad move elements as bits: exact, for
// floats, bf16 and integers alike.
TEST_F(CudaKernelTest, TransposesExpandsAndSlicesMatchTheCpuExactly) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64, DataType::kFloat64}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{3, 5, 4}, dtype});
    ASSERT_TRUE(b.Op1("transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}}).ok());
    ASSERT_TRUE(b.Op1("transpose", {x}, {{"perm", std::vector<int64_t>{0, -1, 1}}}).ok());
    ir::Value* row = b.Data("row", {{1, 5, 1}, dtype});
    ASSERT_TRUE(b.Op1("expand", {row}, {{"shape", std::vector<int64_t>{2, 3, 5, 4}}}).ok());
    const ir::AttributeMap window = {{"axes", std::vector<int64_t>{0, 1, 2}},
                                     {"starts", std::vector<int64_t>{1, 1, 2}},
                                     {"ends", std::vector<int64_t>{2, 4, 4}},
                                     {"decrease_axis", std::vector<int64_t>{0}}};
    absl::StatusOr<ir::Value*> sliced = b.Op1("slice", {x}, window);
    ASSERT_TRUE(sliced.ok()) << sliced.status();
    ASSERT_TRUE(b.Op1("slice_grad", {x, b.Data("g", (*sliced)->type())}, window).ok());
    ExpectSameOnGpu(p,
                    {{"x", Random(x->type(), 51, -9, 9)}, {"row", Random(row->type(), 52, -9, 9)},
                     {"g", Random((*sliced)->type(), 53, -9, 9)}},
                    absl::StrCat("transpose, expand, slice ", ir::DataTypeName(dtype)), Compare::kExact);
  }
}

// Comparisons of floats and of integers (ids), broadcast, with equal elements on a coarse grid;
// where picking between broadcast operands of any dtype: exact.
TEST_F(CudaKernelTest, ComparisonsAndWhereMatchTheCpuExactly) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat64, DataType::kInt64,
                         DataType::kInt32}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{3, 1, 8}, dtype});
    ir::Value* y = b.Data("y", {{4, 8}, dtype});
    ir::Value* greater = *b.Op1("greater_than", {x, y});
    ASSERT_TRUE(b.Op1("less_than", {x, y}).ok());
    ASSERT_TRUE(b.Op1("equal", {x, y}).ok());
    ASSERT_TRUE(b.Op1("where", {greater, x, y}).ok());
    ASSERT_TRUE(b.Op1("where", {b.Data("mask", {{8}, DataType::kBool}), x, y}).ok());
    auto grid = [&](const ir::TensorType& type, uint64_t seed) {
      std::vector<double> values = TensorToDoubles(Random({type.shape, DataType::kFloat64}, seed, -3, 3));
      for (double& v : values) v = std::round(v);  // equal elements happen
      return TensorFromDoubles(type, values);
    };
    std::vector<double> mask(8);
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0;
    ExpectSameOnGpu(p,
                    {{"x", grid(x->type(), 60)}, {"y", grid(y->type(), 61)},
                     {"mask", TensorFromDoubles({{8}, DataType::kBool}, mask)}},
                    absl::StrCat("comparisons and where ", ir::DataTypeName(dtype)), Compare::kExact);
  }
}

// gather along each axis with repeated (3 and 4 times) and negative indices, and its gradient,
// which sums the repeated rows in index order (bf16: in f32, rounded once, as the CPU's
// low-precision wrapper does): exact.
TEST_F(CudaKernelTest, GatherAndItsGradientMatchTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (int64_t axis : {0, 1, -1}) {
      ir::Program p;
      ir::Builder b(&p);
      ir::Value* x = b.Data("x", {{4, 5, 6}, dtype});
      ir::Value* index = b.Data("index", {{7}, DataType::kInt64});
      absl::StatusOr<ir::Value*> out = b.Op1("gather", {x, index}, {{"axis", axis}});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_TRUE(b.Op1("gather_grad", {index, b.Data("g", (*out)->type())}, {{"axis", axis}, {"x_shape", x->type().shape}})
                      .ok());
      ExpectSameOnGpu(p,
                      {{"x", Random(x->type(), 62, -2, 2)},
                       {"index", TensorFromDoubles(index->type(), {0, 3, -1, 3, 1, 3, 2})},
                       {"g", Random((*out)->type(), 63, -1, 1)}},
                      absl::StrCat("gather along ", axis, " ", ir::DataTypeName(dtype)), Compare::kExact);
    }
  }
}

// The vocab-parallel local forms that do not communicate: a rank's rows [3, 8) of the table read
// for its ids and zeros for the others', the rows' gradient, and the cross-entropy gradient on
// a piece of the classes (labels in and out of the piece, one ignored).
TEST_F(CudaKernelTest, VocabParallelPiecesMatchTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* ids = b.Data("ids", {{2, 6}, DataType::kInt64});
    ir::Value* table = b.Data("table", {{5, 4}, dtype});
    absl::StatusOr<ir::Value*> rows = b.Op1("c_embedding", {ids, table}, {{"start_index", int64_t{3}}});
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_TRUE(b.Op1("c_embedding_grad", {ids, table, b.Data("g", (*rows)->type())}, {{"start_index", int64_t{3}}}).ok());
    ir::Value* label = b.Data("label", {{2, 3, 1}, DataType::kInt64});
    ir::Value* softmax = b.Data("softmax", {{2, 3, 5}, dtype});
    ASSERT_TRUE(b.Op1("c_softmax_with_cross_entropy_grad",
                      {label, softmax, b.Data("loss_grad", {{2, 3, 1}, ir::ComputeDtype(dtype)})},
                      {{"start_index", int64_t{5}}, {"ignore_index", int64_t{-100}}})
                    .ok());
    ExpectSameOnGpu(p,
                    {{"ids", TensorFromDoubles(ids->type(), {0, 3, 7, 3, 9, 4, 5, 3, 2, 7, 7, 1})},
                     {"table", Random(table->type(), 64, -1, 1)},
                     {"g", Random((*rows)->type(), 65, -1, 1)},
                     {"label", TensorFromDoubles(label->type(), {5, 9, 2, -100, 7, 12})},
                     {"softmax", Random(softmax->type(), 66, 0, 1)},
                     {"loss_grad", Random({{2, 3, 1}, ir::ComputeDtype(dtype)}, 67, -1, 1)}},
                    absl::StrCat("vocab-parallel pieces ", ir::DataTypeName(dtype)));
  }
}

// A world of one rank and its groups of `mesh` [1]: in-process on the CPU, NCCL on GPU 0.
absl::StatusOr<OneRankGroups> GroupsOfOne() {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({1});
  OneRankGroups groups;
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<comm::Communicator> host,
                         comm::CreateInprocCommunicator(std::make_shared<comm::InprocWorld>(1), 0));
  PDIST_ASSIGN_OR_RETURN(groups.cpu, comm::CommGroups::Create(host, {mesh}));
#ifdef PDIST_HAVE_CUDA
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<cuda::NcclCommunicator> nccl,
                         cuda::NcclCommunicator::Create(std::make_shared<comm::InMemoryStore>(), 0, 1, Device::Cuda(0),
                                                        {.timeout = absl::Seconds(60)}));
  PDIST_ASSIGN_OR_RETURN(groups.cuda, comm::CommGroups::Create(nccl, {mesh}));
  return groups;
#else
  return absl::UnavailableError("this build has no CUDA backend (-DPDIST_WITH_CUDA=ON)");
#endif
}

// c_softmax_with_cross_entropy (with and without its softmax result) and its gradient from the
// logits on a group of one (a machine lends one GPU, and NCCL puts no two ranks of a communicator
// on one device): their passes and the two all-reduces between them on the kernel's stream,
// against the CPU kernels on an in-process group. The piece holds classes [5, 42): labels outside
// it read a logit of 0, as on a rank that does not hold the class, and one lane is ignore_index.
// The comparison of several ranks needs several GPUs (docs/gpu.md).
TEST_F(CudaKernelTest, VocabParallelCrossEntropyMatchesTheCpuOnAGroupOfOne) {
  absl::StatusOr<OneRankGroups> groups = GroupsOfOne();
  ASSERT_TRUE(groups.ok()) << groups.status();
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* logits = b.Data("logits", {{2, 3, 37}, dtype});
    ir::Value* label = b.Data("label", {{2, 3, 1}, DataType::kInt64});
    const ir::AttributeMap attrs = {
        {"start_index", int64_t{5}}, {"ignore_index", int64_t{-100}}, {"ranks", std::vector<int64_t>{0}}};
    ASSERT_TRUE(b.Create("c_softmax_with_cross_entropy", {logits, label}, attrs).ok());
    ir::AttributeMap no_softmax = attrs;
    no_softmax["return_softmax"] = false;
    ASSERT_TRUE(b.Create("c_softmax_with_cross_entropy", {logits, label}, no_softmax).ok());
    ir::Value* g = b.Data("g", {{2, 3, 1}, ir::ComputeDtype(dtype)});
    ASSERT_TRUE(b.Create("c_softmax_with_cross_entropy_grad_from_logits", {label, logits, g}, attrs).ok());
    ExpectSameOnGpu(p,
                    {{"logits", Random(logits->type(), 68, -4, 4)},
                     {"label", TensorFromDoubles(label->type(), {5, 41, 2, -100, 17, 60})},
                     {"g", Random(g->type(), 69, 0.5, 1.5)}},
                    absl::StrCat("c_softmax_with_cross_entropy ", ir::DataTypeName(dtype)), Compare::kNorm,
                    /*bf16_roundings=*/1, *groups);
  }
}

TEST_F(CudaKernelTest, ViewsSplitsConcatsAndFillsMatchTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{2, 6, 4}, dtype});
    ASSERT_TRUE(b.Op1("reshape", {x}, {{"shape", std::vector<int64_t>{12, 4}}}).ok());
    ir::Value* wide = *b.Op1("unsqueeze", {x}, {{"axis", std::vector<int64_t>{1}}});
    ASSERT_TRUE(b.Op1("squeeze", {wide}, {{"axis", std::vector<int64_t>{1}}}).ok());
    absl::StatusOr<std::vector<ir::Value*>> thirds = b.Create("split_with_num", {x}, {{"num", int64_t{3}}, {"axis", int64_t{1}}});
    ASSERT_TRUE(thirds.ok()) << thirds.status();
    absl::StatusOr<std::vector<ir::Value*>> uneven =
        b.Create("split", {x}, {{"sections", std::vector<int64_t>{1, 3}}, {"axis", int64_t{-1}}});
    ASSERT_TRUE(uneven.ok()) << uneven.status();
    ASSERT_TRUE(b.Op1("concat", {(*thirds)[2], (*thirds)[0]}, {{"axis", int64_t{1}}}).ok());
    ASSERT_TRUE(b.Op1("concat", {(*uneven)[1], (*uneven)[0]}, {{"axis", int64_t{2}}}).ok());
    ASSERT_TRUE(b.Op1("full", {}, {{"shape", ir::Shape{3, 5}}, {"value", -1.75}, {"dtype", dtype}}).ok());
    ExpectSameOnGpu(p, {{"x", Random({{2, 6, 4}, dtype}, 14, -100, 100)}},
                    absl::StrCat("shape ops ", ir::DataTypeName(dtype)));
  }
}

struct MatmulCase {
  ir::Shape x, y;
  bool trans_x, trans_y;
};

TEST_F(CudaKernelTest, MatmulAndItsGradientMatchTheCpuFoldedBatchedBroadcastAndTransposed) {
  const std::vector<MatmulCase> cases = {
      {{8, 16}, {16, 12}, false, false},         // one GEMM
      {{4, 8, 16}, {12, 16}, false, true},       // batch folded into m, y transposed
      {{16, 8}, {16, 12}, true, false},          // x transposed
      {{2, 3, 4, 5}, {3, 6, 5}, false, true},    // batches broadcast: y summed over the leading 2
      {{4, 5}, {2, 5, 6}, false, false},         // x broadcast over y's batch: x_grad summed
      {{2, 5, 4}, {2, 6, 5}, true, true},        // both transposed, batched
      {{5}, {5, 3}, false, false},               // a vector
      {{3, 0}, {0, 4}, false, false},            // empty contraction: zeros
  };
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const MatmulCase& c : cases) {
      ir::Program p;
      ir::Builder b(&p);
      ir::Value* x = b.Data("x", {c.x, dtype});
      ir::Value* y = b.Data("y", {c.y, dtype});
      const ir::AttributeMap attrs = {{"trans_x", c.trans_x}, {"trans_y", c.trans_y}};
      absl::StatusOr<ir::Value*> out = b.Op1("matmul", {x, y}, attrs);
      ASSERT_TRUE(out.ok()) << out.status();
      ir::Value* g = b.Data("g", (*out)->type());
      ASSERT_TRUE(b.Create("matmul_grad", {x, y, g}, attrs).ok());
      ExpectSameOnGpu(p,
                      {{"x", Random(x->type(), 15, -1, 1)}, {"y", Random(y->type(), 16, -1, 1)},
                       {"g", Random(g->type(), 17, -1, 1)}},
                      absl::StrCat("matmul ", ir::DataTypeName(dtype), " ", ir::ShapeToString(c.x),
                                   c.trans_x ? "ᵀ" : "", " · ", ir::ShapeToString(c.y), c.trans_y ? "ᵀ" : ""),
                      Compare::kNorm);
    }
  }
}

// fused_gemm_epilogue and its gradient op: the bias (and the GELU; in the gradient the bias's
// column sums) in cuBLASLt's epilogue (or, where cuBLASLt offers
// none — a type, a GELU over columns not a multiple of 8, as 12 below — the bias copied to every
// row with the GEMM adding to it, then the GELU kernel) against the CPU's matmul, add and gelu.
// bf16 rounds the sum once on the GPU, the product and the sum on the CPU (and the GELU reads the
// rounded sum there): three roundings apart at most. An empty contraction is the bias alone.
TEST_F(CudaKernelTest, FusedGemmEpilogueMatchesTheCpu) {
  const std::vector<MatmulCase> cases = {
      {{8, 16}, {16, 12}, false, false},      // one GEMM
      {{4, 8, 16}, {12, 16}, false, true},    // batch folded into m, y transposed
      {{2, 3, 40}, {40, 96}, false, false},   // a GPT block's shape, small
      {{3, 0}, {0, 4}, false, false},         // empty contraction: the bias alone
  };
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const MatmulCase& c : cases) {
      for (const std::string activation : {"none", "gelu"}) {
        ir::Program p;
        ir::Builder b(&p);
        ir::Value* x = b.Data("x", {c.x, dtype});
        ir::Value* y = b.Data("y", {c.y, dtype});
        const int64_t n = c.trans_y ? c.y[0] : c.y[1];
        ir::Value* bias = b.Data("bias", {{n}, dtype});
        absl::StatusOr<std::vector<ir::Value*>> out = b.Create(
            "fused_gemm_epilogue", {x, y, bias}, {{"trans_x", false}, {"trans_y", c.trans_y}, {"activation", activation}});
        ASSERT_TRUE(out.ok()) << out.status();
        ir::Value* g = b.Data("g", out->front()->type());  // and the gradient: the bias's from the GEMM
        ASSERT_TRUE(b.Create("fused_gemm_epilogue_grad", {x, y, g}, {{"trans_x", false}, {"trans_y", c.trans_y}}).ok());
        ExpectSameOnGpu(p,
                        {{"x", Random(x->type(), 18, -1, 1)}, {"y", Random(y->type(), 19, -1, 1)},
                         {"bias", Random(bias->type(), 20, -1, 1)}, {"g", Random(g->type(), 21, -1, 1)}},
                        absl::StrCat("fused_gemm_epilogue ", ir::DataTypeName(dtype), " ", ir::ShapeToString(c.x),
                                     " · ", ir::ShapeToString(c.y), c.trans_y ? "ᵀ" : "", " activation ", activation),
                        Compare::kNorm, /*bf16_roundings=*/3);
      }
    }
  }
}

TEST_F(CudaKernelTest, LayerNormAndItsGradientMatchTheCpu) {
  struct Case {
    ir::Shape x;
    int64_t begin_norm_axis;
  };
  // Rows shorter than a block, and longer; a mean far from 0 (the two-pass variance); enough
  // rows for the parameter gradients to sum in 10 chunks (executor/cuda/column_split.h).
  for (const Case& c :
       std::vector<Case>{{{3, 5, 70}, 2}, {{4, 300}, 1}, {{2, 3, 4, 9}, 2}, {{96, 40}, 1}, {{700, 40}, 1}}) {
    for (const auto& [dtype, param_dtype] : kNormDtypes) {
      ir::Program p;
      ir::Builder b(&p);
      ir::Value* x = b.Data("x", {c.x, dtype});
      int64_t cols = 1;
      for (size_t d = static_cast<size_t>(c.begin_norm_axis); d < c.x.size(); ++d) cols *= c.x[d];
      ir::Value* scale = b.Data("scale", {{cols}, param_dtype});
      ir::Value* bias = b.Data("bias", {{cols}, param_dtype});
      const ir::AttributeMap attrs = {{"begin_norm_axis", c.begin_norm_axis}, {"epsilon", 1e-5}};
      absl::StatusOr<std::vector<ir::Value*>> norm = b.Create("layer_norm", {x, scale, bias}, attrs);
      ASSERT_TRUE(norm.ok()) << norm.status();
      ir::Value* g = b.Data("g", {c.x, dtype});
      ASSERT_TRUE(b.Create("layer_norm_grad", {x, scale, bias, (*norm)[1], (*norm)[2], g}, attrs).ok());
      ExpectSameOnGpu(p,
                      {{"x", Random(x->type(), 18, 3, 5)}, {"scale", Random(scale->type(), 19, 0.5, 1.5)},
                       {"bias", Random(bias->type(), 20, -1, 1)}, {"g", Random(g->type(), 21, -1, 1)}},
                      absl::StrCat("layer_norm ", ir::DataTypeName(dtype), " (parameters ",
                                   ir::DataTypeName(param_dtype), ") ", ir::ShapeToString(c.x)),
                      Compare::kNorm);
    }
  }
}

TEST_F(CudaKernelTest, RmsNormAndItsGradientMatchTheCpu) {
  for (const ir::Shape& shape : std::vector<ir::Shape>{{3, 5, 70}, {4, 300}, {96, 40}, {7, 100, 40}}) {
    for (const auto& [dtype, param_dtype] : kNormDtypes) {
      ir::Program p;
      ir::Builder b(&p);
      ir::Value* x = b.Data("x", {shape, dtype});
      ir::Value* scale = b.Data("scale", {{shape.back()}, param_dtype});
      const ir::AttributeMap attrs = {{"begin_norm_axis", static_cast<int64_t>(shape.size()) - 1}, {"epsilon", 1e-6}};
      absl::StatusOr<std::vector<ir::Value*>> norm = b.Create("rms_norm", {x, scale}, attrs);
      ASSERT_TRUE(norm.ok()) << norm.status();
      ir::Value* g = b.Data("g", {shape, dtype});
      ASSERT_TRUE(b.Create("rms_norm_grad", {x, scale, (*norm)[1], g}, attrs).ok());
      ExpectSameOnGpu(p,
                      {{"x", Random(x->type(), 41, -2, 2)}, {"scale", Random(scale->type(), 42, 0.5, 1.5)},
                       {"g", Random(g->type(), 43, -1, 1)}},
                      absl::StrCat("rms_norm ", ir::DataTypeName(dtype), " (parameters ", ir::DataTypeName(param_dtype),
                                   ") ", ir::ShapeToString(shape)),
                      Compare::kNorm);
    }
  }
}

TEST_F(CudaKernelTest, RotaryEmbeddingAndItsGradientMatchTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (bool neox : {true, false}) {
      for (bool positions : {false, true}) {
        ir::Program p;
        ir::Builder b(&p);
        ir::Value* q = b.Data("q", {{2, 6, 4, 8}, dtype});
        ir::Value* k = b.Data("k", {{2, 6, 2, 8}, dtype});
        ir::Value* pos = positions ? b.Data("pos", {{2, 6}, DataType::kInt64}) : nullptr;
        const ir::AttributeMap attrs = {{"use_neox_rotary_style", neox}};
        absl::StatusOr<std::vector<ir::Value*>> rope = b.Create("fused_rope", {q, k, nullptr, nullptr, nullptr, pos}, attrs);
        ASSERT_TRUE(rope.ok()) << rope.status();
        ir::Value* gq = b.Data("gq", q->type());
        ir::Value* gk = b.Data("gk", k->type());
        ASSERT_TRUE(b.Create("fused_rope_grad", {nullptr, nullptr, pos, gq, gk, nullptr}, attrs).ok());
        Feeds feeds = {{"q", Random(q->type(), 44, -1, 1)}, {"k", Random(k->type(), 45, -1, 1)},
                       {"gq", Random(q->type(), 46, -1, 1)}, {"gk", Random(k->type(), 47, -1, 1)}};
        if (positions) {
          std::vector<double> ids;
          for (int i = 0; i < 12; ++i) ids.push_back((i * 5) % 9);  // positions beyond the sequence too
          feeds["pos"] = TensorFromDoubles({{2, 6}, DataType::kInt64}, ids);
        }
        ExpectSameOnGpu(p, feeds,
                        absl::StrCat("fused_rope ", ir::DataTypeName(dtype), neox ? " neox" : " halves",
                                     positions ? " with positions" : ""),
                        Compare::kNorm);  // x·cos - x_p·sin can cancel: fused multiply-adds differ there
      }
    }
  }
}

// (parameter dtype, gradient dtype) of the updates: each dtype alone, and an f32 master weight
// updated from its bf16 or f16 gradient, as under mixed precision.
const std::vector<std::pair<DataType, DataType>> kUpdateTypes = {
    {DataType::kFloat32, DataType::kFloat32},  {DataType::kFloat64, DataType::kFloat64},
    {DataType::kBFloat16, DataType::kBFloat16}, {DataType::kFloat32, DataType::kBFloat16},
    {DataType::kFloat32, DataType::kFloat16}};

TEST_F(CudaKernelTest, AdamWStepsAndSkipsAsTheCpu) {
  for (const auto& [dtype, grad_dtype] : kUpdateTypes) {
    for (double skip : {0.0, 1.0}) {
      ir::Program p;
      ir::Builder b(&p);
      // beta2_pow in f64 beside an f32 beta1_pow: each beta power is written in its own dtype.
      const ir::TensorType type{{7, 9}, dtype}, grad_type{{7, 9}, grad_dtype}, scalar{{}, DataType::kFloat32};
      const ir::TensorType scalar64{{}, DataType::kFloat64};
      std::vector<ir::Value*> operands = {b.Data("param", type),        b.Data("grad", grad_type),
                                          b.Data("lr", scalar),          b.Data("m1", type),
                                          b.Data("m2", type),            b.Data("beta1_pow", scalar),
                                          b.Data("beta2_pow", scalar64), b.Data("skip", scalar)};
      absl::StatusOr<std::vector<ir::Value*>> step =
          b.Create("adamw", operands, {{"beta1", 0.9}, {"beta2", 0.95}, {"epsilon", 1e-8}, {"coeff", 0.1}});
      ASSERT_TRUE(step.ok()) << step.status();
      ExpectSameOnGpu(p,
                      {{"param", Random(type, 22, -1, 1)}, {"grad", Random(grad_type, 23, -0.1, 0.1)},
                       {"lr", Tensor::Scalar(DataType::kFloat32, 3e-3)}, {"m1", Random(type, 24, -0.01, 0.01)},
                       {"m2", Random(type, 25, 0, 1e-3)}, {"beta1_pow", Tensor::Scalar(DataType::kFloat32, 0.729)},
                       {"beta2_pow", Tensor::Scalar(DataType::kFloat64, 0.857375)},
                       {"skip", Tensor::Scalar(DataType::kFloat32, skip)}},
                      absl::StrCat("adamw ", ir::DataTypeName(dtype), " grad ", ir::DataTypeName(grad_dtype),
                                   skip > 0 ? " skipped" : ""),
                      Compare::kOneUlp);
    }
  }
}

// The multi_precision settings a merged update of these dtypes takes: false, and true for an f32
// master weight with a bf16/f16 gradient (each parameter's new master also rounded to it).
// With each, skip_update 0 and 1.
std::vector<std::pair<double, bool>> SkipAndMultiPrecision(DataType dtype, DataType grad_dtype) {
  std::vector<std::pair<double, bool>> settings;
  const bool mixed = dtype == DataType::kFloat32 && ir::IsLowPrecisionFloat(grad_dtype);
  for (bool multi_precision : mixed ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
    for (double skip : {0.0, 1.0}) settings.push_back({skip, multi_precision});
  }
  return settings;
}

// merged_adamw over 30 parameters (two launches of up to 24), one of them empty and one of
// several blocks, each with beta powers of its own: every parameter as the CPU updates it (and
// under multi_precision its rounded copy as the CPU's cast rounds it).
TEST_F(CudaKernelTest, MergedAdamWUpdatesEachParameterAsTheCpu) {
  for (const auto& [dtype, grad_dtype] : kUpdateTypes) {
    for (const auto& [skip, multi_precision] : SkipAndMultiPrecision(dtype, grad_dtype)) {
      ir::Program p;
      ir::Builder b(&p);
      const ir::TensorType scalar{{}, DataType::kFloat32};
      std::vector<ir::Value*> operands = {b.Data("lr", scalar), b.Data("skip", scalar)};
      Feeds feeds = {{"lr", Tensor::Scalar(DataType::kFloat32, 3e-3)}, {"skip", Tensor::Scalar(DataType::kFloat32, skip)}};
      for (int64_t i = 0; i < 30; ++i) {
        const int64_t rows = i == 3 ? 0 : i == 7 ? 9000 : 1 + (i * 37) % 50;
        const ir::TensorType type{{rows, 3}, dtype}, grad_type{{rows, 3}, grad_dtype};
        const std::string n = absl::StrCat(i);
        for (const auto& [name, t, seed, low, high] :
             std::vector<std::tuple<std::string, ir::TensorType, uint64_t, double, double>>{
                 {"param" + n, type, 100 + 6 * i, -1, 1},
                 {"grad" + n, grad_type, 101 + 6 * i, -0.1, 0.1},
                 {"m1" + n, type, 102 + 6 * i, -0.01, 0.01},
                 {"m2" + n, type, 103 + 6 * i, 0, 1e-3}}) {
          operands.push_back(b.Data(name, t));
          feeds[name] = Random(t, seed, low, high);
        }
        for (const char* pow : {"beta1_pow", "beta2_pow"}) {
          operands.push_back(b.Data(pow + n, scalar));
          feeds[pow + n] = Tensor::Scalar(DataType::kFloat32, std::string(pow) == "beta1_pow" ? 0.9 - 0.01 * i : 0.95 - 0.01 * i);
        }
      }
      ASSERT_TRUE(b.Create("merged_adamw", operands,
                           {{"beta1", 0.9}, {"beta2", 0.95}, {"epsilon", 1e-8}, {"coeff", 0.1},
                            {ir::kMultiPrecision, multi_precision}})
                      .ok());
      ExpectSameOnGpu(p, feeds,
                      absl::StrCat("merged_adamw ", ir::DataTypeName(dtype), " grad ", ir::DataTypeName(grad_dtype),
                                   skip > 0 ? " skipped" : "", multi_precision ? " multi_precision" : ""),
                      Compare::kOneUlp);
    }
  }
}

// merged_sgd and merged_momentum (nesterov) over 30 parameters, likewise.
TEST_F(CudaKernelTest, MergedSgdAndMomentumUpdateEachParameterAsTheCpu) {
  for (const auto& [dtype, grad_dtype] : kUpdateTypes) {
    for (const auto& [skip, multi_precision] : SkipAndMultiPrecision(dtype, grad_dtype)) {
      for (const std::string op : {"merged_sgd", "merged_momentum"}) {
        ir::Program p;
        ir::Builder b(&p);
        const ir::TensorType scalar{{}, DataType::kFloat32};
        std::vector<ir::Value*> operands = {b.Data("lr", scalar), b.Data("skip", scalar)};
        Feeds feeds = {{"lr", Tensor::Scalar(DataType::kFloat32, 3e-3)},
                       {"skip", Tensor::Scalar(DataType::kFloat32, skip)}};
        for (int64_t i = 0; i < 30; ++i) {
          const int64_t rows = i == 3 ? 0 : i == 7 ? 9000 : 1 + (i * 37) % 50;
          const ir::TensorType type{{rows, 3}, dtype}, grad_type{{rows, 3}, grad_dtype};
          const std::string n = absl::StrCat(i);
          std::vector<std::tuple<std::string, ir::TensorType, uint64_t, double>> tensors = {
              {"param" + n, type, 300 + 3 * i, 1}, {"grad" + n, grad_type, 301 + 3 * i, 0.1}};
          if (op == "merged_momentum") tensors.push_back({"velocity" + n, type, 302 + 3 * i, 0.01});
          for (const auto& [name, t, seed, scale] : tensors) {
            operands.push_back(b.Data(name, t));
            feeds[name] = Random(t, seed, -scale, scale);
          }
        }
        ir::AttributeMap attrs = op == "merged_sgd" ? ir::AttributeMap{}
                                                    : ir::AttributeMap{{"mu", 0.9}, {"use_nesterov", true},
                                                                       {"regularization_coeff", 0.01}};
        attrs[ir::kMultiPrecision] = multi_precision;
        ASSERT_TRUE(b.Create(op, operands, attrs).ok());
        ExpectSameOnGpu(p, feeds,
                        absl::StrCat(op, " ", ir::DataTypeName(dtype), " grad ", ir::DataTypeName(grad_dtype),
                                     skip > 0 ? " skipped" : "", multi_precision ? " multi_precision" : ""));
      }
    }
  }
}

TEST_F(CudaKernelTest, SgdAndMomentumStepAndSkipAsTheCpu) {
  for (const auto& [dtype, grad_dtype] : kUpdateTypes) {
    for (double skip : {0.0, 1.0}) {
      ir::Program p;
      ir::Builder b(&p);
      const ir::TensorType type{{7, 9}, dtype}, grad_type{{7, 9}, grad_dtype}, scalar{{}, DataType::kFloat32};
      ir::Value* param = b.Data("param", type);
      ir::Value* grad = b.Data("grad", grad_type);
      ir::Value* lr = b.Data("lr", scalar);
      ir::Value* skip_update = b.Data("skip", scalar);
      ASSERT_TRUE(b.Create("sgd", {param, lr, grad, skip_update}).ok());
      ir::Value* velocity = b.Data("velocity", type);
      for (bool nesterov : {false, true}) {
        ASSERT_TRUE(b.Create("momentum", {param, grad, velocity, lr, skip_update},
                             {{"mu", 0.9}, {"use_nesterov", nesterov}, {"regularization_coeff", 0.01}})
                        .ok());
      }
      ExpectSameOnGpu(p,
                      {{"param", Random(type, 54, -1, 1)}, {"grad", Random(grad_type, 55, -0.1, 0.1)},
                       {"velocity", Random(type, 56, -0.1, 0.1)}, {"lr", Tensor::Scalar(DataType::kFloat32, 3e-2)},
                       {"skip", Tensor::Scalar(DataType::kFloat32, skip)}},
                      absl::StrCat("sgd and momentum ", ir::DataTypeName(dtype), " grad ", ir::DataTypeName(grad_dtype),
                                   skip > 0 ? " skipped" : ""));
    }
  }
}

// Non-finite elements counted in every float dtype (infs and nans planted among finite values),
// and the loss-scaling rule in each of its branches: overflow below and at the decrease
// threshold (the scale floored at 1), a good step below and at the increase threshold, and an
// increase that would overflow f32.
TEST_F(CudaKernelTest, LossScalingCountsAndUpdatesAsTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{37, 41}, dtype});
    ASSERT_TRUE(b.Op1("count_nonfinite", {x}).ok());
    std::vector<double> values = TensorToDoubles(Random(x->type(), 57, -3, 3));
    for (size_t i = 5; i < values.size(); i += 97) values[i] = (i % 2 ? 1 : -1) * INFINITY;
    for (size_t i = 11; i < values.size(); i += 131) values[i] = NAN;
    ExpectSameOnGpu(p, {{"x", TensorFromDoubles(x->type(), values)}},
                    absl::StrCat("count_nonfinite ", ir::DataTypeName(dtype)), Compare::kExact);
  }
  struct Case {
    double found, scale, good, bad;
  };
  for (const Case& c : std::vector<Case>{{1, 8, 3, 0}, {1, 1.5, 0, 1}, {0, 8, 0, 1}, {0, 8, 3, 0}, {0, 3e38, 3, 0}}) {
    ir::Program p;
    ir::Builder b(&p);
    const ir::TensorType scalar{{}, DataType::kFloat32};
    std::vector<ir::Value*> in;
    for (const char* name : {"found", "scale", "good", "bad", "skipped"}) in.push_back(b.Data(name, scalar));
    ASSERT_TRUE(b.Create("update_loss_scaling", in,
                         {{"incr_every_n_steps", int64_t{4}}, {"decr_every_n_nan_or_inf", int64_t{2}},
                          {"incr_ratio", 2.0}, {"decr_ratio", 0.5}})
                    .ok());
    ExpectSameOnGpu(p,
                    {{"found", Tensor::Scalar(DataType::kFloat32, c.found)},
                     {"scale", Tensor::Scalar(DataType::kFloat32, c.scale)},
                     {"good", Tensor::Scalar(DataType::kFloat32, c.good)},
                     {"bad", Tensor::Scalar(DataType::kFloat32, c.bad)},
                     {"skipped", Tensor::Scalar(DataType::kFloat32, 7)}},
                    absl::StrCat("update_loss_scaling found ", c.found, " scale ", c.scale, " good ", c.good, " bad ",
                                 c.bad),
                    Compare::kExact);
  }
}

// max and min with ties (values on a coarse grid) and a NaN, and their gradients, which split
// among the ties: exact.
TEST_F(CudaKernelTest, MaximaMinimaAndTheirGradientsMatchTheCpuExactly) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const std::string op : {"max", "min"}) {
      for (const std::vector<int64_t>& axis : std::vector<std::vector<int64_t>>{{}, {-1}, {0, 2}}) {
        ir::Program p;
        ir::Builder b(&p);
        ir::Value* x = b.Data("x", {{4, 3, 10}, dtype});
        const ir::AttributeMap attrs = {{"axis", axis}, {"keep_dim", false}};
        absl::StatusOr<ir::Value*> out = b.Op1(op, {x}, attrs);
        ASSERT_TRUE(out.ok()) << out.status();
        ir::Value* g = b.Data("g", (*out)->type());
        ASSERT_TRUE(b.Op1(op + "_grad", {x, *out, g}, attrs).ok());
        std::vector<double> values = TensorToDoubles(Random(x->type(), 58, -2, 2));
        for (double& v : values) v = std::round(v * 2) / 2;  // ties
        values[17] = NAN;
        ExpectSameOnGpu(p, {{"x", TensorFromDoubles(x->type(), values)}, {"g", Random(g->type(), 59, -1, 1)}},
                        absl::StrCat(op, " over ", axis.size(), " axes ", ir::DataTypeName(dtype)), Compare::kExact);
      }
    }
  }
}

TEST_F(CudaKernelTest, SumsMeansAndTheirGradientsMatchTheCpu) {
  struct Case {
    std::vector<int64_t> axis;
    bool keep_dim;
  };
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const std::string op : {"sum", "mean"}) {
      for (const Case& c : std::vector<Case>{{{}, false}, {{-1}, false}, {{0, 2}, true}, {{1}, false}}) {
        ir::Program p;
        ir::Builder b(&p);
        ir::Value* x = b.Data("x", {{4, 3, 50}, dtype});
        const ir::AttributeMap attrs = {{"axis", c.axis}, {"keep_dim", c.keep_dim}};
        absl::StatusOr<ir::Value*> out = b.Op1(op, {x}, attrs);
        ASSERT_TRUE(out.ok()) << out.status();
        ir::Value* g = b.Data("g", (*out)->type());
        ASSERT_TRUE(b.Op1(op + "_grad", {x, g}, attrs).ok());
        ExpectSameOnGpu(p, {{"x", Random(x->type(), 26, -1, 2)}, {"g", Random(g->type(), 27, -1, 1)}},
                        absl::StrCat(op, " ", ir::DataTypeName(dtype), " over ", c.axis.size(), " axes"));
      }
    }
  }
}

TEST_F(CudaKernelTest, EmbeddingAndItsGradientMatchTheCpuAndNameABadId) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    for (DataType id_type : {DataType::kInt64, DataType::kInt32}) {
      for (int64_t padding_idx : {int64_t{-1}, int64_t{3}}) {
        ir::Program p;
        ir::Builder b(&p);
        ir::Value* ids = b.Data("ids", {{4, 6}, id_type});
        ir::Value* table = b.Data("table", {{10, 12}, dtype});
        const ir::AttributeMap attrs = {{"padding_idx", padding_idx}};
        ASSERT_TRUE(b.Op1("embedding", {ids, table}, attrs).ok());
        ir::Value* g = b.Data("g", {{4, 6, 12}, dtype});
        ASSERT_TRUE(b.Op1("embedding_grad", {ids, table, g}, attrs).ok());
        std::vector<double> id_values;
        for (int i = 0; i < 24; ++i) id_values.push_back((i * 7) % 10 == 9 ? 3 : (i * 7) % 10);  // repeats, 3 often
        ExpectSameOnGpu(p,
                        {{"ids", TensorFromDoubles(ids->type(), id_values)}, {"table", Random(table->type(), 28, -1, 1)},
                         {"g", Random(g->type(), 29, -1, 1)}},
                        absl::StrCat("embedding ", ir::DataTypeName(dtype), " ids ", ir::DataTypeName(id_type),
                                     " padding ", padding_idx));
      }
    }
  }
  ir::Program p;
  ir::Builder b(&p);
  ASSERT_TRUE(b.Op1("embedding", {b.Data("ids", {{2}, DataType::kInt64}), b.Data("table", {{5, 3}, DataType::kFloat32})}).ok());
  absl::StatusOr<std::map<int64_t, Tensor>> bad =
      RunOn(p, {{"ids", TensorFromDoubles({{2}, DataType::kInt64}, {1, 5})}, {"table", Random({{5, 3}, DataType::kFloat32}, 30, 0, 1)}},
            Device::Cuda(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("embedding id 5 at flat index 1 is out of range for vocab size 5"),
            std::string::npos)
      << bad.status();
}

TEST_F(CudaKernelTest, SoftmaxesAndTheirGradientsMatchTheCpuAlongAnyAxis) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const std::string op : {"softmax", "log_softmax"}) {
      for (int64_t axis : {int64_t{-1}, int64_t{1}}) {
        ir::Program p;
        ir::Builder b(&p);
        ir::Value* x = b.Data("x", {{3, 40, 7}, dtype});
        absl::StatusOr<ir::Value*> out = b.Op1(op, {x}, {{"axis", axis}});
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_TRUE(b.Op1(op + "_grad", {*out, b.Data("g", x->type())}, {{"axis", axis}}).ok());
        ExpectSameOnGpu(p, {{"x", Random(x->type(), 31, -4, 4)}, {"g", Random(x->type(), 32, -1, 1)}},
                        absl::StrCat(op, " ", ir::DataTypeName(dtype), " axis ", axis), Compare::kNorm);
      }
    }
  }
}

TEST_F(CudaKernelTest, CrossEntropyInEachFormMatchesTheCpu) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (bool soft_label : {false, true}) {
      for (bool use_softmax : {true, false}) {
        ir::Program p;
        ir::Builder b(&p);
        const ir::TensorType logits_type{{3, 4, 11}, dtype};
        ir::Value* logits = b.Data("logits", logits_type);
        ir::Value* label = soft_label ? b.Data("label", logits_type) : b.Data("label", {{3, 4, 1}, DataType::kInt64});
        const ir::AttributeMap attrs = {{"soft_label", soft_label}, {"use_softmax", use_softmax}, {"ignore_index", int64_t{-100}}};
        absl::StatusOr<std::vector<ir::Value*>> ce = b.Create("cross_entropy_with_softmax", {logits, label}, attrs);
        ASSERT_TRUE(ce.ok()) << ce.status();
        ir::Value* g = b.Data("g", (*ce)[1]->type());
        ASSERT_TRUE(b.Create("cross_entropy_with_softmax_grad", {label, (*ce)[0], g}, attrs).ok());
        ASSERT_TRUE(b.Create("cross_entropy_with_softmax_grad_from_logits", {label, logits, g}, attrs).ok());
        std::vector<double> classes;
        for (int i = 0; i < 12; ++i) classes.push_back(i == 5 ? -100 : (i * 3) % 11);  // one lane ignored
        ExpectSameOnGpu(p,
                        {{"logits", Random(logits_type, 33, use_softmax ? -3 : 0.05, use_softmax ? 3 : 1)},
                         {"label", soft_label ? Random(logits_type, 34, 0, 0.2)
                                              : TensorFromDoubles({{3, 4, 1}, DataType::kInt64}, classes)},
                         {"g", Random(g->type(), 35, 0.5, 1.5)}},
                        absl::StrCat("cross entropy ", ir::DataTypeName(dtype), soft_label ? " soft" : " hard",
                                     use_softmax ? " logits" : " probabilities"),
                        Compare::kNorm);
      }
    }
  }
}

// The gradient from the logits where its loops loop: rows of 300 classes (past a block's 256
// threads) in f16, bf16 and f32, and 70,000 lanes around axis 1 (past the grid's 65,535 blocks,
// so blocks stride over lanes; classes 35,000 elements apart); the forward without a softmax.
TEST_F(CudaKernelTest, CrossEntropyGradientFromTheLogitsMatchesTheCpuOnLongRowsAndManyLanes) {
  struct Case {
    DataType dtype;
    ir::Shape logits;
    int64_t axis;
  };
  for (const Case& c : {Case{DataType::kFloat16, {4, 6, 300}, -1}, Case{DataType::kBFloat16, {4, 6, 300}, -1},
                        Case{DataType::kFloat32, {4, 6, 300}, -1}, Case{DataType::kBFloat16, {2, 8, 35000}, 1}}) {
    ir::Program p;
    ir::Builder b(&p);
    const ir::TensorType logits_type{c.logits, c.dtype};
    ir::Shape label_shape = c.logits;
    label_shape[c.axis < 0 ? label_shape.size() - 1 : static_cast<size_t>(c.axis)] = 1;
    const int64_t classes = c.logits[c.axis < 0 ? c.logits.size() - 1 : static_cast<size_t>(c.axis)];
    ir::Value* logits = b.Data("logits", logits_type);
    ir::Value* label = b.Data("label", {label_shape, DataType::kInt64});
    // As bf16/f16 models run it: no softmax result (the kernel writes none).
    const ir::AttributeMap attrs = {{"axis", c.axis}, {"ignore_index", int64_t{-100}}, {"return_softmax", false}};
    absl::StatusOr<std::vector<ir::Value*>> ce = b.Create("cross_entropy_with_softmax", {logits, label}, attrs);
    ASSERT_TRUE(ce.ok()) << ce.status();
    ir::Value* g = b.Data("g", (*ce)[1]->type());
    ASSERT_TRUE(b.Create("cross_entropy_with_softmax_grad_from_logits", {label, logits, g}, attrs).ok());
    const int64_t lanes = ir::TensorType{label_shape, DataType::kInt64}.num_elements();
    std::vector<double> ids;
    for (int64_t i = 0; i < lanes; ++i) ids.push_back(i % 7 == 3 ? -100 : (i * 13) % classes);  // some ignored
    ExpectSameOnGpu(p,
                    {{"logits", Random(logits_type, 36, -4, 4)},
                     {"label", TensorFromDoubles({label_shape, DataType::kInt64}, ids)},
                     {"g", Random(g->type(), 37, 0.5, 1.5)}},
                    absl::StrCat("cross entropy from the logits ", ir::DataTypeName(c.dtype), " ", logits_type.ToString(),
                                 " axis ", c.axis),
                    Compare::kNorm);
  }
}

// Attention by norm. The GPU rounds P and dS to bf16 before their GEMMs (as FlashAttention-2
// does) where the CPU keeps them in f32: a bf16 result then carries two roundings, its own and
// its operand's. dS sums to zero over a row, so dq and dk cancel and the operand's relative error
// does not shrink in them: within 2/256 of the norm (seen on an H200: 1.05/256 at most).
struct AttentionCase {
  ir::Shape q, kv;
  bool causal, masked, return_softmax;
};

void ExpectAttentionSameOnGpu(const AttentionCase& c, DataType dtype, const std::string& form = "",
                              const std::string& op = "flash_attn") {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* q = b.Data("q", {c.q, dtype});
  ir::Value* k = b.Data("k", {c.kv, dtype});
  ir::Value* v = b.Data("v", {c.kv, dtype});
  const ir::TensorType mask_type{{1, c.q[2], c.q[1], c.kv[1]}, dtype};
  ir::Value* mask = c.masked ? b.Data("mask", mask_type) : nullptr;
  const ir::AttributeMap attrs = {{"causal", c.causal}, {"return_softmax", c.return_softmax}};
  absl::StatusOr<std::vector<ir::Value*>> attn = b.Create(op, {q, k, v, nullptr, mask}, attrs);
  ASSERT_TRUE(attn.ok()) << attn.status();
  ir::Value* g = b.Data("g", (*attn)[0]->type());
  absl::StatusOr<std::vector<ir::Value*>> grad =
      b.Create("flash_attn_grad", {q, k, v, (*attn)[0], (*attn)[2], (*attn)[3], mask, g}, {{"causal", c.causal}});
  ASSERT_TRUE(grad.ok()) << grad.status();
  Feeds feeds = {{"q", Random(q->type(), 36, -1, 1)}, {"k", Random(k->type(), 37, -1, 1)},
                 {"v", Random(v->type(), 38, -1, 1)}, {"g", Random(g->type(), 39, -1, 1)}};
  if (c.masked) feeds["mask"] = Random(mask_type, 40, -2, 0);
  ExpectSameOnGpu(p, feeds,
                  absl::StrCat(op, " ", form, ir::DataTypeName(dtype), " q ", ir::ShapeToString(c.q), " kv ",
                               ir::ShapeToString(c.kv), c.causal ? " causal" : "", c.masked ? " masked" : ""),
                  Compare::kNorm, /*bf16_roundings=*/2);
}

// Sets an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(CudaKernelTest, AttentionAndItsGradientMatchTheCpuGroupedCausalAndMasked) {
  const std::vector<AttentionCase> cases = {
      {{2, 9, 4, 8}, {2, 9, 2, 8}, true, false, false},   // grouped kv heads, causal (the GPT's form)
      {{2, 9, 4, 8}, {2, 9, 4, 8}, false, false, true},   // full attention, probabilities returned
      {{1, 5, 2, 16}, {1, 9, 2, 16}, true, true, false},  // fewer queries than keys: bottom-right, masked
      {{2, 96, 4, 64}, {2, 96, 4, 64}, true, false, false},  // the benchmark's form, smaller: heads batched
  };
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16}) {
    for (const AttentionCase& c : cases) ExpectAttentionSameOnGpu(c, dtype);
  }
  ExpectAttentionSameOnGpu(cases[0], DataType::kFloat32, "", "flash_attention");  // Paddle's other name
}

// The two forms of bf16/f16 attention (executor/cuda/attention_choice.h), each against the CPU on
// the cases cuDNN's fused attention takes: PDIST_CUDA_ATTENTION=cudnn runs cuDNN or fails (no
// silent fallback), =gemm the GEMM form. Within the same 2/256 as the GEMM form: cuDNN's kernels
// round P and dS to the input type before their products too.
TEST_F(CudaKernelTest, AttentionOnCudnnAndAsGemmsMatchesTheCpu) {
#if !PDIST_HAVE_CUDNN
  GTEST_SKIP() << "this build has no cuDNN attention (scripts/fetch-cudnn-frontend.sh, then reconfigure)";
#endif
  const std::vector<AttentionCase> cases = {
      {{2, 9, 4, 32}, {2, 9, 2, 32}, true, false, false},        // grouped kv heads, causal, a short row
      {{2, 40, 4, 64}, {2, 72, 4, 64}, false, false, false},     // fewer queries than keys
      {{2, 256, 4, 128}, {2, 256, 4, 128}, true, false, false},  // the 1.3B model's head_dim
      // Causal with fewer queries than keys: the one case where the mask's alignment (the
      // queries are the keys' last rows, bottom-right) matters; lengths multiples of 64, which
      // cuDNN before 9.6 requires.
      {{1, 64, 4, 64}, {1, 128, 4, 64}, true, false, false},
  };
  for (const char* form : {"cudnn", "gemm"}) {
    ScopedEnv env("PDIST_CUDA_ATTENTION", form);
    for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16}) {
      for (const AttentionCase& c : cases) ExpectAttentionSameOnGpu(c, dtype, absl::StrCat("(", form, ") "));
    }
  }
}

// An unknown PDIST_CUDA_ATTENTION is an error naming it, not a silent default.
TEST_F(CudaKernelTest, AnUnknownAttentionFormIsAnError) {
  ScopedEnv env("PDIST_CUDA_ATTENTION", "flash3");
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* q = b.Data("q", {{1, 4, 2, 8}, DataType::kBFloat16});
  ASSERT_TRUE(b.Create("flash_attn", {q, q, q}, {{"causal", true}}).ok());
  absl::StatusOr<std::map<int64_t, Tensor>> out = RunOn(p, {{"q", Random(q->type(), 1, -1, 1)}}, Device::Cuda(0));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("PDIST_CUDA_ATTENTION=flash3: expected auto, cudnn or gemm"),
            std::string_view::npos)
      << out.status();
}

// Issue 15's check (b) without the engine: ten AdamW steps of the README's GPT, the executor on
// GPU 0 against the executor on the CPU from the same initial parameters and batches; f32
// losses within 1e-4 relative.
TEST_F(CudaKernelTest, TenAdamWStepsOfTheReadmeGptMatchTheCpu) {
  absl::StatusOr<ir::Program> program = ReadmeGptTrainingProgram();
  ASSERT_TRUE(program.ok()) << program.status();
  Workspace cpu_ws, gpu_ws;
  ASSERT_TRUE(InitializeWorkspace(*program, /*seed=*/1, cpu_ws).ok());
  for (const auto& [name, t] : cpu_ws) {
    absl::StatusOr<Tensor> placed = ToDevice(t, Device::Cuda(0));
    ASSERT_TRUE(placed.ok()) << placed.status();
    gpu_ws[name] = *placed;
  }
  absl::StatusOr<Executor> on_cpu = Executor::Create(*program);
  absl::StatusOr<Executor> on_gpu = Executor::Create(*program, {.device = Device::Cuda(0)});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  for (int step = 0; step < 10; ++step) {
    const ir::TensorType ids{{16, 64}, DataType::kInt64};
    std::vector<double> tokens(16 * 64), labels(16 * 64);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = std::floor(256 * UniformAt(100 + step, i));
      labels[i] = std::floor(256 * UniformAt(200 + step, i));
    }
    const Feeds feeds = {{"tokens", TensorFromDoubles(ids, tokens)},
                         {"labels", TensorFromDoubles(ids, labels)},
                         {passes::kLearningRateFeed, Tensor::Scalar(DataType::kFloat32, 1e-3)}};
    Feeds gpu_feeds;
    for (const auto& [name, t] : feeds) gpu_feeds[name] = *ToDevice(t, Device::Cuda(0));
    absl::StatusOr<RunResult> cpu = on_cpu->Run(feeds, cpu_ws);
    absl::StatusOr<RunResult> gpu = on_gpu->Run(gpu_feeds, gpu_ws);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_NEAR(gpu->loss, cpu->loss, 1e-4 * std::abs(cpu->loss)) << "step " << step;
  }
}

TEST_F(CudaKernelTest, DropoutDrawsTheCpusMaskWholeAndAsAPiece) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{8, 16}, dtype});
    absl::StatusOr<std::vector<ir::Value*>> whole = b.Create("dropout", {x}, {{"p", 0.3}, {"seed", int64_t{7}}});
    ASSERT_TRUE(whole.ok()) << whole.status();
    ir::Value* g = b.Data("g", {{8, 16}, dtype});
    ASSERT_TRUE(b.Create("dropout_grad", {(*whole)[1], g}, {{"p", 0.3}}).ok());
    ir::Value* piece = b.Data("piece", {{4, 16}, dtype});
    ASSERT_TRUE(b.Create("c_dropout", {piece},
                         {{"p", 0.3}, {"seed", int64_t{7}}, {"global_shape", std::vector<int64_t>{8, 16}},
                          {"offsets", std::vector<int64_t>{4, 0}}})
                    .ok());
    const Feeds feeds = {{"x", Random({{8, 16}, dtype}, 4, -1, 1)},
                         {"g", Random({{8, 16}, dtype}, 5, -1, 1)},
                         {"piece", Random({{4, 16}, dtype}, 6, -1, 1)}};
    ExpectSameOnGpu(p, feeds, absl::StrCat("dropout ", ir::DataTypeName(dtype)));
  }
}

// A timeline on a GPU is read off CUDA events (executor/stream.h's TimeMark): the marks around
// device work are as far apart as the device took, however soon the host returned.
TEST_F(CudaKernelTest, TimeMarksReadTheDevicesClockNotTheHosts) {
  absl::StatusOr<Backend*> gpu = BackendFor(Device::Cuda(0));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::unique_ptr<Stream> stream = (*gpu)->NewStream(Device::Cuda(0), StreamPurpose::kCompute);
  const ir::TensorType type{{64 << 20}, DataType::kFloat32};  // 256 MiB
  absl::StatusOr<Tensor> src = ToDevice(Tensor::Zeros(type), Device::Cuda(0));
  absl::StatusOr<Tensor> dst = ToDevice(Tensor::Zeros(type), Device::Cuda(0));
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  constexpr int kCopies = 40;  // 21.5 GB moved: more than a millisecond at 20 TB/s
  const auto host_start = std::chrono::steady_clock::now();
  std::shared_ptr<TimeMark> start = stream->MarkTime();
  for (int i = 0; i < kCopies; ++i) ASSERT_TRUE((*gpu)->Copy(*src, *dst, stream.get()).ok());
  std::shared_ptr<TimeMark> end = stream->MarkTime();
  const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  absl::StatusOr<double> device_s = end->SecondsSince(*start);
  ASSERT_TRUE(device_s.ok()) << device_s.status();
  EXPECT_GE(*device_s, 2.0 * kCopies * static_cast<double>(type.num_bytes()) / 20e12);
  EXPECT_GT(*device_s, host_s) << "the host only enqueued the copies";
  absl::StatusOr<double> mixed = end->SecondsSince(*CpuInlineStream().MarkTime());
  EXPECT_FALSE(mixed.ok());
}

}  // namespace
}  // namespace pdist::exec
