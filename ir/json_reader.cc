// ParseJson: nlohmann's SAX parser feeding a tree builder that enforces the limits.
#include "ir/json_reader.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pdist::ir {
namespace {

using Json = nlohmann::json;

class BoundedBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit BoundedBuilder(const JsonLimits& limits) : limits_(limits) {}

  bool null() override { return Put(Json(nullptr)); }
  bool boolean(bool v) override { return Put(Json(v)); }
  bool number_integer(number_integer_t v) override { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Put(Json(v)); }
  bool string(string_t& v) override { return Put(Json(std::move(v))); }
  bool binary(binary_t& v) override { return Put(Json::binary(std::move(v))); }

  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) return Fail(absl::StrCat("duplicate key '", k, "' in one object"));
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_array() override { return Close(); }

  // "not valid JSON (line 1, column 3: syntax error while parsing object key - ...)": nlohmann's
  // message without its exception id.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string detail = e.what();
    const std::string::size_type at = detail.find(" at line ");
    if (at != std::string::npos) detail = detail.substr(at + 4);
    return Fail(absl::StrCat("not valid JSON (", detail, ")"));
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  // Adds `v` where the parser stands: the root, the next item of an array, or the value of the
  // last key. Returns where it went.
  Json* Insert(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }

  bool Count() {
    if (++values_ > limits_.max_values) return Fail(absl::StrCat("more than ", limits_.max_values, " JSON values"));
    return true;
  }

  bool Put(Json v) {
    if (!Count()) return false;
    Insert(std::move(v));
    return true;
  }

  bool Open(Json container) {
    if (!Count()) return false;
    if (static_cast<int64_t>(stack_.size()) >= limits_.max_depth) {
      return Fail(absl::StrCat("JSON nested deeper than ", limits_.max_depth, " levels"));
    }
    const bool object = container.is_object();
    stack_.push_back(Insert(std::move(container)));
    if (object) keys_.emplace_back();
    return true;
  }

  bool Close() {
    if (stack_.back()->is_object()) keys_.pop_back();
    stack_.pop_back();
    return true;
  }

  const JsonLimits& limits_;
  Json root_;
  std::vector<Json*> stack_;               // the open containers, innermost last
  std::vector<std::set<std::string>> keys_;  // keys seen in each open object
  std::string key_;
  int64_t values_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view what, const JsonLimits& limits) {
  const std::string prefix = absl::StrCat(std::string(what), ": ");
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "JSON of ", text.size(), " bytes is larger than the limit of ", limits.max_bytes));
  }
  BoundedBuilder builder(limits);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                                  /*strict=*/true);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, builder.error().empty() ? "not valid JSON" : builder.error()));
  }
  return std::move(builder.root());
}

}  // namespace pdist::ir
