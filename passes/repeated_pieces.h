// Repeated pieces: a forward program cut into pieces, the pieces compared by what they compute,
// and the longest run of identical blocks of them — a model's repeated layers, found from the
// graph alone. Two users: the planner's segments (planner/program_segments.h) and full
// recompute's one segment per layer (passes/recompute.h).
//
//   GPT, 2 layers, cut where only the residual stream crosses:
//     pieces  [emb] [attn] [mlp] [attn] [mlp] [ln_f head loss]
//     ids       0     1      2     1      2     3
//     longest repetition: start 1, period 2, copies 2 (the layers)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pdist::passes {

// What ops [begin, end) compute, as a string two identical pieces share: op types, attributes
// (a dropout's seed aside: every layer draws its own), result types, and each operand as a
// result inside the piece, an argument of a role and type, or an outside value of a type.
// Reshards are transparent (their result stands for their operand): they move values, and a
// pipeline stage boundary's reshard falls inside some layers and not others.
std::string PieceSignature(const std::vector<const ir::Operation*>& ops, size_t begin, size_t end);

// `ops` cut before each index of `cuts` (ascending, none 0): each piece's first op, its kind as
// an id (equal signatures, equal ids), and prefix sums of op counts (one longer than `begin`).
struct Pieces {
  std::vector<size_t> begin;
  std::vector<int64_t> id;
  std::vector<int64_t> ops_before;
};
Pieces CutIntoPieces(const std::vector<const ir::Operation*>& ops, const std::vector<size_t>& cuts);

// The longest stretch of k ≥ 2 consecutive copies of a block of `period` pieces, by ops covered;
// ties go to the shorter period, then the earlier start. copies == 0: nothing repeats.
struct Repetition {
  size_t start = 0, period = 0, copies = 0;
  int64_t ops_covered = 0;
};
Repetition LongestRepetition(const Pieces& pieces);

}  // namespace pdist::passes
