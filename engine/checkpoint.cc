// Checkpoint files: durable writes (ir::WriteFileAtomically) of the format in engine/checkpoint_format.h, tensors in and out.
#include "engine/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint_format.h"
#include "engine/sharded_checkpoint.h"
#include "ir/input_file.h"
#include "ir/output_file.h"
#include "ir/status.h"

namespace pdist::engine {

absl::Status SaveCheckpoint(const Checkpoint& checkpoint, const std::string& path, ir::Replace what) {
  std::vector<CheckpointRecord> records;
  for (const auto& [name, t] : checkpoint.tensors) {
    records.push_back({name, t.type(), std::string_view(static_cast<const char*>(t.raw()),
                                                        static_cast<size_t>(t.num_bytes()))});
  }
  PDIST_ASSIGN_OR_RETURN(std::string out, EncodeCheckpoint(checkpoint.step, records));
  return ir::WriteFileAtomically(path, out, what);
}

absl::Status UnknownCheckpointTensor(const std::string& source, const std::string& name, const ir::Program& program) {
  // The states the optimizer pass names after their parameter (passes/optimizer.cc): momentum's
  // velocity, AdamW's moments and beta powers. A master weight ("w.master") is amp's, kept by
  // every optimizer: not this hint's.
  std::string owner;
  for (const char* state : {".velocity", ".moment1", ".moment2", ".beta1_pow", ".beta2_pow"}) {
    const std::string suffix = state;
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      const std::string param = name.substr(0, name.size() - suffix.size());
      const ir::Value* v = program.FindArgument(param);
      if (v != nullptr && v->role() == ir::ValueRole::kParameter) owner = param;
    }
  }
  std::string hint;
  if (!owner.empty()) {
    hint = absl::StrCat(": a state of parameter '", owner,
                        "' this run's optimizer does not keep (saved with another --optimizer?)");
  } else if (name.ends_with(".master") && program.FindArgument(name.substr(0, name.size() - 7)) != nullptr) {
    hint = absl::StrCat(": the f32 master weight amp o2 keeps for '", name.substr(0, name.size() - 7),
                        "' (saved under amp o2: resume with the same amp settings)");
  } else if (name.starts_with("amp.")) {
    hint = ": float16 loss scaling's state (saved under amp float16: resume with the same amp settings)";
  }
  return absl::InvalidArgumentError(absl::StrCat(source, " has tensor '", name, "' that the model does not have", hint));
}

absl::Status CheckpointTypeMismatch(const std::string& source, const std::string& name, const ir::TensorType& saved,
                                    const ir::TensorType& model) {
  const bool dtype_only = saved.shape == model.shape && saved.dtype != model.dtype;
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": tensor '", name, "' is ", saved.ToString(), ", the model has ", model.ToString(),
                   dtype_only ? " (saved under another amp level or model dtype? resume with the same ones)" : ""));
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  if (IsShardedCheckpoint(path)) return ReadShardedWhole(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' is a directory without ", kShardIndexFile,
                                                   ": not a complete sharded checkpoint (a save that did not finish?)"));
  }
  absl::StatusOr<std::string> read = ir::ReadFileToString(path, std::numeric_limits<int64_t>::max());
  if (!read.ok()) return WithContext(read.status(), "checkpoint");
  PDIST_ASSIGN_OR_RETURN(CheckpointContents contents, DecodeCheckpoint(*read, path));
  Checkpoint ckpt;
  ckpt.step = contents.step;
  for (CheckpointRecord& record : contents.records) {
    exec::Tensor t = exec::Tensor::Empty(record.type);
    std::memcpy(t.raw(), record.bytes.data(), record.bytes.size());
    ckpt.tensors.emplace(std::move(record.name), std::move(t));
  }
  return ckpt;
}

}  // namespace pdist::engine
