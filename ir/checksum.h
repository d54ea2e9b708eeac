// FNV-1a 64: the checksum of model.pb files and checkpoint blocks. Not cryptographic: it catches
// truncation, flipped bits and stray bytes, which is what a file on a disk suffers.
//
//   const uint64_t sum = Fnv1a64(bytes);
#pragma once

#include <cstdint>
#include <string_view>

namespace pdist::ir {

inline uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace pdist::ir
