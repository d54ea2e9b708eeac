// Token files on their own: the formats a dataset reads and their decoding into token ids
// (TokenDataset, engine/dataset.h, reads files through this). Depends on nothing of the engine,
// so that the fuzzer (tests/fuzz/fuzz_token_file.cc) drives it alone.
//
//   PDIST_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, DecodeTokens(bytes, TokenFormat::kPdtok, "train.pdtok"));
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pdist::engine {

enum class TokenFormat : int8_t {
  kUint16,  // header-less little-endian uint16 tokens (nanoGPT's train.bin)
  kUint32,  // header-less little-endian uint32 tokens
  kPdtok,   // a 16-byte header then the tokens; see EncodePdtok
  kText,    // any file read byte by byte: tokens are the bytes 0..255
};

// "u16", "u32", "pdtok", "text" ↔ TokenFormat.
std::string_view TokenFormatName(TokenFormat format);
absl::StatusOr<TokenFormat> ParseTokenFormat(std::string_view name);

// The token ids of a file's `bytes`. Errors name `path`: a size that is not a multiple of the
// token width, a missing or unknown PDTOK header, an unknown version or width.
absl::StatusOr<std::vector<uint32_t>> DecodeTokens(std::string_view bytes, TokenFormat format, const std::string& path);

// The kPdtok bytes of `tokens`: "PDTOK\0\0\0" (8 bytes), uint32 version = 1, uint32 token width
// in bytes (2 or 4), then the tokens little-endian. Width 2 needs every token < 65536.
absl::StatusOr<std::string> EncodePdtok(const std::vector<uint32_t>& tokens, int width);

}  // namespace pdist::engine
