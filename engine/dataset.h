// TokenDataset: next-token (tokens, labels) batches from a token file or a byte-level text file.
//
//   TokenDatasetOptions o{.path = "data/essay.txt", .format = TokenFormat::kText,
//                         .batch = 8, .seq_len = 32, .vocab = 256, .seed = 1};
//   PDIST_ASSIGN_OR_RETURN(TokenDataset ds, TokenDataset::Open(o));
//   PDIST_ASSIGN_OR_RETURN(Batch b, ds.Next());  // b.tokens, b.labels: i64[8,32]
//
// Windows: the token stream t[0..N) is cut into W = floor((N-1) / seq) windows; window w is
// tokens t[w·seq, w·seq + seq) with labels t[w·seq + 1, w·seq + seq + 1) (labels = the next
// token). Windows do not overlap, so every token is a label once per epoch.
//
// Order: epoch e visits the W windows in a permutation drawn from (seed, e) by Fisher–Yates on
// a SplitMix64 generator (our own, so the order is the same with every standard library);
// `shuffle = false` visits them in file order. Batch k takes windows k·batch .. k·batch+batch-1
// of the endless sequence epoch 0, epoch 1, ... — a batch may span two epochs, nothing is
// dropped, and BatchAt(k) is a pure function of (file, options, k), so a resumed run (Seek)
// sees exactly the batches an uninterrupted one would.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/token_format.h"  // TokenFormat, the file formats
#include "executor/tensor.h"

namespace pdist::engine {

struct TokenDatasetOptions {
  std::string path;
  TokenFormat format = TokenFormat::kText;
  int64_t batch = 8;
  int64_t seq_len = 32;
  int64_t vocab = 256;  // every token must be < vocab
  uint64_t seed = 0;
  bool shuffle = true;  // false: windows in file order (evaluation)
};

struct Batch {
  exec::Tensor tokens;  // i64[batch, seq_len]
  exec::Tensor labels;  // i64[batch, seq_len]: tokens shifted by one
};

class TokenDataset {
 public:
  // Reads and checks the whole file. Errors: NotFound naming a missing path; InvalidArgument
  // for a malformed file, a token >= vocab (naming the id, its position and vocab), or fewer
  // than batch·seq_len + 1 tokens (naming the file, its count and what one batch needs).
  static absl::StatusOr<TokenDataset> Open(const TokenDatasetOptions& options);
  // The same checks over tokens already in memory; `name` stands for the path in errors.
  static absl::StatusOr<TokenDataset> FromTokens(std::vector<uint32_t> tokens, const TokenDatasetOptions& options,
                                                 std::string name = "<memory>");

  // The batch at the current step, then advances the step.
  absl::StatusOr<Batch> Next();
  // The batch of step `step` (>= 0), without moving the current step.
  absl::StatusOr<Batch> BatchAt(int64_t step) const;
  // Sets the step Next() returns (to resume from a checkpoint).
  void Seek(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t num_windows() const { return num_windows_; }
  // Batches per epoch, rounded down (a batch may straddle two epochs).
  int64_t batches_per_epoch() const { return num_windows_ / options_.batch; }
  const TokenDatasetOptions& options() const { return options_; }

 private:
  TokenDataset(std::vector<uint32_t> tokens, TokenDatasetOptions options);
  // Index of the window at position `i` of the endless window sequence.
  int64_t WindowAt(int64_t i) const;

  std::vector<uint32_t> tokens_;
  TokenDatasetOptions options_;
  int64_t num_windows_ = 0;
  int64_t step_ = 0;
  // The permutation of the last epoch asked for: consecutive batches reuse it.
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_order_;
};

// Writes `tokens` in the kPdtok format: "PDTOK\0\0\0" (8 bytes), uint32 version = 1, uint32
// token width in bytes (2 or 4), then the tokens little-endian. Width 2 needs every token
// < 65536. Errors name the path.
absl::Status WriteTokenFile(const std::string& path, const std::vector<uint32_t>& tokens, int width);

}  // namespace pdist::engine
