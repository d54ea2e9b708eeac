// CheckLabels.
#include "executor/label_check.h"

#include "absl/strings/str_cat.h"

namespace pdist::exec {

absl::Status CheckLabels(const Tensor& label, int64_t classes, int64_t ignore_index) {
  if (label.dtype() != ir::DataType::kInt64 && label.dtype() != ir::DataType::kInt32) {
    return absl::InvalidArgumentError(absl::StrCat("hard labels must be i32 or i64, got ", ir::DataTypeName(label.dtype())));
  }
  for (int64_t lane = 0; lane < label.num_elements(); ++lane) {
    const int64_t l = label.dtype() == ir::DataType::kInt64 ? label.data<int64_t>()[lane] : label.data<int32_t>()[lane];
    if (l == ignore_index) continue;
    if (l < 0 || l >= classes) {
      return absl::InvalidArgumentError(absl::StrCat("label ", l, " at flat index ", lane, " is out of range for ",
                                                     classes, " classes (ignore_index = ", ignore_index, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::exec
