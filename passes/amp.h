// Automatic mixed precision (Micikevicius et al., 2018; Paddle's amp O1/O2): a forward program
// rewritten so that compute-bound ops run in bf16 or f16 and precision-sensitive ones in f32,
// with a cast wherever a value crosses between the two. Runs before autodiff: the backward of a
// cast is the cast back, so gradients come out in the dtype of their forward values.
//
//   o1 — parameters stay f32; the ops of the low-precision list read low-precision copies:
//     %w = parameter "h.0.fc1.weight" : f32[64,256]
//     %7 = cast(%6) {dtype = bf16} : bf16[8,32,64]
//     %8 = cast(%w) {dtype = bf16} : bf16[64,256]
//     %9 = matmul(%7, %8) : bf16[8,32,256]
//     %10 = gelu(%9) : bf16[8,32,256]                     follows its operands
//     %11 = cast(%10) {dtype = f32}                        before an f32-list op, or an op that
//     %12 = add(%11, %res) : f32                           also reads an f32 value
//   o2 — the parameters themselves become low precision (except those read only by f32-list
//   ops and norms: a LayerNorm's scale and bias), and every op outside the f32 list runs low
//   precision; the optimizer pass then updates each low-precision parameter through an f32
//   master weight (passes/optimizer.h), which is what makes o2 train like f32. The norms read
//   and write their activation in low precision with f32 parameters, computing in f32
//   inside (as Megatron-LM's and Apex's fused LayerNorm do); no cast, and the backward keeps
//   a 2-byte input instead of an f32 copy:
//     %5, %6, %7 = layer_norm(%4, %ln_w, %ln_b) : bf16[8,32,64], f32[8,32], f32[8,32]
//
// The f32 list: norms (o1), softmax, log_softmax, cross entropy, reductions and exp — ops whose
// result or whose long sums lose too much in 8 mantissa bits. The low-precision list: matmul and
// flash attention (their kernels accumulate in f32). Every other op follows its operands: low
// precision when all its float operands are, f32 (o1) or low precision (o2) when they are mixed.
// Casts are shared per (value, dtype, model chunk), placed before their first reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

enum class AmpLevel { kO1, kO2 };
absl::StatusOr<AmpLevel> ParseAmpLevel(const std::string& name);  // o1 | o2 (also O1 | O2)
const char* AmpLevelName(AmpLevel level);
// bfloat16 | bf16 | float16 | f16 → the low-precision dtype; anything else is an error naming it.
absl::StatusOr<ir::DataType> ParseAmpDtype(const std::string& name);

// Op types of the two lists, for tests and docs.
bool RunsInFloat32(const std::string& op_type);
bool RunsInLowPrecision(const std::string& op_type);
// The f32-list ops that o2 runs on low-precision activations with f32 parameters (every operand
// after the first): layer_norm, rms_norm and cross_entropy_with_softmax with a hard label. Their
// math is f32 either way (ir/ops/norm.cc, ir/ops/nn.cc), so the results are the o1 form's
// rounded once (statistics and the loss stay f32); a custom list naming one overrides this.
bool TakesLowPrecisionActivations(const std::string& op_type);

struct AmpReport {
  int64_t casts = 0;                // cast ops inserted
  int64_t low_precision_ops = 0;    // ops whose results are now bf16/f16
  int64_t low_precision_params = 0; // o2: parameters stored in bf16/f16
};

// Paddle's custom_white_list / custom_black_list (strategy amp section): op types moved to the
// low-precision list (white) or to the f32 list (black), whatever the built-in lists say.
struct AmpCustomLists {
  std::vector<std::string> low_precision;
  std::vector<std::string> float32;
};

// Needs a forward program (no gradients yet: FailedPrecondition otherwise) whose floats are f32;
// f64 programs are refused (mixed precision is a speed and memory trade for f32 training).
absl::StatusOr<AmpReport> ApplyAmp(ir::Program& program, ir::DataType low, AmpLevel level,
                                   const AmpCustomLists& custom = {});

}  // namespace pdist::passes
