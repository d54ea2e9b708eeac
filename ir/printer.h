// Textual IR: prints a Program in the form ParseProgram reads back (docs/ir.md has the grammar).
//
//   program {
//     %0 = data "x" : f32[8,64]
//     %1 = param "w" : f32[64,64] {init = "normal(0.02)"}
//     %2 = matmul(%0, %1) {trans_x = false, trans_y = false} : f32[8,64]
//     %3 = sum(%2) {axis = int[], keep_dim = false} : f32[]
//     loss %3
//   }
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "ir/program.h"

namespace pdist::ir {

// Canonical value numbers: block arguments first, then op results in op order. Printing,
// serialisation and verifier messages all use these numbers, so they do not depend on the
// internal ids a pass happened to allocate.
//
//   ValueNumbering n(program);
//   n.Name(op->operand(0));   // "%3"
class ValueNumbering {
 public:
  explicit ValueNumbering(const Program& program);

  // The canonical number of `v`, or -1 when `v` is not defined in the program (a broken
  // program: the printer still prints it, the verifier reports it).
  int64_t Number(const Value* v) const;
  // "%3"; "none" for nullptr; "%<undefined id 42>" for a value the program does not define.
  std::string Name(const Value* v) const;
  int64_t size() const { return static_cast<int64_t>(numbers_.size()); }

 private:
  absl::flat_hash_map<const Value*, int64_t> numbers_;
};

// The whole program, one line per argument, op and binding (loss, gradient, update).
std::string PrintProgram(const Program& program);
void PrintProgram(const Program& program, std::ostream& os);

// One op line without indentation, e.g. "%5 = matmul(%3, %4) {trans_x = false} : f32[8,64]";
// used by error messages so that they quote the IR as the user sees it.
std::string PrintOperation(const Operation& op, const ValueNumbering& numbering);

// The type of a value as printed after ':' — "f32[8,64]", "grad f32[8,64]" for a result with a
// non-activation role (`with_role`), plus any per-value suffix: its DistAttr,
// "f32[8,64] dist {mesh: [2] [dp], dims_mapping: [0,-1]}" (`dist!` when annotated).
std::string PrintValueType(const Value& value, bool with_role);

}  // namespace pdist::ir
