// PassOptionReader: typed pass options with errors that name the pass, the option and the value.
#include "passes/pass.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"

namespace pdist::passes {

const std::string* PassOptionReader::Find(const std::string& key) {
  known_.push_back(key);
  auto it = options_.find(key);
  return it == options_.end() ? nullptr : &it->second;
}

namespace {
absl::Status BadValue(const std::string& pass, const std::string& key, const std::string& value, const char* expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("pass '", pass, "': option ", key, "=", value, " is not ", expected));
}
}  // namespace

absl::Status PassOptionReader::Read(const std::string& key, std::string* value) {
  if (const std::string* text = Find(key)) *value = *text;
  return absl::OkStatus();
}

absl::Status PassOptionReader::Read(const std::string& key, double* value) {
  const std::string* text = Find(key);
  if (text == nullptr) return absl::OkStatus();
  if (!absl::SimpleAtod(*text, value)) return BadValue(pass_, key, *text, "a number");
  if (!std::isfinite(*value)) return BadValue(pass_, key, *text, "a finite number");
  return absl::OkStatus();
}

absl::Status PassOptionReader::Read(const std::string& key, int64_t* value) {
  const std::string* text = Find(key);
  if (text == nullptr) return absl::OkStatus();
  if (!absl::SimpleAtoi(*text, value)) {
    // Digits that do not fit are a value out of range, not a word that is not a number.
    const size_t sign = !text->empty() && ((*text)[0] == '-' || (*text)[0] == '+') ? 1 : 0;
    const bool digits = text->size() > sign && std::all_of(text->begin() + static_cast<std::ptrdiff_t>(sign), text->end(),
                                                           [](char c) { return c >= '0' && c <= '9'; });
    return BadValue(pass_, key, *text, digits ? "an integer within int64's range" : "an integer");
  }
  return absl::OkStatus();
}

absl::Status PassOptionReader::Read(const std::string& key, bool* value) {
  const std::string* text = Find(key);
  if (text == nullptr) return absl::OkStatus();
  if (*text == "true" || *text == "1") {
    *value = true;
  } else if (*text == "false" || *text == "0") {
    *value = false;
  } else {
    return BadValue(pass_, key, *text, "true or false");
  }
  return absl::OkStatus();
}

absl::Status PassOptionReader::Read(const std::string& key, std::optional<int64_t>* value, int64_t min) {
  if (options_.count(key) == 0) {
    Find(key);  // known, so Finish accepts it
    return absl::OkStatus();
  }
  int64_t v = 0;
  PDIST_RETURN_IF_ERROR(Read(key, &v));
  if (v < min) {
    return absl::InvalidArgumentError(absl::StrCat("pass '", pass_, "': option '", key, "' must be >= ", min, ", got ", v));
  }
  *value = v;
  return absl::OkStatus();
}

absl::Status PassOptionReader::Read(const std::string& key, std::optional<bool>* value) {
  if (options_.count(key) == 0) {
    Find(key);
    return absl::OkStatus();
  }
  bool v = false;
  PDIST_RETURN_IF_ERROR(Read(key, &v));
  *value = v;
  return absl::OkStatus();
}

absl::Status PassOptionReader::Finish() const {
  for (const auto& [key, value] : options_) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::vector<std::string> known = known_;
    std::sort(known.begin(), known.end());
    return absl::InvalidArgumentError(absl::StrCat(
        "pass '", pass_, "' has no option '", key, "'",
        known.empty() ? std::string(" (it takes none)") : absl::StrCat(" (options: ", absl::StrJoin(known, ", "), ")")));
  }
  return absl::OkStatus();
}

}  // namespace pdist::passes
