// Attribute kinds, text form and typed getters.
#include "ir/attribute.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::ir {

AttrKind KindOf(const Attribute& attr) { return static_cast<AttrKind>(attr.index()); }

const char* AttrKindName(AttrKind kind) {
  static constexpr const char* kNames[] = {"bool",   "int",       "double",   "string",     "dtype",
                                                "bool[]", "int[]",     "double[]", "string[]"};
  return kNames[static_cast<int>(kind)];
}

std::string DoubleToString(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  char buf[40];
  // %.17g round-trips every double; keep a '.', 'e' or similar so it parses back as a double.
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  // Prefer the shortest form that round-trips.
  for (int precision = 1; precision <= 17; ++precision) {
    char candidate[40];
    std::snprintf(candidate, sizeof(candidate), "%.*g", precision, value);
    if (std::strtod(candidate, nullptr) == value) {
      std::snprintf(buf, sizeof(buf), "%s", candidate);
      break;
    }
  }
  std::string text = buf;
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

namespace {
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct AttrPrinter {
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(int64_t v) const { return absl::StrCat(v); }
  std::string operator()(double v) const { return DoubleToString(v); }
  std::string operator()(const std::string& v) const { return Quote(v); }
  std::string operator()(DataType v) const { return std::string(DataTypeName(v)); }
  // Empty lists carry their element kind so that they parse back to the same type.
  std::string operator()(const std::vector<bool>& v) const {
    if (v.empty()) return "bool[]";
    std::vector<std::string> parts;
    for (bool b : v) parts.push_back(b ? "true" : "false");
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  std::string operator()(const std::vector<int64_t>& v) const {
    if (v.empty()) return "int[]";
    return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
  }
  std::string operator()(const std::vector<double>& v) const {
    if (v.empty()) return "double[]";
    std::vector<std::string> parts;
    for (double d : v) parts.push_back(DoubleToString(d));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  std::string operator()(const std::vector<std::string>& v) const {
    if (v.empty()) return "string[]";
    std::vector<std::string> parts;
    for (const auto& s : v) parts.push_back(Quote(s));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
};

template <typename T>
absl::StatusOr<T> GetTyped(const AttributeMap& attrs, const std::string& name, AttrKind kind) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return absl::InvalidArgumentError(absl::StrCat("missing attribute '", name, "'"));
  if (const T* value = std::get_if<T>(&it->second)) return *value;
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is ", AttrKindName(KindOf(it->second)),
                                                 ", expected ", AttrKindName(kind)));
}
}  // namespace

std::string AttributeToString(const Attribute& attr) { return std::visit(AttrPrinter{}, attr); }

absl::StatusOr<int64_t> GetInt(const AttributeMap& attrs, const std::string& name) {
  return GetTyped<int64_t>(attrs, name, AttrKind::kInt);
}
absl::StatusOr<double> GetDouble(const AttributeMap& attrs, const std::string& name) {
  return GetTyped<double>(attrs, name, AttrKind::kDouble);
}
absl::StatusOr<bool> GetBool(const AttributeMap& attrs, const std::string& name) {
  return GetTyped<bool>(attrs, name, AttrKind::kBool);
}
absl::StatusOr<std::string> GetString(const AttributeMap& attrs, const std::string& name) {
  return GetTyped<std::string>(attrs, name, AttrKind::kString);
}
absl::StatusOr<DataType> GetDataType(const AttributeMap& attrs, const std::string& name) {
  return GetTyped<DataType>(attrs, name, AttrKind::kDataType);
}
absl::StatusOr<std::vector<int64_t>> GetIntList(const AttributeMap& attrs, const std::string& name) {
  return GetTyped<std::vector<int64_t>>(attrs, name, AttrKind::kIntList);
}

}  // namespace pdist::ir
