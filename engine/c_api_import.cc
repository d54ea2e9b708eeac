// The C API's ONNX import: pdist_program_import_onnx, pdist-import as a library call.
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/c_api.h"
#include "engine/c_api_internal.h"
#include "import/onnx_import.h"
#include "ir/json_reader.h"
#include "ir/status.h"

namespace {

using pdist::engine::capi::Fail;
using pdist::engine::capi::ToCode;
using pdist::onnx_import::OnnxImportOptions;

absl::Status WrongType(const std::string& key, const char* expected, const nlohmann::json& value) {
  return pdist::engine::capi::WrongOptionType("import options", key, expected, value.dump());
}

absl::StatusOr<OnnxImportOptions> ParseImportOptions(const char* text) {
  OnnxImportOptions o;
  if (text == nullptr) return o;
  PDIST_ASSIGN_OR_RETURN(const nlohmann::json j, pdist::ir::ParseJson(text, "import options"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat("import options must be a JSON object, got ", j.dump()));
  for (const auto& [key, value] : j.items()) {
    if (key == "loss" || key == "logits" || key == "labels") {
      if (!value.is_string()) return WrongType(key, "a string", value);
      (key == "loss" ? o.loss : key == "logits" ? o.logits : o.labels) = value.get<std::string>();
    } else if (key == "frozen") {
      if (!value.is_array()) return WrongType(key, "a list of names or globs", value);
      for (const nlohmann::json& name : value) {
        if (!name.is_string()) return WrongType(key, "a list of names or globs", value);
        o.frozen.push_back(name.get<std::string>());
      }
    } else if (key == "input_shapes") {
      if (!value.is_object()) return WrongType(key, "an object of input name → shape", value);
      for (const auto& [input, shape] : value.items()) {
        if (!shape.is_array()) return WrongType(absl::StrCat(key, ".", input), "a list of dimensions", shape);
        for (const nlohmann::json& d : shape) {
          if (!d.is_number_integer() || d.get<int64_t>() < 0) {
            return WrongType(absl::StrCat(key, ".", input), "a list of dimensions >= 0", shape);
          }
          o.input_shapes[input].push_back(d.get<int64_t>());
        }
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("import options: unknown key \"", key,
                                                     "\" (keys: loss, logits, labels, frozen, input_shapes)"));
    }
  }
  return o;
}

}  // namespace

extern "C" {

pdist_status pdist_program_import_onnx(const char* path, const char* options, pdist_program** program) {
  if (program == nullptr) return Fail("program output pointer is NULL");
  *program = nullptr;
  if (path == nullptr) return Fail("path is NULL");
  absl::StatusOr<OnnxImportOptions> parsed = ParseImportOptions(options);
  if (!parsed.ok()) return ToCode(parsed.status());
  absl::StatusOr<pdist::onnx_import::OnnxImport> imported = pdist::onnx_import::ImportOnnxFile(path, *parsed);
  if (!imported.ok()) return ToCode(imported.status());
  *program = new pdist_program{std::move(imported->program), ""};
  return ToCode(absl::OkStatus());
}

}  // extern "C"
