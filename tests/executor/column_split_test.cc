// How the CUDA backend splits its column sums (executor/cuda/column_split.h): plain arithmetic,
// checked here on every machine, since the GPU kernels that use it run only where a GPU is.
#include "executor/cuda/column_split.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace pdist::exec::cuda {
namespace {

TEST(ColumnSplitTest, EveryRowFallsInExactlyOneNonEmptyChunk) {
  for (int64_t rows : {1, 2, 63, 64, 65, 127, 128, 700, 1000, 4096, 16384, 65536, 1 << 20}) {
    for (int64_t cols : {1, 16, 31, 32, 33, 40, 72, 2048, 6144, 8192, 50304}) {
      const ColumnSplit split = SplitColumns(rows, cols);
      SCOPED_TRACE(testing::Message() << rows << " rows, " << cols << " columns");
      ASSERT_GE(split.chunks, 1);
      ASSERT_GE(split.chunk_rows, 1);
      // Chunk k holds rows [k·chunk_rows, min(rows, (k + 1)·chunk_rows)): together all rows,
      // and the last one at least one.
      EXPECT_GE(split.chunks * split.chunk_rows, rows);
      EXPECT_LT((split.chunks - 1) * split.chunk_rows, rows);
      EXPECT_EQ(split.tiles, (cols + kColumnTile - 1) / kColumnTile);
      EXPECT_LE(split.chunks, 65535) << "a grid's y dimension holds at most 65,535 blocks";
      // No chunk below the minimum unless there is one chunk; no more blocks than asked for
      // unless the columns alone make more.
      if (split.chunks > 1) {
        EXPECT_GE(split.chunk_rows, kColumnMinChunkRows);
        EXPECT_LE(split.tiles * (split.chunks - 1), kColumnTargetBlocks);
      }
      // The workspace stays small: two sums per column per chunk, a few MiB at most.
      EXPECT_EQ(split.WorkspaceElements(cols), 2 * split.chunks * cols);
      EXPECT_LE(split.WorkspaceElements(cols), 2 * (kColumnTargetBlocks * kColumnTile + cols));
    }
  }
}

// The shapes of the 1.3B GPT's profile (16,384 tokens; hidden 2,048; qkv 6,144; ffn 8,192): each
// sum fills the GPU with at least the target number of blocks, where one chunk per column tile
// gave the 2,048-wide norm and biases 64 blocks.
TEST(ColumnSplitTest, TheProfiledModelsSumsFillTheGpu) {
  for (int64_t cols : {2048, 6144, 8192}) {
    const ColumnSplit split = SplitColumns(16384, cols);
    SCOPED_TRACE(testing::Message() << cols << " columns");
    EXPECT_GE(split.tiles * split.chunks, kColumnTargetBlocks);
    EXPECT_GT(split.chunks, 1);
  }
  const ColumnSplit norm = SplitColumns(16384, 2048);
  EXPECT_EQ(norm.tiles, 64);
  EXPECT_EQ(norm.chunks, 32);
  EXPECT_EQ(norm.chunk_rows, 512);
}

TEST(ColumnSplitTest, FewRowsMakeOneChunkAndNothingMakesNone) {
  const ColumnSplit few = SplitColumns(100, 40);
  EXPECT_EQ(few.chunks, 1);
  EXPECT_EQ(few.chunk_rows, 100);
  EXPECT_EQ(SplitColumns(0, 40).chunks, 0);
  EXPECT_EQ(SplitColumns(40, 0).WorkspaceElements(0), 0);
}

TEST(ColumnSplitTest, OnlyManyTermsAndEnoughOutputsSumByColumns) {
  EXPECT_TRUE(SumsByColumns(kManyTerms, kColumnTile));
  EXPECT_FALSE(SumsByColumns(kManyTerms - 1, 1000));
  EXPECT_FALSE(SumsByColumns(100000, kColumnTile - 1));
}

}  // namespace
}  // namespace pdist::exec::cuda
