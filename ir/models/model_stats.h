// Model statistics from a program: parameter count and FLOPs from the registered op costs.
//
//   PDIST_ASSIGN_OR_RETURN(ir::Program p, BuildGpt(config));
//   int64_t params = CountParameters(p);             // elements, a tied weight once
//   PDIST_ASSIGN_OR_RETURN(FlopCount f, CountFlops(p));
//   f.forward;           // ≈ 2·params·tokens + causal attention
//   f.by_op["matmul"];   // the share of one op type
//   // after passes::AppendBackward: f.backward ≈ 2·f.forward (6·P·tokens in all)
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::ir::models {

// Elements of every parameter (trainable or frozen); a tied weight is one value, counted once.
int64_t CountParameters(const Program& program);
// Elements of trainable parameters only.
int64_t CountTrainableParameters(const Program& program);

// OpDef::cost FLOPs of a program's ops, in three phases told apart by value roles:
//   forward   — results are activations and no operand is a gradient;
//   backward  — some result is a gradient (what autodiff appends);
//   optimizer — the rest: ops that read gradients and produce activations (sgd, adamw, ...).
struct FlopCount {
  double forward = 0;
  // The forward as MFU credits it (OpCost::ModelFlops: causal attention counted in full), the
  // Megatron-LM / PaLM convention the planner's MFU uses.
  double forward_model = 0;
  double backward = 0;
  double optimizer = 0;
  std::map<std::string, double> by_op;  // op type → FLOPs summed over every phase

  double total() const { return forward + backward + optimizer; }
};

// An op type missing from the registry is NotFound, naming it.
absl::StatusOr<FlopCount> CountFlops(const Program& program);
// CountFlops(program).forward: the forward FLOPs of one micro-batch.
absl::StatusOr<double> CountForwardFlops(const Program& program);
// CountFlops(program).forward_model: the same by the model-FLOPs convention (TFLOP/s, MFU).
absl::StatusOr<double> CountForwardModelFlops(const Program& program);

}  // namespace pdist::ir::models
