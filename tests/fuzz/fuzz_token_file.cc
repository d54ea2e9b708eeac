// libFuzzer target: untrusted bytes through the token-file decoder (engine/token_format.h). The
// first byte picks the format. Beyond "no crash": a PDTOK file that decodes encodes back to the
// same tokens.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/token_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using pdist::engine::TokenFormat;
  const TokenFormat format = static_cast<TokenFormat>(data[0] % 4);
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<std::vector<uint32_t>> tokens = pdist::engine::DecodeTokens(bytes, format, "fuzz");
  if (!tokens.ok() || format != TokenFormat::kPdtok) return 0;
  const int width = static_cast<unsigned char>(bytes[12]);  // the header's width field (2 or 4)
  absl::StatusOr<std::string> again = pdist::engine::EncodePdtok(*tokens, width);
  if (!again.ok() || *pdist::engine::DecodeTokens(*again, format, "again") != *tokens) {
    std::fprintf(stderr, "fuzz_token_file: property violated: a decoded PDTOK file encodes back\n");
    std::abort();
  }
  return 0;
}
