// The C API's program handle: load, shard_tensor, save and print an ir::Program.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/c_api.h"
#include "engine/c_api_internal.h"
#include "engine/model_program.h"
#include "ir/dist/shard_tensor.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/status.h"

namespace {

using pdist::engine::capi::Fail;
using pdist::engine::capi::ToCode;

// A block argument by name, or any value by its printed number ("%12").
absl::StatusOr<pdist::ir::Value*> FindTensor(const pdist::ir::Program& program, const std::string& name) {
  if (pdist::ir::Value* v = program.FindArgument(name)) return v;
  int64_t number = -1;
  if (name.size() > 1 && name[0] == '%' && absl::SimpleAtoi(name.substr(1), &number)) {
    const pdist::ir::ValueNumbering numbering(program);
    for (pdist::ir::Value* arg : program.block().arguments()) {
      if (numbering.Number(arg) == number) return arg;
    }
    for (const auto& op : program.block().ops()) {
      for (pdist::ir::Value* r : op->results()) {
        if (numbering.Number(r) == number) return r;
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("tensor '", name, "' is neither a block argument nor a printed value (%N)"));
}

absl::StatusOr<pdist::ir::ProcessMesh> MakeMesh(const int64_t* shape, int ndim, const char* const* dim_names) {
  if (ndim < 1 || shape == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("mesh_shape is NULL or mesh_ndim (", ndim, ") is < 1"));
  }
  std::vector<int64_t> dims(shape, shape + ndim);
  std::vector<std::string> names;
  for (int i = 0; dim_names != nullptr && i < ndim; ++i) {
    if (dim_names[i] == nullptr) return absl::InvalidArgumentError(absl::StrCat("dim_names[", i, "] is NULL"));
    names.push_back(dim_names[i]);
  }
  return pdist::ir::ProcessMesh::Create(std::move(dims), /*process_ids=*/{}, std::move(names));  // ids 0..n-1
}

}  // namespace

extern "C" {

pdist_status pdist_program_load(const char* path, pdist_program** program) {
  if (program == nullptr) return Fail("program output pointer is NULL");
  *program = nullptr;
  if (path == nullptr) return Fail("path is NULL");
  absl::StatusOr<pdist::ir::Program> loaded = pdist::ir::LoadProgramAuto(path);
  if (!loaded.ok()) return ToCode(loaded.status());
  *program = new pdist_program{*std::move(loaded), ""};
  return ToCode(absl::OkStatus());
}

pdist_status pdist_program_build(const char* model, const char* options, pdist_program** program) {
  if (program == nullptr) return Fail("program output pointer is NULL");
  *program = nullptr;
  if (model == nullptr) return Fail("model is NULL");
  pdist::ir::models::ModelOptions parsed{.model = model};
  if (options != nullptr) {
    if (absl::Status s = pdist::ir::models::SetModelOptions(parsed, options); !s.ok()) return ToCode(s);
  }
  absl::StatusOr<pdist::ir::Program> built = pdist::engine::BuildModelProgram(parsed);
  if (!built.ok()) return ToCode(pdist::WithContext(built.status(), absl::StrCat("model '", model, "'")));
  *program = new pdist_program{*std::move(built), ""};
  return ToCode(absl::OkStatus());
}

pdist_status pdist_program_shard_tensor(pdist_program* program, const char* tensor_name, const int64_t* mesh_shape,
                                        int mesh_ndim, const char* const* dim_names, const char* placements) {
  if (program == nullptr || tensor_name == nullptr || placements == nullptr) {
    return Fail("program, tensor_name or placements is NULL");
  }
  absl::StatusOr<pdist::ir::Value*> value = FindTensor(program->program, tensor_name);
  if (!value.ok()) return ToCode(value.status());
  absl::StatusOr<pdist::ir::ProcessMesh> mesh = MakeMesh(mesh_shape, mesh_ndim, dim_names);
  if (!mesh.ok()) return ToCode(pdist::WithContext(mesh.status(), absl::StrCat("shard_tensor('", tensor_name, "')")));
  absl::StatusOr<std::vector<pdist::ir::Placement>> parsed = pdist::ir::ParsePlacements(placements);
  if (!parsed.ok()) return ToCode(pdist::WithContext(parsed.status(), absl::StrCat("shard_tensor('", tensor_name, "')")));
  return ToCode(pdist::ir::ShardTensor(*value, *mesh, *parsed));
}

pdist_status pdist_program_save(const pdist_program* program, const char* path) {
  if (program == nullptr || path == nullptr) return Fail("program or path is NULL");
  return ToCode(pdist::ir::SaveProgram(program->program, path));
}

const char* pdist_program_print(pdist_program* program) {
  if (program == nullptr) {
    Fail("program is NULL");
    return nullptr;
  }
  program->printed = pdist::ir::PrintProgram(program->program);
  ToCode(absl::OkStatus());
  return program->printed.c_str();
}

void pdist_program_destroy(pdist_program* program) { delete program; }

}  // extern "C"
