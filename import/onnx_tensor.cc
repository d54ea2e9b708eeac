// Reading ONNX TensorProtos: the numbers are in raw_data (little-endian, what exporters write) or
// in the typed repeated fields (float_data, int64_data, ...; int32_data also carries bool, f16 and
// bf16 as 32-bit integers).
#include "import/onnx_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "onnx/onnx_pb.h"

namespace pdist::onnx_import {

namespace {

template <typename T>
T Load(const std::string& bytes, int64_t i) {
  T x;
  std::memcpy(&x, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return x;
}

template <typename T>
void Store(std::string& bytes, int64_t i, T x) {
  std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(T)), &x, sizeof(T));
}

// How many numbers the typed field that holds `dtype` has.
int64_t TypedFieldSize(const onnx::TensorProto& p, ir::DataType dtype) {
  switch (dtype) {
    case ir::DataType::kFloat32: return p.float_data_size();
    case ir::DataType::kFloat64: return p.double_data_size();
    case ir::DataType::kInt64: return p.int64_data_size();
    default: return p.int32_data_size();  // i32, bool, f16, bf16
  }
}

// The typed field's numbers, written as `dtype` bytes; the count is checked before anything is
// allocated (a shape of 10^12 elements with no numbers must not allocate them).
absl::StatusOr<std::string> TypedFieldBytes(const onnx::TensorProto& p, ir::DataType dtype, int64_t n) {
  if (TypedFieldSize(p, dtype) != n) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", p.name(), "' has ", TypedFieldSize(p, dtype),
                                                   " numbers for a shape of ", n, " elements"));
  }
  std::string bytes(static_cast<size_t>(n * ir::DataTypeSize(dtype)), '\0');
  const int count = static_cast<int>(n);
  switch (dtype) {
    case ir::DataType::kFloat32:
      for (int i = 0; i < count; ++i) Store<float>(bytes, i, p.float_data(i));
      break;
    case ir::DataType::kFloat64:
      for (int i = 0; i < count; ++i) Store<double>(bytes, i, p.double_data(i));
      break;
    case ir::DataType::kInt64:
      for (int i = 0; i < count; ++i) Store<int64_t>(bytes, i, p.int64_data(i));
      break;
    case ir::DataType::kInt32:
      for (int i = 0; i < count; ++i) Store<int32_t>(bytes, i, p.int32_data(i));
      break;
    case ir::DataType::kBool:
      for (int i = 0; i < count; ++i) Store<bool>(bytes, i, p.int32_data(i) != 0);
      break;
    case ir::DataType::kFloat16:
    case ir::DataType::kBFloat16:  // the 16 bits of each number in an int32
      for (int i = 0; i < count; ++i) Store<uint16_t>(bytes, i, static_cast<uint16_t>(p.int32_data(i)));
      break;
  }
  return bytes;
}

}  // namespace

absl::StatusOr<ir::DataType> DataTypeOfOnnx(int32_t onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return ir::DataType::kFloat32;
    case onnx::TensorProto::DOUBLE: return ir::DataType::kFloat64;
    case onnx::TensorProto::FLOAT16: return ir::DataType::kFloat16;
    case onnx::TensorProto::BFLOAT16: return ir::DataType::kBFloat16;
    case onnx::TensorProto::INT32: return ir::DataType::kInt32;
    case onnx::TensorProto::INT64: return ir::DataType::kInt64;
    case onnx::TensorProto::BOOL: return ir::DataType::kBool;
    default: break;
  }
  const std::string name = onnx::TensorProto::DataType_IsValid(onnx_type)
                               ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(onnx_type))
                               : absl::StrCat("code ", onnx_type);
  return absl::UnimplementedError(absl::StrCat(
      "ONNX element type ", name, " has no pdist dtype (pdist has FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, INT64, BOOL)"));
}

absl::StatusOr<OnnxTensor> ReadOnnxTensor(const onnx::TensorProto& p) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat("tensor '", p.name(),
                                                 "' keeps its numbers in an external file; save the model with "
                                                 "onnx.save(model, path, save_as_external_data=False)"));
  }
  PDIST_ASSIGN_OR_RETURN(ir::DataType dtype, DataTypeOfOnnx(p.data_type()));
  ir::TensorType type{ir::Shape(p.dims().begin(), p.dims().end()), dtype};
  absl::Status valid = ir::CheckTensorType(type);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("tensor '", p.name(), "': ", valid.message()));
  const int64_t n = type.num_elements();
  std::string bytes;
  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != type.num_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", p.name(), "' (", type.ToString(), ") has ",
                                                     p.raw_data().size(), " bytes of raw_data, expected ", type.num_bytes()));
    }
    bytes = p.raw_data();
  } else {
    PDIST_ASSIGN_OR_RETURN(bytes, TypedFieldBytes(p, dtype, n));
  }
  return OnnxTensor{std::move(type), std::make_shared<const ir::StoredNumbers>(ir::StoredNumbers{dtype, std::move(bytes)})};
}

double OnnxTensor::At(int64_t i) const {
  const std::string& b = numbers->bytes;
  switch (type.dtype) {
    case ir::DataType::kFloat32: return Load<float>(b, i);
    case ir::DataType::kFloat64: return Load<double>(b, i);
    case ir::DataType::kInt32: return Load<int32_t>(b, i);
    case ir::DataType::kInt64: return static_cast<double>(Load<int64_t>(b, i));
    case ir::DataType::kBool: return Load<bool>(b, i) ? 1.0 : 0.0;
    case ir::DataType::kBFloat16: {
      const uint32_t bits = static_cast<uint32_t>(Load<uint16_t>(b, i)) << 16;  // bf16: f32's upper half
      float x;
      std::memcpy(&x, &bits, sizeof(x));
      return x;
    }
    case ir::DataType::kFloat16: {
      const uint16_t h = Load<uint16_t>(b, i);
      const int exponent = (h >> 10) & 0x1f;
      const int mantissa = h & 0x3ff;
      const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
      if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // zero and subnormals
      if (exponent == 31) return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                                               : std::numeric_limits<double>::quiet_NaN();
      return sign * std::ldexp(mantissa + 1024, exponent - 25);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

absl::StatusOr<std::vector<int64_t>> OnnxTensor::Ints() const {
  if (type.dtype != ir::DataType::kInt64 && type.dtype != ir::DataType::kInt32) {
    return absl::InvalidArgumentError(absl::StrCat("expected an integer tensor, got ", type.ToString()));
  }
  std::vector<int64_t> out(static_cast<size_t>(num_elements()));
  for (int64_t i = 0; i < num_elements(); ++i) {
    out[static_cast<size_t>(i)] = type.dtype == ir::DataType::kInt64 ? Load<int64_t>(numbers->bytes, i)
                                                                    : Load<int32_t>(numbers->bytes, i);
  }
  return out;
}

OnnxTensor MakeOnnxTensor(ir::TensorType type, const std::vector<double>& values) {
  std::string bytes(static_cast<size_t>(type.num_bytes()), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    switch (type.dtype) {
      case ir::DataType::kFloat32: Store<float>(bytes, at, static_cast<float>(values[i])); break;
      case ir::DataType::kFloat64: Store<double>(bytes, at, values[i]); break;
      case ir::DataType::kInt32: Store<int32_t>(bytes, at, static_cast<int32_t>(values[i])); break;
      case ir::DataType::kInt64: Store<int64_t>(bytes, at, static_cast<int64_t>(values[i])); break;
      case ir::DataType::kBool: Store<bool>(bytes, at, values[i] != 0); break;
      case ir::DataType::kFloat16:
      case ir::DataType::kBFloat16: break;  // never folded (At)
    }
  }
  const ir::DataType dtype = type.dtype;
  return OnnxTensor{std::move(type), std::make_shared<const ir::StoredNumbers>(ir::StoredNumbers{dtype, std::move(bytes)})};
}

}  // namespace pdist::onnx_import
