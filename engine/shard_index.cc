// The sharded-checkpoint index: JSON out, and JSON in through the bounded reader, checked.
#include "engine/shard_index.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint_format.h"
#include "ir/checked_math.h"
#include "ir/json_reader.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

using Json = nlohmann::json;

absl::StatusOr<ir::Shape> ReadShape(const Json& j, const std::string& where) {
  if (!j.is_array() || j.size() > 64) return absl::InvalidArgumentError(absl::StrCat(where, " must be a list of at most 64 integers"));
  ir::Shape shape;
  for (const Json& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, " must hold non-negative integers, got ", d.dump()));
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

}  // namespace

std::string EncodeShardIndex(const ShardIndex& index) {
  Json tensors = Json::object();
  for (const auto& [name, t] : index.tensors) {
    Json pieces = Json::array();
    for (const ShardPiece& p : t.pieces) {
      Json piece = {{"file", p.file}, {"offsets", p.box.offsets}, {"sizes", p.box.sizes}};
      if (p.byte_offset >= 0) piece["bytes"] = {p.byte_offset, p.byte_size};
      pieces.push_back(std::move(piece));
    }
    tensors[name] = {{"dtype", ir::DataTypeName(t.type.dtype)},
                     {"shape", t.type.shape},
                     {"dist_attr", t.dist_attr},
                     {"pieces", std::move(pieces)}};
  }
  const Json j = {{"format", "pdist-sharded-checkpoint"}, {"version", 1}, {"step", index.step},
                  {"files", index.files},                 {"tensors", std::move(tensors)}};
  return j.dump(1) + "\n";
}

namespace {

// The index is written by pdist alone: a key it does not write means another writer, a newer
// format or an edit, and is named rather than skipped.
absl::Status OnlyKeys(const Json& object, std::initializer_list<const char*> keys, const std::string& where) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();  // not a structured binding: clang 14 (the fuzz build) cannot capture one
    if (std::find_if(keys.begin(), keys.end(), [&key](const char* k) { return key == k; }) == keys.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key '", key, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardIndex> DecodeShardIndex(std::string_view text, const std::string& what) {
  absl::StatusOr<Json> parsed = ir::ParseJson(text, what);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(what, ": ", why)); };
  if (!j.is_object() || !j.contains("format") || j["format"] != "pdist-sharded-checkpoint") {
    return bad("not a pdist sharded checkpoint index");
  }
  PDIST_RETURN_IF_ERROR(OnlyKeys(j, {"format", "version", "step", "files", "tensors"}, what));
  if (!j.contains("version") || j["version"] != 1) {
    return bad(absl::StrCat("version ", j.contains("version") ? j["version"].dump() : "(none)",
                            " is not supported (this build reads 1)"));
  }
  ShardIndex index;
  if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() < 0 ||
      j["step"].get<int64_t>() > kMaxCheckpointStep) {
    return bad("'step' must be an integer in [0, 2^48]");
  }
  index.step = j["step"].get<int64_t>();
  if (!j.contains("files") || !j["files"].is_array()) return bad("'files' must be a list of file names");
  for (const Json& f : j["files"]) {
    if (!f.is_string() || f.get<std::string>().empty() || f.get<std::string>().find('/') != std::string::npos ||
        f.get<std::string>() == "..") {
      return bad(absl::StrCat("'files' must hold plain file names of this directory, got ", f.dump()));
    }
    index.files.push_back(f.get<std::string>());
  }
  if (!j.contains("tensors") || !j["tensors"].is_object()) return bad("'tensors' must be an object");
  for (const auto& [name, t] : j["tensors"].items()) {
    const std::string at = absl::StrCat("tensor '", name, "'");
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string()) return bad(at + " needs a 'dtype'");
    PDIST_RETURN_IF_ERROR(OnlyKeys(t, {"dtype", "shape", "dist_attr", "pieces"}, absl::StrCat(what, ": ", at)));
    absl::StatusOr<ir::DataType> dtype = ir::ParseDataType(t["dtype"].get<std::string>());
    if (!dtype.ok()) return bad(absl::StrCat(at, ": ", dtype.status().message()));
    absl::StatusOr<ir::Shape> shape = ReadShape(t.contains("shape") ? t["shape"] : Json(), at + " 'shape'");
    if (!shape.ok()) return bad(std::string(shape.status().message()));
    std::optional<int64_t> elements = 1;
    for (int64_t d : *shape) elements = elements ? ir::CheckedMul(*elements, d) : std::nullopt;
    if (!elements || *elements > (int64_t{1} << 40)) return bad(at + " is too large (over 2^40 elements)");
    ShardedTensor entry{{*shape, *dtype}, "", {}};
    if (t.contains("dist_attr") && t["dist_attr"].is_string()) entry.dist_attr = t["dist_attr"].get<std::string>();
    if (!t.contains("pieces") || !t["pieces"].is_array()) return bad(at + " needs 'pieces'");
    for (const Json& p : t["pieces"]) {
      if (!p.is_object() || !p.contains("file") || !p["file"].is_number_integer() || p["file"].get<int64_t>() < 0 ||
          p["file"].get<int64_t>() >= static_cast<int64_t>(index.files.size())) {
        const std::string given = p.is_object() && p.contains("file") ? p["file"].dump() : "nothing";
        return bad(absl::StrCat(at, ": a piece's 'file' must index 'files' (0 to ", index.files.size() - 1,
                                "), got ", given.size() > 40 ? given.substr(0, 40) + "..." : given));
      }
      PDIST_RETURN_IF_ERROR(OnlyKeys(p, {"file", "offsets", "sizes", "bytes"}, absl::StrCat(what, ": ", at, " piece")));
      absl::StatusOr<ir::Shape> offsets = ReadShape(p.contains("offsets") ? p["offsets"] : Json(), at + " piece 'offsets'");
      absl::StatusOr<ir::Shape> sizes = ReadShape(p.contains("sizes") ? p["sizes"] : Json(), at + " piece 'sizes'");
      if (!offsets.ok() || !sizes.ok()) return bad(std::string((offsets.ok() ? sizes : offsets).status().message()));
      if (offsets->size() != shape->size() || sizes->size() != shape->size()) return bad(at + ": a piece's rank differs from the tensor's");
      for (size_t d = 0; d < shape->size(); ++d) {
        if ((*offsets)[d] > (*shape)[d] || (*sizes)[d] > (*shape)[d] - (*offsets)[d]) {
          return bad(absl::StrCat(at, ": a piece at ", ir::ShapeToString(*offsets), " of ", ir::ShapeToString(*sizes),
                                  " lies outside ", ir::ShapeToString(*shape)));
        }
      }
      ShardPiece piece{p["file"].get<int64_t>(), {*offsets, *sizes}};
      if (p.contains("bytes")) {
        const Json& b = p["bytes"];
        constexpr int64_t kMaxFileBytes = int64_t{1} << 50;
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
            b[0].get<int64_t>() < 0 || b[1].get<int64_t>() <= 0 || b[0].get<int64_t>() > kMaxFileBytes ||
            b[1].get<int64_t>() > kMaxFileBytes) {
          return bad(absl::StrCat(at, ": a piece's 'bytes' must be [offset, size] within 2^50, got ", b.dump()));
        }
        piece.byte_offset = b[0].get<int64_t>();
        piece.byte_size = b[1].get<int64_t>();
      }
      entry.pieces.push_back(std::move(piece));
    }
    index.tensors.emplace(name, std::move(entry));
  }
  return index;
}

}  // namespace pdist::engine
