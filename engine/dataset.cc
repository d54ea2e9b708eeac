// TokenDataset: file decoding, validation, seeded window order, batch assembly.
#include "engine/dataset.h"

#include <fstream>
#include <iterator>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/checked_math.h"
#include "ir/input_file.h"
#include "ir/output_file.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

// SplitMix64 (Steele et al.): a tiny generator with a fixed definition, unlike std::shuffle
// and the std distributions, whose results differ between standard libraries.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Data files (text or tokens) are read whole; up to 64 GiB (the machine's memory is the real limit).
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ir::ReadFileToString(path, int64_t{64} << 30);
  if (!bytes.ok()) return WithContext(bytes.status(), "data file");
  return bytes;
}

absl::Status Validate(const std::vector<uint32_t>& tokens, const TokenDatasetOptions& o, const std::string& name) {
  for (const auto& [field, value] : {std::pair<const char*, int64_t>{"batch", o.batch},
                                     {"seq_len", o.seq_len},
                                     {"vocab", o.vocab}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("TokenDatasetOptions.", field, " must be positive, got ", value));
    }
  }
  const int64_t needed = o.batch * o.seq_len + 1;
  if (static_cast<int64_t>(tokens.size()) < needed) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", name, "' has ", tokens.size(), " tokens; one batch of ",
                                                   o.batch, " x ", o.seq_len, " needs at least ", needed,
                                                   " (batch * seq_len + 1)"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<uint64_t>(o.vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("dataset '", name, "': token id ", tokens[i], " at position ", i,
                                                     " is out of range for vocab ", o.vocab,
                                                     " (ids must be < vocab)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

TokenDataset::TokenDataset(std::vector<uint32_t> tokens, TokenDatasetOptions options)
    : tokens_(std::move(tokens)),
      options_(std::move(options)),
      num_windows_((static_cast<int64_t>(tokens_.size()) - 1) / options_.seq_len) {}

absl::StatusOr<TokenDataset> TokenDataset::Open(const TokenDatasetOptions& options) {
  PDIST_ASSIGN_OR_RETURN(std::string bytes, ReadFile(options.path));
  PDIST_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, DecodeTokens(bytes, options.format, options.path));
  return FromTokens(std::move(tokens), options, options.path);
}

absl::StatusOr<TokenDataset> TokenDataset::FromTokens(std::vector<uint32_t> tokens, const TokenDatasetOptions& options,
                                                      std::string name) {
  PDIST_RETURN_IF_ERROR(Validate(tokens, options, name));
  return TokenDataset(std::move(tokens), options);
}

int64_t TokenDataset::WindowAt(int64_t i) const {
  const int64_t epoch = i / num_windows_;
  const int64_t pos = i % num_windows_;
  if (!options_.shuffle) return pos;
  if (epoch != cached_epoch_) {
    cached_order_.resize(static_cast<size_t>(num_windows_));
    std::iota(cached_order_.begin(), cached_order_.end(), int64_t{0});
    uint64_t state = options_.seed ^ (static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull);
    // Fisher–Yates; the modulo bias is below 2^-40 for any realistic window count.
    for (int64_t j = num_windows_ - 1; j > 0; --j) {
      const auto r = static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(j + 1));
      std::swap(cached_order_[static_cast<size_t>(j)], cached_order_[static_cast<size_t>(r)]);
    }
    cached_epoch_ = epoch;
  }
  return cached_order_[static_cast<size_t>(pos)];
}

absl::StatusOr<Batch> TokenDataset::BatchAt(int64_t step) const {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("dataset step must be >= 0, got ", step));
  const int64_t b = options_.batch, s = options_.seq_len;
  if (!ir::CheckedMul(step, b).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset step ", step, " × batch ", b, " does not fit an int64"));
  }
  const exec::TensorType type{{b, s}, ir::DataType::kInt64};
  Batch batch{exec::Tensor::Empty(type), exec::Tensor::Empty(type)};
  int64_t* tokens = batch.tokens.data<int64_t>();
  int64_t* labels = batch.labels.data<int64_t>();
  for (int64_t row = 0; row < b; ++row) {
    const uint32_t* window = tokens_.data() + WindowAt(step * b + row) * s;
    for (int64_t j = 0; j < s; ++j) {
      tokens[row * s + j] = window[j];
      labels[row * s + j] = window[j + 1];
    }
  }
  return batch;
}

absl::StatusOr<Batch> TokenDataset::Next() {
  PDIST_ASSIGN_OR_RETURN(Batch batch, BatchAt(step_));
  ++step_;
  return batch;
}

absl::Status WriteTokenFile(const std::string& path, const std::vector<uint32_t>& tokens, int width) {
  absl::StatusOr<std::string> bytes = EncodePdtok(tokens, width);
  if (!bytes.ok()) return WithContext(bytes.status(), absl::StrCat("token file '", path, "'"));
  return WithContext(ir::WriteFileAtomically(path, *bytes), "token file");
}

}  // namespace pdist::engine
