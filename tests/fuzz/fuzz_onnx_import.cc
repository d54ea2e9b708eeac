// libFuzzer target: untrusted bytes through the ONNX importer (import/onnx_import.h). The first
// byte picks the loss appended (none, cross_entropy, mse). Beyond "no crash": a model that
// imports is a program the verifier accepts and model.pb can hold.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "import/onnx_import.h"
#include "ir/serialize.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  pdist::onnx_import::OnnxImportOptions options;
  const char* losses[] = {"", "cross_entropy", "mse"};
  options.loss = losses[data[0] % 3];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<pdist::onnx_import::OnnxImport> imported = pdist::onnx_import::ImportOnnxBytes(bytes, options);
  if (!imported.ok()) return 0;
  if (!pdist::ir::VerifyProgram(imported->program).ok() || !pdist::ir::SerializeProgram(imported->program).ok()) {
    std::fprintf(stderr, "fuzz_onnx_import: property violated: an imported program does not verify or serialise\n");
    std::abort();
  }
  return 0;
}
