// How the CUDA backend splits a column sum — Σ_r f(r, c) for every column c of a row-major
// [rows, cols] walk: a bias's gradient (rows = tokens), a norm's scale and bias gradients — over
// the GPU. Plain C++ (no CUDA header), so that the CPU tests check the split the GPU runs.
//
// A block takes kColumnTile neighbouring columns (a warp reads them in one coalesced load) and
// one chunk of the rows, its warps striding the chunk; each block writes its two partial sums per
// column to a workspace, and a second launch adds the chunks per column in order. Rows are
// chunked until there are about kColumnTargetBlocks blocks, so every SM has loads in flight: one
// chunk per column tile would give a 2,048-wide norm 64 blocks, half an H100's SMs, each warp
// walking 2,048 rows one load at a time (the 1.3B profile's add_grad and layer_norm_grad: 26% of
// the step, docs/benchmarks.md). The order of the sums is fixed by the shape alone: every run adds
// the same numbers in the same order.
#pragma once

#include <algorithm>
#include <cstdint>

namespace pdist::exec::cuda {

// Columns per block: one 32-lane warp's load.
constexpr int64_t kColumnTile = 32;
// Sums of at least this many terms per output are split over threads.
constexpr int64_t kManyTerms = 64;
// Enough 256-thread blocks to fill an H100 or H200 (132 SMs, 8 such blocks each) twice over.
constexpr int64_t kColumnTargetBlocks = 2048;
// The fewest rows a chunk holds (8 per warp of a 256-thread block): below it the partial sums
// would cost more than they save.
constexpr int64_t kColumnMinChunkRows = 64;

struct ColumnSplit {
  int64_t tiles = 0;       // column tiles of kColumnTile (the last may be partial)
  int64_t chunks = 0;      // row chunks, each non-empty
  int64_t chunk_rows = 0;  // rows per chunk; the last chunk holds rows - (chunks - 1)·chunk_rows
  // Elements of the compute type the workspace holds: two sums per column per chunk.
  int64_t WorkspaceElements(int64_t cols) const { return 2 * chunks * cols; }
};

// Whether a gradient of `outputs` elements, each a sum of `terms`, sums by columns (else a block
// per output, or a thread per output when there are few terms).
inline bool SumsByColumns(int64_t terms, int64_t outputs) { return terms >= kManyTerms && outputs >= kColumnTile; }

inline ColumnSplit SplitColumns(int64_t rows, int64_t cols) {
  ColumnSplit split;
  if (rows <= 0 || cols <= 0) return split;
  split.tiles = (cols + kColumnTile - 1) / kColumnTile;
  const int64_t wanted = std::max<int64_t>(1, (kColumnTargetBlocks + split.tiles - 1) / split.tiles);
  const int64_t most = std::max<int64_t>(1, rows / kColumnMinChunkRows);
  split.chunk_rows = (rows + std::min(wanted, most) - 1) / std::min(wanted, most);
  split.chunks = (rows + split.chunk_rows - 1) / split.chunk_rows;  // no empty chunk at the end
  return split;
}

}  // namespace pdist::exec::cuda
