// The boundary between the CUDA kernels' host side (executor/cuda/*_kernels.cc: attributes,
// shapes, allocation, compiled by the host compiler) and their device side (*.cu, compiled by
// nvcc): plain structs and launch functions, so the .cu files include no project header beyond
// the shared per-element math (executor/math/, executor/random.h).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "executor/cuda/column_split.h"
#include "executor/math/rope.h"

namespace pdist::exec::cuda {

using math::RopeLayout;

// Storage types; bf16 and f16 compute in f32 and round each result, as the CPU kernels do
// (executor/cpu/float_math.h).
enum class ElemType : int8_t { kF32, kF64, kBF16, kF16 };

constexpr int kMaxRank = 8;

// Row-major walk of `shape` (rank dims) with one element stride per operand (0 along a
// broadcast dim): operand k's element for flat index i.
template <int N>
struct StridedIndex {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[N][kMaxRank] = {};
  // Every flat index of the walk fits 32 bits (Walk sets it): the device splits an index into
  // coordinates with 32-bit division, several times cheaper than 64-bit on a GPU (a bias add
  // divides once per element). Offsets stay 64-bit.
  bool narrow = false;
};

enum class BinaryOp : int8_t { kAdd, kSubtract, kMultiply, kDivide, kMaximum };

// out[i] = op(x[.], y[.]) over the `n` elements of out; index: operands 0 = x, 1 = y.
cudaError_t LaunchBinary(BinaryOp op, ElemType type, const void* x, const void* y, void* out, int64_t n,
                         const StridedIndex<2>& index, cudaStream_t stream);

// One operand's gradient: grad[j] = sum over the positions of out that j broadcasts to of
// d(op)/d(operand)(x, y, g) (operand 0: x, 1: y). `grad_index` walks grad's elements (its shape
// aligned to out's rank, strides of x, y, g at grad's positions); `reduced` walks the summed
// dims in row-major order (strides of x, y, g along them). Few terms per element are summed in
// row-major order, as the CPU kernel sums them; many (kManyTerms) in another fixed order. Where
// SumsByColumns(terms, grad_elements), `workspace` holds
// SplitColumns(terms, grad_elements).WorkspaceElements(grad_elements) elements of the type the
// math runs in (f32 for bf16/f16), alive until the launches have run (KernelContext::Scratch);
// elsewhere it may be null.
cudaError_t LaunchBinaryGrad(BinaryOp op, int operand, ElemType type, const void* x, const void* y, const void* g,
                             void* grad, int64_t grad_elements, const StridedIndex<3>& grad_index,
                             const StridedIndex<3>& reduced, void* workspace, cudaStream_t stream);

// The activations (executor/math/activation.h). Forward: out = f(x). Gradient: dx = f'(saved, g),
// `saved` being what the gradient op reads (out for relu, tanh, exp, sigmoid, sqrt, rsqrt; x for
// gelu, silu, erf).
enum class UnaryOp : int8_t { kRelu, kGeluErf, kGeluTanh, kSilu, kTanh, kExp, kSigmoid, kErf, kSqrt, kRsqrt };
cudaError_t LaunchUnary(UnaryOp op, ElemType type, const void* x, void* out, int64_t n, cudaStream_t stream);
cudaError_t LaunchUnaryGrad(UnaryOp op, ElemType type, const void* saved, const void* g, void* dx, int64_t n,
                            cudaStream_t stream);
// scale: out = x·scale + bias, or (x + bias)·scale.
cudaError_t LaunchScale(ElemType type, const void* x, void* out, int64_t n, double scale, double bias,
                        bool bias_after_scale, cudaStream_t stream);
// A copy of `n` elements of `element_size` bytes (1, 2, 4 or 8: any dtype, bit for bit):
// dst[offset 1 of i] = src[offset 0 of i], `index` walking the n positions. Transpose, expand and
// slice read strided and write in order; slice_grad reads in order and writes strided.
cudaError_t LaunchStridedCopy(int element_size, const void* src, void* dst, int64_t n, const StridedIndex<2>& index,
                              cudaStream_t stream);
// Comparisons on floats and integers (ids, labels): out[i] = x[.] op y[.] as bool, the operands
// broadcast by `index` (0 = x, 1 = y); bf16 and f16 compared in f32, as the CPU compares them.
enum class CompareOp : int8_t { kGreaterThan, kLessThan, kEqual };
enum class CompareType : int8_t { kF32, kF64, kBF16, kF16, kI32, kI64 };
cudaError_t LaunchCompare(CompareOp op, CompareType type, const void* x, const void* y, bool* out, int64_t n,
                          const StridedIndex<2>& index, cudaStream_t stream);
// where: out[i] = condition[.] ? x[.] : y[.], elements of `element_size` bytes moved as bits,
// broadcast by `index` (0 = condition, 1 = x, 2 = y).
cudaError_t LaunchWhere(int element_size, const bool* condition, const void* x, const void* y, void* out, int64_t n,
                        const StridedIndex<3>& index, cudaStream_t stream);
// cast: out = x converted from `from` to `to` through double, bf16/f16 rounded from f32 (RNE), as
// the CPU's CastTensor converts (Eigen's bf16/f16 round a double through f32).
cudaError_t LaunchCast(ElemType from, ElemType to, const void* x, void* out, int64_t n, cudaStream_t stream);

// layer_norm over [rows, cols] (the normalised axes flattened into cols): y = (x - mean) ·
// rsqrt(variance + eps) · scale + bias, mean and (biased) variance per row; scale and bias may
// be null. The gradient: dx per row, dscale and dbias (null: not wanted) summed over the rows in
// chunks (executor/cuda/column_split.h), through `workspace`: SplitColumns(rows,
// cols).WorkspaceElements(cols) elements of mean's type, alive until the launches have run (may be
// null when neither dscale nor dbias is wanted).
// x, y and their gradients are of `type`; scale, bias and their gradients of `param_type` (the
// same, or kF32 for a bf16/f16 x); mean and variance of the type the math runs in (f32 for
// bf16/f16, `type` otherwise).
cudaError_t LaunchLayerNorm(ElemType type, ElemType param_type, const void* x, const void* scale, const void* bias,
                            void* y, void* mean, void* variance, int64_t rows, int64_t cols, double eps,
                            cudaStream_t stream);
cudaError_t LaunchLayerNormGrad(ElemType type, ElemType param_type, const void* x, const void* scale, const void* mean,
                                const void* variance, const void* out_grad, void* x_grad, void* scale_grad,
                                void* bias_grad, int64_t rows, int64_t cols, double eps, void* workspace,
                                cudaStream_t stream);

// sum or mean: out[o] = Σ x over the reduced positions of o, accumulated in double in row-major
// order (the CPU's order and accumulator), divided by `count` for mean. `kept` walks out's
// elements (x's offsets of each), `reduced` the summed positions (x's offsets).
cudaError_t LaunchSum(ElemType type, const void* x, void* out, int64_t out_elements, const StridedIndex<1>& kept,
                      const StridedIndex<1>& reduced, bool mean, cudaStream_t stream);
// max or min: out[o] = the extreme of x over o's positions (NaN if any is), ±inf over none.
cudaError_t LaunchExtreme(ElemType type, const void* x, void* out, int64_t out_elements, const StridedIndex<1>& kept,
                          const StridedIndex<1>& reduced, bool max, cudaStream_t stream);
// max_grad, min_grad: x_grad at o's positions = out_grad[o] / (positions equal to out[o]) where x
// equals out[o], else 0. Every position of x belongs to one output, so x_grad is written whole.
cudaError_t LaunchExtremeGrad(ElemType type, const void* x, const void* out, const void* out_grad, void* x_grad,
                              int64_t out_elements, const StridedIndex<1>& kept, const StridedIndex<1>& reduced,
                              cudaStream_t stream);
// sum_grad, mean_grad: x_grad[i] = out_grad[.] / divisor, `index` walking x's elements with
// out_grad's strides (0 along the reduced dims).
cudaError_t LaunchBroadcastBack(ElemType type, const void* out_grad, void* x_grad, int64_t n,
                                const StridedIndex<1>& index, double divisor, cudaStream_t stream);

// embedding: out[i] = weight[ids[i]] (rows of `hidden`), zeros where ids[i] == padding_idx.
// ids are i32 or i64 (`ids_64`), already checked against the vocabulary by the host.
cudaError_t LaunchEmbedding(ElemType type, const void* ids, bool ids_64, const void* weight, void* out, int64_t n,
                            int64_t hidden, int64_t padding_idx, cudaStream_t stream);
// embedding_grad: weight_grad[v] = Σ out_grad[order[p]] for p in [start[v], start[v+1]), in that
// order (the CPU's stable counting sort, made on the host); the padding row stays zero.
cudaError_t LaunchEmbeddingGrad(ElemType type, const int64_t* start, const int64_t* order, const void* out_grad,
                                void* weight_grad, int64_t vocab, int64_t hidden, int64_t padding_idx,
                                cudaStream_t stream);

// c_softmax_with_cross_entropy on a vocab piece [lanes, n] of the classes [start, start + n),
// in three passes around the group's two all-reduces (the caller's, on the same stream):
// RowMax: max[lane] = max_j logits; ExpSums on the group's max: sums[lane] = Σ_j exp(logits −
// max), sums[lanes + lane] = logits[label − start] where held here, else 0; Normalize on the
// group's sums: softmax = exp(logits − max) / sums[lane], loss = log sums[lane] + max −
// sums[lanes + lane] (0 for ignore_index). max, sums and loss in the compute type (f32 for
// bf16/f16). A null softmax writes none (return_softmax false).
cudaError_t LaunchVocabParallelRowMax(ElemType type, const void* logits, void* max, int64_t lanes, int64_t n,
                                      cudaStream_t stream);
cudaError_t LaunchVocabParallelExpSums(ElemType type, const void* logits, const void* label, bool label_64,
                                       const void* max, void* sums, int64_t lanes, int64_t n, int64_t start,
                                       cudaStream_t stream);
cudaError_t LaunchVocabParallelNormalize(ElemType type, const void* logits, const void* label, bool label_64,
                                         const void* max, const void* sums, void* softmax, void* loss, int64_t lanes,
                                         int64_t n, int64_t ignore_index, cudaStream_t stream);
// c_softmax_with_cross_entropy_grad on a vocab piece: logits_grad[lane, j] = g · (p[lane, j] −
// [j == label[lane] − start]), g = loss_grad[lane] (0 for ignore_index; in the compute type).
// Labels i32 or i64. The _from_logits form takes the logits piece and the group's max and sums
// (RowMax and ExpSums around the same all-reduces) and recomputes p = exp(x − max) / sums.
cudaError_t LaunchVocabParallelCrossEntropyGrad(ElemType type, const void* label, bool label_64, const void* softmax,
                                                const void* loss_grad, void* logits_grad, int64_t lanes, int64_t n,
                                                int64_t start, int64_t ignore_index, cudaStream_t stream);
cudaError_t LaunchVocabParallelCrossEntropyGradFromLogits(ElemType type, const void* label, bool label_64,
                                                          const void* logits, const void* max, const void* sums,
                                                          const void* loss_grad, void* logits_grad, int64_t lanes,
                                                          int64_t n, int64_t start, int64_t ignore_index,
                                                          cudaStream_t stream);

// gather: x [outer, axis, inner] → out [outer, n, inner], out row (o, j) = x row (o, rows[j]);
// elements of `element_size` bytes moved as bits. rows: n device int64s in [0, axis).
cudaError_t LaunchGather(int element_size, const void* x, const int64_t* rows, void* out, int64_t outer, int64_t axis,
                         int64_t n, int64_t inner, cudaStream_t stream);
// gather_grad: x_grad row (o, a) = the sum of out_grad rows (o, j) with rows[j] == a, in
// increasing j (start/order: the positions grouped by row, as for embedding_grad).
cudaError_t LaunchGatherGrad(ElemType type, const int64_t* start, const int64_t* order, const void* out_grad,
                             void* x_grad, int64_t outer, int64_t axis, int64_t n, int64_t inner, cudaStream_t stream);

// A tensor seen around one axis: [outer, n, inner], lanes numbered outer-major (as the CPU's
// AxisView, executor/shape_layout.h).
struct Lanes {
  int64_t outer = 1, n = 1, inner = 1;
};
// softmax / log_softmax of each lane, and their gradient from (out, out_grad).
cudaError_t LaunchSoftmax(ElemType type, const void* x, void* out, Lanes lanes, bool log, cudaStream_t stream);
cudaError_t LaunchSoftmaxGrad(ElemType type, const void* out, const void* out_grad, void* x_grad, Lanes lanes, bool log,
                              cudaStream_t stream);
// cross_entropy_with_softmax (the CPU kernel's four forms: hard or soft labels, logits or
// probabilities). Hard labels are i32 or i64 (`label_64`), one per lane, checked by the host;
// ignore_index lanes get loss 0 and gradient 0. loss and loss_grad are in the compute type (f32
// for bf16/f16). A null softmax in the forward writes none (return_softmax false).
// `from_logits`: the gradient's `softmax` operand is the logits, whose softmax it recomputes per
// lane (cross_entropy_with_softmax_grad_from_logits).
struct CrossEntropyForm {
  bool soft_label = false;
  bool use_softmax = true;
  bool label_64 = true;
  int64_t ignore_index = -100;
};
cudaError_t LaunchCrossEntropy(ElemType type, const void* logits, const void* label, void* softmax, void* loss,
                               Lanes lanes, CrossEntropyForm form, cudaStream_t stream);
cudaError_t LaunchCrossEntropyGrad(ElemType type, const void* label, const void* softmax, const void* loss_grad,
                                   void* logits_grad, Lanes lanes, CrossEntropyForm form, bool from_logits,
                                   cudaStream_t stream);

// Scaled dot-product attention on [batch, seq, heads, dim] tensors (k and v with heads_k ≤
// heads_q heads, grouped), the CPU kernel's semantics: causal masks aligned bottom-right, an
// optional additive mask [mask_batch, mask_heads, seq_q, seq_k] (1 = broadcast), lse kept per
// query row [batch, heads_q, seq_q] (-inf for a row that sees no key: zeros out).
struct AttentionShape {
  int64_t batch = 1, seq_q = 1, seq_k = 1, heads_q = 1, heads_k = 1, head_dim = 1, v_dim = 1;
  bool causal = false;
  double scale = 1;
  const void* mask = nullptr;
  int64_t mask_batch = 1, mask_heads = 1;
};
// The GEMM form holds the scores of as many batch elements at once as keep one scores buffer
// within 2^27 elements (512 MiB of f32), at least one.
inline constexpr int64_t kMaxAttentionScoreElements = int64_t{1} << 27;
inline int64_t AttentionChunkBatches(const AttentionShape& a) {
  const int64_t per_batch = std::max<int64_t>(1, a.heads_q * a.seq_q * a.seq_k);
  return std::clamp<int64_t>(kMaxAttentionScoreElements / per_batch, 1, std::max<int64_t>(a.batch, 1));
}
// What the GEMM form's backward holds for the scores of a low-precision attention: S and dP in
// f32, P in the 2-byte storage type (1.25 GiB at most where a batch element's scores fit 2^27).
inline int64_t GemmAttentionScratchBytes(const AttentionShape& a) {
  return (2 * int64_t{sizeof(float)} + 2) * AttentionChunkBatches(a) * a.heads_q * a.seq_q * a.seq_k;
}
// The most workspace cuDNN's fused attention may take instead (its deterministic backward keeps
// dP, 2 bytes a score, for the whole batch, up to the 1 GiB where cuDNN 9.25+ on Hopper switches
// to kernels that need less, and some more besides): a quarter more than the GEMM form's scratch
// or that 1 GiB, whichever is larger. Past it the GEMM form runs.
inline int64_t CudnnAttentionWorkspaceBound(const AttentionShape& a) {
  return std::max(GemmAttentionScratchBytes(a), int64_t{1} << 30) * 5 / 4;
}
// Attention runs as GEMMs around two row kernels (executor/cuda/attention_kernels.cc). Both
// take a chunk of `batches` batch elements from batch b0, whose scores (q·kᵀ, unscaled, in the
// compute type: f32, f64 for f64) are [batches, heads_q, seq_q, seq_k].
//
// Probabilities in the storage type, zero past a row's last visible key: with `lse_in` null,
// each row's log-sum-exp is computed and stored into `lse_out` (indexed over the whole batch, in
// the compute type, as flash_attn's softmax_lse); else P = exp(scale·s + mask − lse_in), the
// backward's replay of the forward's.
cudaError_t LaunchAttentionProbs(ElemType type, const void* scores, const void* lse_in, void* probs, void* lse_out,
                                 const AttentionShape& a, int64_t b0, int64_t batches, cudaStream_t stream);
// The scores' gradient, before the scale (a GEMM's alpha applies it): dS = P ∘ (dP − D), with
// D = Σ dO·O over the row and P replayed from the scores and lse; `dprobs` = dO·vᵀ and lse in
// the compute type, `dscores` in the storage type.
cudaError_t LaunchAttentionScoreGrad(ElemType type, const void* scores, const void* dprobs, const void* out,
                                     const void* out_grad, const void* lse, void* dscores, const AttentionShape& a,
                                     int64_t b0, int64_t batches, cudaStream_t stream);

// A one-element float tensor on the device (learning rate, beta powers, skip_update), read by
// the kernel itself so that the host never waits for it; null data: absent.
struct ScalarRef {
  const void* data = nullptr;
  ElemType type = ElemType::kF32;
};
struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, lr_ratio = 1, coeff = 0.01;
  bool with_decay = true;
};
// adamw on n elements, the CPU's formulas (ir/ops/optimizer.cc), the step-dependent factors
// computed in double from the scalars as the CPU computes them; skip_update > 0 copies the
// operands instead. beta1_pow_out / beta2_pow_out are one element each, of its own type (the op
// lets the two differ).
struct BetaPowTypes {
  ElemType beta1 = ElemType::kF32, beta2 = ElemType::kF32;
};
cudaError_t LaunchAdamW(ElemType type, ElemType grad_type, const void* param, const void* grad, ScalarRef learning_rate,
                        const void* moment1, const void* moment2, ScalarRef beta1_pow, ScalarRef beta2_pow,
                        ScalarRef skip_update, void* param_out, void* moment1_out, void* moment2_out,
                        void* beta1_pow_out, void* beta2_pow_out, BetaPowTypes pow_types, int64_t n,
                        const AdamWConfig& config, cudaStream_t stream);
// One parameter of a merged adamw: adamw's tensors and beta powers (pow_out: one element of
// the launch's pow_types each).
struct AdamWTensors {
  const void* param = nullptr;
  const void* grad = nullptr;
  const void* moment1 = nullptr;
  const void* moment2 = nullptr;
  ScalarRef beta1_pow, beta2_pow;
  void* param_out = nullptr;
  void* moment1_out = nullptr;
  void* moment2_out = nullptr;
  void* beta1_pow_out = nullptr;
  void* beta2_pow_out = nullptr;
  void* rounded_out = nullptr;  // multi_precision: param_out rounded to the gradient's type, or null
  int64_t n = 0;
};
// The merged updates (merged_sgd, merged_momentum, merged_adamw): the base update on each of
// `count` parameters of one storage and one gradient type, a launch per kMergedUpdateTensors of
// them (their addresses travel as kernel arguments, no copy to the device first); every
// parameter updated exactly as the single-parameter launch updates it, and its rounded_out (when
// set: an f32 master with a bf16/f16 gradient) written as LaunchCast rounds param_out.
inline constexpr int kMergedUpdateTensors = 24;
cudaError_t LaunchMergedAdamW(ElemType type, ElemType grad_type, const AdamWTensors* tensors, int64_t count,
                              ScalarRef learning_rate, ScalarRef skip_update, BetaPowTypes pow_types,
                              const AdamWConfig& config, cudaStream_t stream);
struct SgdTensors {
  const void* param = nullptr;
  const void* grad = nullptr;
  void* param_out = nullptr;
  void* rounded_out = nullptr;  // multi_precision: param_out rounded to the gradient's type, or null
  int64_t n = 0;
};
cudaError_t LaunchMergedSgd(ElemType type, ElemType grad_type, const SgdTensors* tensors, int64_t count,
                            ScalarRef learning_rate, ScalarRef skip_update, cudaStream_t stream);
// sgd: param_out = param - lr·grad; skip_update > 0 copies param.
cudaError_t LaunchSgd(ElemType type, ElemType grad_type, const void* param, const void* grad, ScalarRef learning_rate,
                      ScalarRef skip_update, void* param_out, int64_t n, cudaStream_t stream);
struct MomentumConfig {
  double mu = 0.9, regularization_coeff = 0;
  bool nesterov = false;
};
// momentum: g = grad + coeff·param, velocity_out = mu·velocity + g, param_out = param - lr·velocity_out
// (nesterov: param - lr·(g + mu·velocity_out)); skip_update > 0 copies param and velocity.
cudaError_t LaunchMomentum(ElemType type, ElemType grad_type, const void* param, const void* grad, const void* velocity,
                           ScalarRef learning_rate, ScalarRef skip_update, void* param_out, void* velocity_out,
                           int64_t n, const MomentumConfig& config, cudaStream_t stream);
struct MomentumTensors {
  const void* param = nullptr;
  const void* grad = nullptr;
  const void* velocity = nullptr;
  void* param_out = nullptr;
  void* velocity_out = nullptr;
  void* rounded_out = nullptr;  // multi_precision: param_out rounded to the gradient's type, or null
  int64_t n = 0;
};
cudaError_t LaunchMergedMomentum(ElemType type, ElemType grad_type, const MomentumTensors* tensors, int64_t count,
                                 ScalarRef learning_rate, ScalarRef skip_update, const MomentumConfig& config,
                                 cudaStream_t stream);

// count_nonfinite over all n elements of x: `out` (one element of `out_type`) = the number of
// inf and nan; `scratch` is 8 bytes of device memory for the running count.
cudaError_t LaunchCountNonfinite(ElemType type, const void* x, int64_t n, void* out, ElemType out_type, void* scratch,
                                 cudaStream_t stream);
// update_loss_scaling (executor/math/loss_scaling.h) by one thread: the five scalars in, the
// five out (each one element of its own type).
struct LossScalingOperands {
  ScalarRef in[5];
  void* out[5];
  ElemType out_type[5];
};
cudaError_t LaunchUpdateLossScaling(const LossScalingOperands& operands, int64_t incr_every, int64_t decr_every,
                                    double incr_ratio, double decr_ratio, cudaStream_t stream);

// rms_norm over [rows, cols]: invvar = rsqrt(mean(x²) + eps) per row, y = x·invvar·scale. The
// gradient: dx = invvar·(gs - x·invvar·mean(gs·x)·invvar) with gs = out_grad·scale, per row;
// dscale summed over the rows in chunks through `workspace`. Types and workspace as LaunchLayerNorm's.
cudaError_t LaunchRmsNorm(ElemType type, ElemType param_type, const void* x, const void* scale, void* y, void* invvar,
                          int64_t rows, int64_t cols, double eps, cudaStream_t stream);
cudaError_t LaunchRmsNormGrad(ElemType type, ElemType param_type, const void* x, const void* scale, const void* invvar,
                              const void* out_grad, void* x_grad, void* scale_grad, int64_t rows, int64_t cols,
                              void* workspace, cudaStream_t stream);

// fused_rope on one [batch, seq, heads, head_dim] tensor (layout: executor/math/rope.h): out =
// the rotation of x (or its transpose, for the gradient) with the tables' row of each position,
// `positions` (i64 [batch·seq], null: the sequence index) and the tables (compute type of
// `type`: f32 for bf16/f16) on the device.
cudaError_t LaunchRope(ElemType type, const void* x, void* out, int64_t heads, const RopeLayout& layout,
                       const void* sin, const void* cos, const int64_t* positions, bool transpose, cudaStream_t stream);

// Every element of `out` (n elements of `element_size` bytes: 1, 2, 4 or 8) set to the bit
// pattern in the low bytes of `pattern` (the host converts the value, as the CPU does).
cudaError_t LaunchFill(void* out, int64_t n, int element_size, uint64_t pattern, cudaStream_t stream);

// Dropout with the CPU's counter-based draw (executor/random.h DropoutKeeps): element i draws
// number first + position(i), position(i) = i, or, for a piece of a larger tensor, its flat
// index there (`global`: the piece's shape with the larger tensor's strides, `offset`: the
// flat index of the piece's first element).
struct DropoutDraw {
  uint64_t key = 0;
  uint64_t threshold = 0;  // p · 2^53 (0 keeps everything)
  uint64_t first = 0;      // the micro-batch's first number
  bool piece = false;
  StridedIndex<1> global;
  int64_t offset = 0;
};
cudaError_t LaunchDropout(ElemType type, const void* x, void* out, bool* mask, int64_t n, double factor,
                          const DropoutDraw& draw, cudaStream_t stream);
cudaError_t LaunchDropoutGrad(ElemType type, const bool* mask, const void* out_grad, void* x_grad, int64_t n,
                              double factor, cudaStream_t stream);

}  // namespace pdist::exec::cuda
