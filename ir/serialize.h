// model.pb: binary (de)serialisation of a Program (ir/proto/program.proto, docs/ir.md).
//
//   PDIST_RETURN_IF_ERROR(SaveProgram(program, "model.pb"));
//   PDIST_ASSIGN_OR_RETURN(Program p, LoadProgram("model.pb"));
//   PDIST_ASSIGN_OR_RETURN(Program q, LoadProgramAuto("model.pdir"));  // text or binary
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ir/input_file.h"  // ReadFileToString, which the loaders below use
#include "ir/program.h"

namespace pdist::ir {

// The model.pb format version this build writes and the only one it reads.
inline constexpr int kModelFormatVersion = 1;

// Serialises a verified program with canonical value ids (see ValueNumbering) and
// deterministic field order, followed by a checksum: serialise → deserialise → serialise gives
// the same bytes. An invalid program is an error (the verifier's).
absl::StatusOr<std::string> SerializeProgram(const Program& program);

// Reads bytes written by SerializeProgram. Every id, role, dtype and the version are checked
// before use and the result is verified, so garbage, truncated or corrupted input is an
// InvalidArgument error, never a crash. Attributes an op gained since the file was written
// get their defaults.
absl::StatusOr<Program> DeserializeProgram(std::string_view bytes);

// Either form, told apart by content: text starts with `program` (after blanks and `//`
// comments), model.pb never does (its first byte is the version field's tag). Text is parsed
// and verified.
absl::StatusOr<Program> DecodeProgram(std::string_view content);

// File versions of the above; errors name the path. SaveProgram writes `path.tmp` then renames,
// so a crash never leaves a half-written model.pb behind. A missing file is NotFound.
absl::Status SaveProgram(const Program& program, const std::string& path);
absl::StatusOr<Program> LoadProgram(const std::string& path);
absl::StatusOr<Program> LoadProgramAuto(const std::string& path);

// `body` (a serialised proto::Program without its checksum) followed by the `checksum` field
// that DeserializeProgram requires: the FNV-1a 64 hash of `body` as fixed64 field 15. For
// writers other than SerializeProgram (tests, fuzzers, exporters in other languages).
std::string SealModelBytes(std::string_view body);


}  // namespace pdist::ir
