// Token file formats: decoding and the PDTOK encoding.
#include "engine/token_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pdist::engine {
namespace {

constexpr char kPdtokMagic[8] = {'P', 'D', 'T', 'O', 'K', 0, 0, 0};
constexpr size_t kPdtokHeaderBytes = 16;
constexpr uint32_t kPdtokVersion = 1;

uint32_t LoadLittleEndian(const unsigned char* p, int width) {
  uint32_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

absl::StatusOr<std::vector<uint32_t>> DecodeFixedWidth(std::string_view bytes, int width, const std::string& path) {
  if (bytes.size() % static_cast<size_t>(width) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' has ", bytes.size(),
                                                   " bytes of tokens, not a multiple of the token width ", width,
                                                   " (wrong --data-format?)"));
  }
  std::vector<uint32_t> tokens(bytes.size() / static_cast<size_t>(width));
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = LoadLittleEndian(p + i * width, width);
  return tokens;
}

absl::StatusOr<std::vector<uint32_t>> DecodePdtok(std::string_view bytes, const std::string& path) {
  if (bytes.size() < kPdtokHeaderBytes || std::memcmp(bytes.data(), kPdtokMagic, sizeof(kPdtokMagic)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", path, "' does not start with the PDTOK header (a header-less file? use u16 or u32)"));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint32_t version = LoadLittleEndian(p + 8, 4);
  const uint32_t width = LoadLittleEndian(p + 12, 4);
  if (version != kPdtokVersion) {
    return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' has PDTOK version ", version,
                                                   "; this build reads version ", kPdtokVersion));
  }
  if (width != 2 && width != 4) {
    return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' declares token width ", width,
                                                   " bytes; expected 2 or 4"));
  }
  return DecodeFixedWidth(bytes.substr(kPdtokHeaderBytes), static_cast<int>(width), path);
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> DecodeTokens(std::string_view bytes, TokenFormat format,
                                                   const std::string& path) {
  switch (format) {
    case TokenFormat::kUint16: return DecodeFixedWidth(bytes, 2, path);
    case TokenFormat::kUint32: return DecodeFixedWidth(bytes, 4, path);
    case TokenFormat::kPdtok: return DecodePdtok(bytes, path);
    case TokenFormat::kText: {
      // Through unsigned char: a plain char is signed here, and byte 0xFF must be token 255.
      const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
      return std::vector<uint32_t>(p, p + bytes.size());
    }
  }
  return absl::InternalError("unknown TokenFormat");
}

std::string_view TokenFormatName(TokenFormat format) {
  switch (format) {
    case TokenFormat::kUint16: return "u16";
    case TokenFormat::kUint32: return "u32";
    case TokenFormat::kPdtok: return "pdtok";
    case TokenFormat::kText: return "text";
  }
  return "?";
}

absl::StatusOr<TokenFormat> ParseTokenFormat(std::string_view name) {
  for (TokenFormat f : {TokenFormat::kUint16, TokenFormat::kUint32, TokenFormat::kPdtok, TokenFormat::kText}) {
    if (name == TokenFormatName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown token format '", std::string(name), "'; expected u16, u32, pdtok or text"));
}

absl::StatusOr<std::string> EncodePdtok(const std::vector<uint32_t>& tokens, int width) {
  if (width != 2 && width != 4) {
    return absl::InvalidArgumentError(absl::StrCat("token width must be 2 or 4 bytes, got ", width));
  }
  std::string bytes(kPdtokMagic, sizeof(kPdtokMagic));
  auto append = [&bytes](uint32_t v, int w) {
    for (int i = 0; i < w; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  append(kPdtokVersion, 4);
  append(static_cast<uint32_t>(width), 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (width == 2 && tokens[i] > 0xFFFF) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", tokens[i], " at position ", i, " does not fit in 2 bytes; use width 4"));
    }
    append(tokens[i], width);
  }
  return bytes;
}

}  // namespace pdist::engine
