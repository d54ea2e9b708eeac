// Pipeline text: a small scanner for `name{key=value,...},...` and its printer.
#include "passes/pass_pipeline_text.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"

namespace pdist::passes {

namespace {

class PipelineParser {
 public:
  explicit PipelineParser(std::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<PassSpec>> Parse() {
    std::vector<PassSpec> specs;
    SkipBlanks();
    while (pos_ < text_.size()) {
      if (!specs.empty()) {
        if (Peek() != ',') return Error("expected ',' between passes");
        ++pos_;
        SkipBlanks();
      }
      PassSpec spec;
      spec.name = Word();
      if (spec.name.empty()) return Error("expected a pass name");
      SkipBlanks();
      if (Peek() == '{') PDIST_RETURN_IF_ERROR(ParseOptions(spec));
      specs.push_back(std::move(spec));
      SkipBlanks();
    }
    return specs;
  }

 private:
  absl::Status ParseOptions(PassSpec& spec) {
    ++pos_;  // '{'
    SkipBlanks();
    if (Peek() == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipBlanks();
      const std::string key = Word();
      if (key.empty()) return Error(absl::StrCat("expected an option name for pass '", spec.name, "'"));
      SkipBlanks();
      if (Peek() != '=') return Error(absl::StrCat("expected '=' after option '", key, "'"));
      ++pos_;
      const size_t start = pos_;
      while (pos_ < text_.size() && Peek() != ',' && Peek() != '}' && Peek() != '{') ++pos_;
      std::string value(text_.substr(start, pos_ - start));
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
      value.erase(0, value.find_first_not_of(" \t\n"));
      if (value.empty()) return Error(absl::StrCat("option '", key, "' has no value"));
      if (!spec.options.emplace(key, value).second) return Error(absl::StrCat("option '", key, "' is given twice"));
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error(absl::StrCat("expected ',' or '}' after option '", key, "'"));
    }
  }

  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipBlanks() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  std::string Word() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '_' || text_[pos_] == '-' || text_[pos_] == '.')) {
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }
  absl::Status Error(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat("pipeline column ", pos_ + 1, ": ", message, " (in '",
                                                   std::string(text_), "')"));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<PassSpec>> ParsePipeline(std::string_view text) { return PipelineParser(text).Parse(); }

std::string PrintPipeline(const std::vector<PassSpec>& specs) {
  std::vector<std::string> parts;
  for (const PassSpec& spec : specs) {
    std::string part = spec.name;
    if (!spec.options.empty()) {
      absl::StrAppend(&part, "{", absl::StrJoin(spec.options, ",", absl::PairFormatter("=")), "}");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace pdist::passes
