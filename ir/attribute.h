// Attribute: the compile-time constants an operation carries (Paddle's op attributes).
//
//   {axis = -1, keep_dim = false, epsilon = 1.0e-05, perm = [0,2,1,3], dtype = f32}
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"

namespace pdist::ir {

using Attribute = std::variant<bool, int64_t, double, std::string, DataType, std::vector<bool>,
                               std::vector<int64_t>, std::vector<double>, std::vector<std::string>>;

// Ordered by name so that printing and serialisation are deterministic.
using AttributeMap = std::map<std::string, Attribute>;

enum class AttrKind : int8_t {
  kBool, kInt, kDouble, kString, kDataType, kBoolList, kIntList, kDoubleList, kStringList
};

AttrKind KindOf(const Attribute& attr);
const char* AttrKindName(AttrKind kind);

// Text form used by the printer; ParseAttribute reads it back exactly.
std::string AttributeToString(const Attribute& attr);
// Doubles print with enough digits to round-trip bit-exactly.
std::string DoubleToString(double value);

// Typed access with a clear error when the attribute is missing or of another kind.
absl::StatusOr<int64_t> GetInt(const AttributeMap& attrs, const std::string& name);
absl::StatusOr<double> GetDouble(const AttributeMap& attrs, const std::string& name);
absl::StatusOr<bool> GetBool(const AttributeMap& attrs, const std::string& name);
absl::StatusOr<std::string> GetString(const AttributeMap& attrs, const std::string& name);
absl::StatusOr<DataType> GetDataType(const AttributeMap& attrs, const std::string& name);
absl::StatusOr<std::vector<int64_t>> GetIntList(const AttributeMap& attrs, const std::string& name);

}  // namespace pdist::ir
