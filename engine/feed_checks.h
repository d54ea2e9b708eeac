// What a batch must hold before a step runs on it, checked on the host so that a bad batch is
// refused naming the input and the element, with the parameters untouched — rather than found
// by a kernel on one rank mid-step (which aborts the other ranks' communicators) or not at all.
//
//   FeedChecks checks = FeedChecks::Of(forward);                    // once, from the program
//   PDIST_RETURN_IF_ERROR(checks.Check(feeds, FeedUse::kTraining));  // before every step
//   → "batch input 'tokens' holds 999 at flat index 0 of i64[8,16], out of range: embedding reads
//      it as an index into dim 0 of f32[256,32] (0 to 255): not trained on (the parameters are as
//      they were)"
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "executor/executor.h"
#include "ir/program.h"

namespace pdist::engine {

enum class FeedUse { kTraining, kEvaluation, kPrediction };  // what a refusal says was not done

class FeedChecks {
 public:
  // The data inputs `program` reads (a prediction program leaves out the labels), and the index
  // ranges of those that ops read as indices (ir::OpDef::index_operands), against the whole
  // tensors of a global program (a rank's piece of a vocab-parallel table cannot tell an id of
  // another piece from one of none).
  static FeedChecks Of(const ir::Program& program);

  // Every feed of one of the program's data inputs of its type (the whole batch's); no NaN in a
  // floating-point input the program reads (infinities pass: an additive attention mask holds
  // -inf), and every index in its range. For the values, feeds it does not read and inputs on a
  // device are not looked at.
  absl::Status Check(const exec::Feeds& feeds, FeedUse use) const;

 private:
  std::map<std::string, ir::TensorType> types_;  // every data input's, whole
  std::set<std::string> read_;
  struct IndexRange {
    std::string input;
    int64_t size = 0;                     // indices 0 … size-1
    bool from_end = false;                // and -size … -1
    std::optional<int64_t> also_allowed;  // cross entropy's ignore_index
    std::string reader;                   // "embedding reads it as an index into dim 0 of f32[256,32]"
  };
  std::vector<IndexRange> ranges_;
};

}  // namespace pdist::engine
