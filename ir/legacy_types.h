// Result types that files written by earlier pdist versions spell differently from today's shape
// inference, accepted and upgraded on read so that saved programs (model.pb, textual IR) keep
// loading:
//
//   layer_norm / rms_norm statistics, written flattened before issue 14:
//     %n, %m, %v = layer_norm(%x, ...) {begin_norm_axis = 2} : f32[2,4,8], f32[8], f32[8]
//   read as f32[2,4] (x.shape[:begin_norm_axis]); the same values in the same order.
//
//   bf16 / f16 norms' statistics, written in x's dtype before session 20:
//     %n, %m, %v = layer_norm(%x, ...) {begin_norm_axis = 2} : bf16[2,4,8], bf16[2,4], bf16[2,4]
//   read as f32[2,4], the type the norm computes in (ir/ops/norm.cc).
//
//   bf16 / f16 attention's softmax_lse, written in q's dtype before session 21:
//     %o, %p, %lse, %so = flash_attn(%q, %k, %v) {...} : bf16[2,128,8,64], bf16[0], bf16[2,8,128], i64[2]
//   read as f32[2,8,128] (ir/ops/attention.cc). A program of this age keeps its lse values only
//   until the next forward: nothing but the op's gradient reads them.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "ir/program.h"

namespace pdist::ir {

// Whether `written`, the type of result `index` of an op of type `op_type` whose operand x has
// `x_dtype`, is an older spelling of `inferred`.
bool IsLegacyResultType(const std::string& op_type, size_t index, const TensorType& written, const TensorType& inferred,
                        DataType x_dtype);

// Gives `r` (an older spelling) its inferred type `want`. A DistAttr on a flattened statistic
// moves its mapping to the first leading axis longer than 1 (the only one the old rule could
// shard).
void UpgradeLegacyResult(Value& r, const TensorType& want);

// UpgradeLegacyResult for every result of `program` that is an older spelling (a model.pb read
// as a whole; the text parser upgrades each op as it reads it, so that later ops see the types
// of today).
absl::Status UpgradeLegacyResultTypes(Program& program);

}  // namespace pdist::ir
