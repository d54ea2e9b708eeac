// Name patterns: '*' matches any run of characters (dots included), every other character
// itself. Used where a user names tensors by pattern: a strategy's annotations
// (passes/annotate.h) and pdist-import's --frozen.
//
//   GlobMatch("gpt.h.*.attn.qkv.weight", "gpt.h.11.attn.qkv.weight") → true
//   GlobMatch("*.bias", "ln.scale") → false
#pragma once

#include <string_view>

namespace pdist::ir {

bool GlobMatch(std::string_view pattern, std::string_view name);

}  // namespace pdist::ir
