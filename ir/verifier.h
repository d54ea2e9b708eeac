// The verifier: the invariants every pass may assume and must keep.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "ir/program.h"
#include "ir/types.h"

namespace pdist::ir {

// Checks a whole program:
//  - SSA: every value is defined once (block argument or op result), belongs to the program,
//    and every operand is defined before its use; results point back at their op;
//  - arguments have a non-empty, unique name; names, initialisers and string attributes are
//    UTF-8;
//  - op types are registered, operand counts match the signature, only optional operands are
//    absent, attributes are complete and of the declared kinds;
//  - result types equal what the op's InferMeta gives (re-run here);
//  - a value's DistAttr, if any, fits its shape (DistAttr::Verify), and only a value with a
//    DistAttr is marked annotated (cross-op mesh agreement is left to the completion pass);
//  - the loss, if any, is a floating-point scalar (shape [] or [1]);
//  - each `gradient p <- g` binds a parameter to a value of p's type; each `update s <- v`
//    binds a parameter or optimizer state to a value of identical type, at most once per s.
// Errors are InvalidArgument; they quote the op as printed (canonical value numbers):
//   "op 4 `%5 = matmul(%1, %4) ... : f32[8,32]`: result %5 is f32[8,32] but matmul infers f32[8,64]"
absl::Status VerifyProgram(const Program& program);

// Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF): model.pb stores
// names, initialisers and string attributes as protobuf `string`s, which must be UTF-8.
//   IsValidUtf8("héllo") → true;  IsValidUtf8("\xff") → false
bool IsValidUtf8(std::string_view text);

// A shape's dims are non-negative and its element count fits in int64.
//   CheckTensorType({{-1, 3}, DataType::kFloat32})  → InvalidArgument "negative dimension ..."
absl::Status CheckTensorType(const TensorType& type);

}  // namespace pdist::ir
