// libFuzzer target: untrusted bytes through both program decoders (model.pb and text).
//
// Beyond "no crash", it checks the round-trip properties on whatever decodes: a parsed program
// prints back to text that parses to the same text, and a valid one serialises to bytes that
// load back to the same bytes. A violation aborts, so the fuzzer reports it like a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "google/protobuf/stubs/logging.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/verifier.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_model_loader: property violated: %s\n", what);
    std::abort();
  }
}

void CheckRoundTrips(const pdist::ir::Program& program) {
  const std::string text = pdist::ir::PrintProgram(program);
  absl::StatusOr<pdist::ir::Program> reparsed = pdist::ir::ParseProgram(text);
  Require(reparsed.ok(), "printed text parses");
  Require(pdist::ir::PrintProgram(*reparsed) == text, "print -> parse -> print is identical");
  if (!pdist::ir::VerifyProgram(program).ok()) return;
  absl::StatusOr<std::string> bytes = pdist::ir::SerializeProgram(program);
  Require(bytes.ok(), "a verified program serialises");
  absl::StatusOr<pdist::ir::Program> loaded = pdist::ir::DeserializeProgram(*bytes);
  Require(loaded.ok(), "serialised bytes load");
  Require(pdist::ir::SerializeProgram(*loaded).value() == *bytes, "serialise -> load -> serialise is identical");
  Require(pdist::ir::PrintProgram(*loaded) == text, "model.pb keeps the printed text");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Invalid UTF-8 in a string field is a parse failure we expect by the thousand: keep the log quiet.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // As a file: the checksum rejects nearly every mutation, which is the point of it.
  if (absl::StatusOr<pdist::ir::Program> p = pdist::ir::DeserializeProgram(input); p.ok()) CheckRoundTrips(*p);
  // Resealed, so that mutated protobuf reaches the reader's id, role, dtype and SSA checks.
  if (absl::StatusOr<pdist::ir::Program> p = pdist::ir::DeserializeProgram(pdist::ir::SealModelBytes(input)); p.ok()) {
    CheckRoundTrips(*p);
  }
  if (absl::StatusOr<pdist::ir::Program> p = pdist::ir::ParseProgram(input); p.ok()) CheckRoundTrips(*p);
  return 0;
}
