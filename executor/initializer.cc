// InitializeWorkspace: parameters and optimizer states from their `init` strings.
//
// Grammar: ir/init_spec.h (checked by the verifier too). cast_of(NAME) draws parameter NAME's
// values, as its dtype holds them, in this value's dtype (an f32 master weight of a bf16
// parameter: Paddle and Megatron alike start the master from the low-precision parameter).
// Element i of value "name" depends only on (seed, name, i), so a shard of a parameter can be
// initialised by evaluating the same indices on any rank — a master weight's shard too, without
// the parameter's tensor (ZeRO shards the master where the parameter is whole).
#include <unistd.h>

#include <cmath>
#include <charconv>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "executor/cpu/cpu_common.h"
#include "executor/dtype_dispatch.h"
#include "executor/executor.h"
#include "executor/random.h"
#include "ir/dist/local_slice.h"
#include "ir/init_spec.h"
#include "ir/status.h"

namespace pdist::exec {

namespace {

// A value's parsed init (ir/init_spec.h) with its cast_of source resolved.
struct InitSpec {
  ir::InitSpec parsed;
  const ir::Value* source = nullptr;  // cast_of(NAME): draw NAME's numbers, rounded to its dtype
};

absl::StatusOr<InitSpec> ParseInit(const ir::Program& program, const std::string& init, const std::string& name) {
  absl::StatusOr<ir::InitSpec> parsed = ir::ParseInitSpec(init);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("value '", name, "' has ", parsed.status().message()));
  }
  InitSpec spec{*parsed};
  if (spec.parsed.kind == ir::InitSpec::Kind::kStored) {
    const ir::Value* v = program.FindArgument(name);
    if (v == nullptr || v->stored() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("value '", name, "' has init \"stored\" but the program carries no numbers for it"));
    }
  }
  if (spec.parsed.kind == ir::InitSpec::Kind::kCastOf) {
    const std::string of = spec.parsed.of;  // a copy: spec is assigned below
    const ir::Value* source = program.FindArgument(of);
    if (source == nullptr || !source->is_persistent() || source->init().starts_with("cast_of(")) {
      return absl::InvalidArgumentError(absl::StrCat("value '", name, "' has initialiser '", init, "' but '", of,
                                                     "' is not a parameter or state of the program with its own initialiser"));
    }
    PDIST_ASSIGN_OR_RETURN(spec, ParseInit(program, source->init(), of));
    spec.source = source;
  }
  return spec;
}

// Element `flat` of a value's stored numbers, as a double.
double StoredAt(const ir::Value& v, int64_t flat) {
  double x = 0;
  PDIST_DISPATCH_ALL(v.stored()->dtype, S, {
    S element;
    std::memcpy(&element, v.stored()->bytes.data() + flat * static_cast<int64_t>(sizeof(S)), sizeof(S));
    x = static_cast<double>(element);
  });
  return x;
}

// Fills `t` (the piece of a global tensor at `slice`) with the values the whole tensor has at
// the same global positions.
absl::Status FillPiece(const ir::Value& v, const InitSpec& spec, uint64_t seed, const ir::Shape& global,
                       const ir::LocalSlice& slice, Tensor& t) {
  const ir::Value& drawn = spec.source != nullptr ? *spec.source : v;
  const uint64_t key = StreamKey(seed, HashName(drawn.name()));
  // The value the source's dtype holds for x (x itself without a source).
  auto as_drawn = [&](double x) {
    double held = x;
    PDIST_DISPATCH_ALL(drawn.type().dtype, S, { held = static_cast<double>(static_cast<S>(x)); });
    return held;
  };
  const auto rank = static_cast<int64_t>(global.size());
  std::vector<int64_t> stride(global.size(), 1);  // the global tensor's
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * global[d + 1];
  using Kind = ir::InitSpec::Kind;
  const Kind kind = spec.parsed.kind;  // not kCastOf: ParseInit resolved it to its source's kind
  const int64_t n = t.num_elements();
  // Every element is a function of its global position alone, so the piece is filled on all
  // cores (a 1.3B-parameter model's weights take a minute on one) with the same values.
  PDIST_DISPATCH_ALL(t.dtype(), T, {
    T* out = t.data<T>();
    cpu::ParallelFor(n, 1 << 16, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> index(global.size(), 0);  // begin's local multi-index, then walked
      for (int64_t d = rank - 1, rest = begin; d >= 0; --d) {
        index[d] = rest % slice.sizes[d];
        rest /= slice.sizes[d];
      }
      for (int64_t i = begin; i < end; ++i) {
        int64_t flat = 0;
        for (int64_t d = 0; d < rank; ++d) flat += (slice.offsets[d] + index[d]) * stride[d];
        double x = spec.parsed.arg;
        if (kind == Kind::kNormal) x = spec.parsed.arg * NormalAt(key, static_cast<uint64_t>(flat));
        if (kind == Kind::kUniform) x = spec.parsed.arg * (2.0 * UniformAt(key, static_cast<uint64_t>(flat)) - 1.0);
        if (kind == Kind::kStored) x = StoredAt(drawn, flat);
        out[i] = static_cast<T>(as_drawn(x));
        for (int64_t d = rank - 1; d >= 0 && ++index[d] == slice.sizes[d]; --d) index[d] = 0;
      }
    });
  });
  return absl::OkStatus();
}

// The machine's physical memory, in bytes.
int64_t PhysicalMemoryBytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Refuses, before allocating anything, a program whose parameters and optimizer states alone do
// not fit in this machine's memory: a typo in a shape (f32[1000000,1000000]) must be an error
// naming the largest tensor, not an allocation failure that kills the process.
absl::Status CheckPersistentBytesFit(const ir::Program& program, const Workspace& workspace) {
  const ir::Value* largest = nullptr;
  double total = 0;
  for (const ir::Value* v : program.block().arguments()) {
    if (!v->is_persistent() || workspace.count(v->name())) continue;
    total += static_cast<double>(v->type().num_bytes());
    if (largest == nullptr || v->type().num_bytes() > largest->type().num_bytes()) largest = v;
  }
  const double available = static_cast<double>(PhysicalMemoryBytes());
  if (total <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the parameters and optimizer states need %.4g GiB, more than this machine's %.4g GiB of memory (the largest: "
      "'%s' %s, %.4g GiB)",
      total / (1 << 30), available / (1 << 30), largest->name(), largest->type().ToString(),
      static_cast<double>(largest->type().num_bytes()) / (1 << 30)));
}

absl::Status Initialize(const ir::Program& program, uint64_t seed, int64_t rank, Workspace& workspace) {
  PDIST_RETURN_IF_ERROR(CheckPersistentBytesFit(program, workspace));
  for (const ir::Value* v : program.block().arguments()) {
    if (!v->is_persistent() || workspace.count(v->name())) continue;
    PDIST_ASSIGN_OR_RETURN(InitSpec spec, ParseInit(program, v->init(), v->name()));
    Tensor t = Tensor::Empty(v->type());
    ir::Shape global = v->type().shape;
    ir::LocalSlice slice{ir::Shape(global.size(), 0), global};
    if (rank >= 0 && v->dist_attr()) {
      global = ir::GlobalShapeOf(*v->dist_attr(), v->type().shape);
      PDIST_ASSIGN_OR_RETURN(slice, ir::SliceOf(*v->dist_attr(), global, rank));
    }
    PDIST_RETURN_IF_ERROR(FillPiece(*v, spec, seed, global, slice, t));
    workspace.emplace(v->name(), std::move(t));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InitializeWorkspace(const ir::Program& program, uint64_t seed, Workspace& workspace) {
  return Initialize(program, seed, /*rank=*/-1, workspace);
}

absl::Status InitializeLocalWorkspace(const ir::Program& local, uint64_t seed, int64_t rank, Workspace& workspace) {
  return Initialize(local, seed, rank, workspace);
}

}  // namespace pdist::exec
