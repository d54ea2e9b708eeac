// model.pb (de)serialisation: Program ⇄ proto::Program with validation, checksum, file I/O.
#include "ir/serialize.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "ir/checksum.h"
#include "ir/legacy_types.h"
#include "ir/op_def.h"
#include "ir/output_file.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "program.pb.h"  // generated from ir/proto/program.proto into the build root

namespace pdist::ir {

namespace {

static_assert(static_cast<int>(DataType::kBool) == proto::BOOL, "proto and ir data type codes must agree");
static_assert(static_cast<int>(ValueRole::kGradient) == proto::GRADIENT, "proto and ir role codes must agree");

// Tag of `fixed64 checksum = 15`: (15 << 3) | wire type 1; followed by 8 little-endian bytes.
constexpr unsigned char kChecksumTag = (15 << 3) | 1;
constexpr size_t kChecksumSize = 9;



absl::Status Corrupt(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("invalid model.pb: ", message));
}

// ---- Program → proto ------------------------------------------------------------------------

void AttributeToProto(const std::string& name, const Attribute& attr, proto::Attribute* out) {
  out->set_name(name);
  std::visit(
      [out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) out->set_b(v);
        else if constexpr (std::is_same_v<T, int64_t>) out->set_i(v);
        else if constexpr (std::is_same_v<T, double>) out->set_d(v);
        else if constexpr (std::is_same_v<T, std::string>) out->set_s(v);
        else if constexpr (std::is_same_v<T, DataType>) out->set_dtype(static_cast<proto::DataType>(v));
        else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          auto* list = out->mutable_bools();
          for (bool b : v) list->add_values(b);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out->mutable_ints()->mutable_values()->Add(v.begin(), v.end());
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          out->mutable_doubles()->mutable_values()->Add(v.begin(), v.end());
        } else {
          for (const std::string& s : v) out->mutable_strings()->add_values(s);
        }
      },
      attr);
}

void ValueToProto(const Value& v, int64_t id, proto::Value* out) {
  out->set_id(id);
  out->mutable_type()->mutable_shape()->Add(v.type().shape.begin(), v.type().shape.end());
  out->mutable_type()->set_dtype(static_cast<proto::DataType>(v.type().dtype));
  out->set_role(static_cast<proto::ValueRole>(v.role()));
  out->set_name(v.name());
  out->set_init(v.init());
  if (v.stored() != nullptr) {
    out->set_stored(v.stored()->bytes);
    out->set_stored_dtype(static_cast<proto::DataType>(v.stored()->dtype));
  }
  out->set_trainable(v.trainable());
  if (const std::optional<DistAttr>& dist = v.dist_attr()) {
    proto::DistAttr* d = out->mutable_dist_attr();
    proto::ProcessMesh* mesh = d->mutable_mesh();
    mesh->mutable_shape()->Add(dist->mesh.shape().begin(), dist->mesh.shape().end());
    mesh->mutable_process_ids()->Add(dist->mesh.process_ids().begin(), dist->mesh.process_ids().end());
    for (const std::string& name : dist->mesh.dim_names()) mesh->add_dim_names(name);
    d->mutable_dims_mapping()->Add(dist->dims_mapping.begin(), dist->dims_mapping.end());
    for (const auto& [dim, reduce] : dist->partial) {  // a std::map: ascending, so deterministic
      d->add_partial_dims(dim);
      d->add_partial_reduce(ReduceTypeName(reduce));
    }
    d->set_annotated(v.dist_annotated());
  }
}

proto::Program ProgramToProto(const Program& program) {
  const ValueNumbering n(program);
  proto::Program out;
  out.set_version(kModelFormatVersion);
  for (const Value* v : program.block().arguments()) {
    ValueToProto(*v, n.Number(v), out.add_values());
    out.add_arguments(n.Number(v));
  }
  for (const auto& op : program.block().ops()) {
    proto::Operation* p = out.add_ops();
    p->set_type(op->type());
    for (const Value* v : op->operands()) p->add_operands(v ? n.Number(v) : -1);
    for (const Value* r : op->results()) {
      ValueToProto(*r, n.Number(r), out.add_values());
      p->add_results(n.Number(r));
    }
    for (const auto& [name, attr] : op->attrs()) AttributeToProto(name, attr, p->add_attrs());
    p->set_role(static_cast<int32_t>(op->role()));
    p->set_chunk(op->chunk());
  }
  out.set_loss(program.loss() ? n.Number(program.loss()) : -1);
  if (program.local_rank() >= 0) out.set_local_rank(program.local_rank());
  for (const ProgramOutput& o : program.outputs()) {
    proto::Output* p = out.add_outputs();
    p->set_name(o.name);
    p->set_value(n.Number(o.value));
  }
  for (const StateUpdate& u : program.updates()) {
    proto::StateUpdate* p = out.add_updates();
    p->set_state(n.Number(u.state));
    p->set_new_value(n.Number(u.new_value));
  }
  for (const StateUpdate& g : program.gradients()) {
    proto::StateUpdate* p = out.add_gradients();
    p->set_state(n.Number(g.state));
    p->set_new_value(n.Number(g.new_value));
  }
  return out;
}

// ---- proto → Program ------------------------------------------------------------------------

// Mesh and partial dims are checked here; the mapping against the shape is VerifyProgram's.
absl::StatusOr<DistAttr> DistAttrFromProto(const proto::DistAttr& d) {
  const proto::ProcessMesh& m = d.mesh();
  absl::StatusOr<ProcessMesh> mesh =
      ProcessMesh::Create({m.shape().begin(), m.shape().end()}, {m.process_ids().begin(), m.process_ids().end()},
                          {m.dim_names().begin(), m.dim_names().end()});
  if (!mesh.ok()) return mesh.status();
  DistAttr attr{*std::move(mesh), {d.dims_mapping().begin(), d.dims_mapping().end()}, {}};
  if (d.partial_dims_size() != d.partial_reduce_size()) {
    return absl::InvalidArgumentError(absl::StrCat(d.partial_dims_size(), " partial dims but ",
                                                   d.partial_reduce_size(), " reduce types"));
  }
  for (int i = 0; i < d.partial_dims_size(); ++i) {
    PDIST_ASSIGN_OR_RETURN(ReduceType reduce, ParseReduceType(d.partial_reduce(i)));
    if (!attr.partial.emplace(d.partial_dims(i), reduce).second) {
      return absl::InvalidArgumentError(absl::StrCat("partial mesh dim ", d.partial_dims(i), " appears twice"));
    }
  }
  return attr;
}

absl::StatusOr<Attribute> AttributeFromProto(const proto::Attribute& a) {
  switch (a.value_case()) {
    case proto::Attribute::kB: return a.b();
    case proto::Attribute::kI: return a.i();
    case proto::Attribute::kD: return a.d();
    case proto::Attribute::kS: return a.s();
    case proto::Attribute::kDtype:
      if (!proto::DataType_IsValid(a.dtype())) return Corrupt(absl::StrCat("attribute '", a.name(), "' has dtype code ", a.dtype()));
      return static_cast<DataType>(a.dtype());
    case proto::Attribute::kBools: return std::vector<bool>(a.bools().values().begin(), a.bools().values().end());
    case proto::Attribute::kInts: return std::vector<int64_t>(a.ints().values().begin(), a.ints().values().end());
    case proto::Attribute::kDoubles:
      return std::vector<double>(a.doubles().values().begin(), a.doubles().values().end());
    case proto::Attribute::kStrings:
      return std::vector<std::string>(a.strings().values().begin(), a.strings().values().end());
    case proto::Attribute::VALUE_NOT_SET: break;
  }
  return Corrupt(absl::StrCat("attribute '", a.name(), "' has no value"));
}

// Builds the program, checking every index before it is dereferenced; VerifyProgram then
// checks the semantics.
class ProtoReader {
 public:
  explicit ProtoReader(const proto::Program& p) : p_(p) {}

  absl::StatusOr<Program> Read();

 private:
  absl::StatusOr<Value*> Ref(int64_t id, absl::string_view where) const {
    if (id < 0 || id >= program_.num_values()) return Corrupt(absl::StrCat(where, " refers to value id ", id, ", out of range"));
    return program_.FindValue(id);
  }
  absl::StatusOr<Value*> Define(int64_t id, absl::string_view where) {
    PDIST_ASSIGN_OR_RETURN(Value* v, Ref(id, where));
    if (!defined_.insert(v).second) return Corrupt(absl::StrCat(where, " defines value id ", id, " a second time"));
    return v;
  }
  absl::Status ReadValues();
  absl::Status ReadOp(int index, const proto::Operation& p);
  absl::Status ReadBindings();

  const proto::Program& p_;
  Program program_;
  absl::flat_hash_set<const Value*> defined_;
};

absl::Status ProtoReader::ReadValues() {
  for (int i = 0; i < p_.values_size(); ++i) {
    const proto::Value& pv = p_.values(i);
    if (pv.id() != i) return Corrupt(absl::StrCat("values[", i, "] has id ", pv.id(), "; ids must be dense"));
    if (!proto::DataType_IsValid(pv.type().dtype())) return Corrupt(absl::StrCat("value ", i, " has dtype code ", pv.type().dtype()));
    if (!proto::ValueRole_IsValid(pv.role())) return Corrupt(absl::StrCat("value ", i, " has role code ", pv.role()));
    TensorType type{Shape(pv.type().shape().begin(), pv.type().shape().end()), static_cast<DataType>(pv.type().dtype())};
    absl::Status valid = CheckTensorType(type);
    if (!valid.ok()) return Corrupt(absl::StrCat("value ", i, ": ", valid.message()));
    Value* v = program_.NewValue(std::move(type), static_cast<ValueRole>(pv.role()));
    v->set_name(pv.name());
    v->set_init(pv.init());
    if (!pv.stored().empty()) {
      if (!proto::DataType_IsValid(pv.stored_dtype())) {
        return Corrupt(absl::StrCat("value ", i, " has stored dtype code ", pv.stored_dtype()));
      }
      v->set_stored(std::make_shared<const StoredNumbers>(
          StoredNumbers{static_cast<DataType>(pv.stored_dtype()), pv.stored()}));
    }
    v->set_trainable(pv.trainable());
    if (pv.has_dist_attr()) {
      absl::StatusOr<DistAttr> dist = DistAttrFromProto(pv.dist_attr());
      if (!dist.ok()) return Corrupt(absl::StrCat("value ", i, ": dist_attr: ", dist.status().message()));
      v->set_dist_attr(*std::move(dist));
      v->set_dist_annotated(pv.dist_attr().annotated());
    }
  }
  return absl::OkStatus();
}

absl::Status ProtoReader::ReadOp(int index, const proto::Operation& p) {
  const std::string where = absl::StrCat("op ", index, " (", p.type(), ")");
  std::vector<Value*> operands;
  for (int64_t id : p.operands()) {
    if (id == -1) {
      operands.push_back(nullptr);
      continue;
    }
    PDIST_ASSIGN_OR_RETURN(Value* v, Ref(id, where));
    operands.push_back(v);
  }
  AttributeMap attrs;
  for (const proto::Attribute& a : p.attrs()) {
    PDIST_ASSIGN_OR_RETURN(Attribute value, AttributeFromProto(a));
    if (!attrs.emplace(a.name(), std::move(value)).second) {
      return Corrupt(absl::StrCat(where, ": attribute '", a.name(), "' appears twice"));
    }
  }
  // Fill in attributes added to the op since the file was written; unknown ops and bad
  // attributes are left for the verifier to report.
  if (const OpDef* def = OpRegistry::Global().Find(p.type())) {
    absl::StatusOr<AttributeMap> normalized = NormalizeAttributes(*def, attrs);
    if (normalized.ok()) attrs = *std::move(normalized);
  }
  auto op = std::make_unique<Operation>(p.type(), std::move(operands), std::move(attrs));
  if (p.role() < 0 || p.role() > static_cast<int32_t>(OpRole::kPrologue) || p.chunk() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": role ", p.role(), " / chunk ", p.chunk(),
                                                   " is not a pipeline job (roles 0-4, chunks >= 0)"));
  }
  op->set_role(static_cast<OpRole>(p.role()));
  op->set_chunk(p.chunk());
  for (int64_t id : p.results()) {
    PDIST_ASSIGN_OR_RETURN(Value* v, Define(id, where));
    op->add_result(v);
  }
  program_.block().Append(std::move(op));
  return absl::OkStatus();
}

absl::Status ProtoReader::ReadBindings() {
  if (p_.has_local_rank()) {
    if (p_.local_rank() < 0) return Corrupt(absl::StrCat("local_rank ", p_.local_rank(), " is negative"));
    program_.set_local_rank(p_.local_rank());
  }
  if (p_.loss() != -1) {
    PDIST_ASSIGN_OR_RETURN(Value* loss, Ref(p_.loss(), "loss"));
    program_.set_loss(loss);
  }
  for (const proto::Output& o : p_.outputs()) {
    PDIST_ASSIGN_OR_RETURN(Value* value, Ref(o.value(), "output"));
    program_.add_output(o.name(), value);  // the verifier checks names
  }
  for (const proto::StateUpdate& u : p_.updates()) {
    PDIST_ASSIGN_OR_RETURN(Value* state, Ref(u.state(), "update"));
    PDIST_ASSIGN_OR_RETURN(Value* value, Ref(u.new_value(), "update"));
    program_.add_update(state, value);
  }
  for (const proto::StateUpdate& g : p_.gradients()) {
    PDIST_ASSIGN_OR_RETURN(Value* param, Ref(g.state(), "gradient"));
    PDIST_ASSIGN_OR_RETURN(Value* grad, Ref(g.new_value(), "gradient"));
    program_.add_gradient(param, grad);
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> ProtoReader::Read() {
  if (p_.version() == 0) return Corrupt("no format version (not a pdist model.pb?)");
  if (p_.version() != kModelFormatVersion) {
    return Corrupt(absl::StrCat("format version ", p_.version(), " is not supported (this build reads version ",
                                kModelFormatVersion, ")"));
  }
  PDIST_RETURN_IF_ERROR(ReadValues());
  for (int64_t id : p_.arguments()) {
    PDIST_ASSIGN_OR_RETURN(Value* v, Define(id, "arguments"));
    program_.block().add_argument(v);
  }
  for (int i = 0; i < p_.ops_size(); ++i) PDIST_RETURN_IF_ERROR(ReadOp(i, p_.ops(i)));
  if (static_cast<int64_t>(defined_.size()) != program_.num_values()) {
    for (int64_t id = 0; id < program_.num_values(); ++id) {
      if (!defined_.contains(program_.FindValue(id))) return Corrupt(absl::StrCat("value id ", id, " is never defined"));
    }
  }
  PDIST_RETURN_IF_ERROR(ReadBindings());
  PDIST_RETURN_IF_ERROR(UpgradeLegacyResultTypes(program_));
  PDIST_RETURN_IF_ERROR(WithContext(VerifyProgram(program_), "invalid model.pb"));
  return std::move(program_);
}

bool LooksLikeText(std::string_view content) {
  size_t i = 0;
  while (i < content.size()) {
    if (std::isspace(static_cast<unsigned char>(content[i]))) {
      ++i;
    } else if (content.substr(i, 2) == "//") {
      while (i < content.size() && content[i] != '\n') ++i;
    } else {
      break;
    }
  }
  if (i == content.size()) return !content.empty();  // only comments: the parser says what is missing
  if (content.substr(i, 7) == "program") return true;
  // A word of text where "program" belongs (a typo): the parser names it. A model.pb's first
  // bytes after its tag and length are tags again, not 16 printable characters.
  if (!std::isalpha(static_cast<unsigned char>(content[i]))) return false;
  const std::string_view head = content.substr(i, 16);
  return head.size() == 16 && std::all_of(head.begin(), head.end(), [](char c) {
           return std::isprint(static_cast<unsigned char>(c)) || std::isspace(static_cast<unsigned char>(c));
         });
}

}  // namespace

absl::StatusOr<std::string> SerializeProgram(const Program& program) {
  PDIST_RETURN_IF_ERROR(WithContext(VerifyProgram(program), "cannot serialise an invalid program"));
  const proto::Program p = ProgramToProto(program);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    if (!p.SerializeToCodedStream(&out)) return absl::InternalError("protobuf serialisation failed");
  }
  return SealModelBytes(bytes);
}

std::string SealModelBytes(std::string_view body) {
  std::string bytes(body);
  const uint64_t checksum = Fnv1a64(body);
  bytes.push_back(static_cast<char>(kChecksumTag));
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((checksum >> (8 * i)) & 0xff));
  return bytes;
}

absl::StatusOr<Program> DeserializeProgram(std::string_view bytes) {
  if (bytes.empty()) return Corrupt("empty input");
  if (bytes.size() < kChecksumSize || static_cast<unsigned char>(bytes[bytes.size() - kChecksumSize]) != kChecksumTag) {
    return Corrupt("truncated, or not a pdist model.pb (it does not end with the checksum field)");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumSize);
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) {
    stored |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[bytes.size() - 8 + i])) << (8 * i);
  }
  if (Fnv1a64(body) != stored) return Corrupt("checksum mismatch: the file is truncated or corrupted");
  proto::Program p;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return Corrupt("larger than 2 GiB");
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return Corrupt("protobuf parse failed");
  return ProtoReader(p).Read();
}

absl::StatusOr<Program> DecodeProgram(std::string_view content) {
  if (!LooksLikeText(content)) return DeserializeProgram(content);
  PDIST_ASSIGN_OR_RETURN(Program program, ParseProgram(content));
  PDIST_RETURN_IF_ERROR(VerifyProgram(program));
  return program;
}

absl::Status SaveProgram(const Program& program, const std::string& path) {
  PDIST_ASSIGN_OR_RETURN(std::string bytes, SerializeProgram(program));
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<Program> LoadProgram(const std::string& path) {
  PDIST_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<Program> program = DeserializeProgram(bytes);
  if (!program.ok()) return WithContext(program.status(), path);
  return program;
}

absl::StatusOr<Program> LoadProgramAuto(const std::string& path) {
  PDIST_ASSIGN_OR_RETURN(std::string content, ReadFileToString(path));
  absl::StatusOr<Program> program = DecodeProgram(content);
  if (!program.ok()) return WithContext(program.status(), path);
  return program;
}

}  // namespace pdist::ir
