// Local forms: what partition turns an op into when its piece needs to know where it lies in
// the whole tensor. Vocab-parallel embedding and cross entropy (Megatron-LM's
// VocabParallelEmbedding and vocab-parallel cross entropy; Paddle's c_embedding and
// c_softmax_with_cross_entropy), and dropout on a piece.
//
//   c_embedding(ids, table_piece) {start_index = 512}: rows [512, 512 + rows) of the table;
//     other ids read zeros (the output is Partial(sum) over the vocab group)
//   c_softmax_with_cross_entropy(logits_piece, label) {start_index, ranks}: the kernel
//     all-reduces the row max, the sum of exponentials and the label's logit over `ranks`,
//     so the loss is whole and the softmax stays a piece
//   c_softmax_with_cross_entropy_grad_from_logits(label, logits_piece, loss_grad) {start_index,
//     ranks}: the same two all-reduces, then the piece's gradient (bf16/f16 logits: the backward
//     keeps the logits, not an f32 softmax)
//   c_dropout(x_piece) {global_shape, offsets}: the mask the whole tensor draws at the piece's
//     global positions, so every strategy drops the same elements as one rank
//
// Each takes its base op's signature, shape inference and cost, plus the attributes that
// locate the rank's piece; like the collectives they exist only in partitioned programs.
#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

absl::Status RegisterLocalForm(OpRegistry& registry, const std::string& base, const std::string& name,
                               std::vector<AttrSpec> extra_attrs, const std::string& description,
                               bool communicates = false) {
  const OpDef* base_def = registry.Find(base);
  if (base_def == nullptr) return absl::FailedPreconditionError(absl::StrCat(name, " needs ", base, " registered first"));
  OpDef def = *base_def;
  def.name = name;
  def.local_form_of = base;
  for (AttrSpec& a : extra_attrs) def.attrs.push_back(std::move(a));
  ops::MarkLocalOnly(def, description);
  def.communicates = communicates;
  return registry.Register(std::move(def));
}

}  // namespace

absl::Status RegisterLocalForms(OpRegistry& registry) {
  const AttrSpec start = {"start_index", int64_t{0}};
  const AttrSpec ranks = {"ranks", std::vector<int64_t>{}};
  PDIST_RETURN_IF_ERROR(RegisterLocalForm(registry, "embedding", "c_embedding", {start},
                                          "local: rows [start_index, start_index + rows) of the table; other ids → 0"));
  PDIST_RETURN_IF_ERROR(RegisterLocalForm(registry, "embedding_grad", "c_embedding_grad", {start},
                                          "local: gradient of the rows [start_index, start_index + rows)"));
  PDIST_RETURN_IF_ERROR(RegisterLocalForm(registry, "cross_entropy_with_softmax", "c_softmax_with_cross_entropy",
                                          {start, ranks},
                                          "local: softmax and loss over classes split across ranks (all-reduces)",
                                          /*communicates=*/true));
  PDIST_RETURN_IF_ERROR(RegisterLocalForm(registry, "cross_entropy_with_softmax_grad",
                                          "c_softmax_with_cross_entropy_grad", {start},
                                          "local: logits_grad of the classes [start_index, start_index + classes)"));
  PDIST_RETURN_IF_ERROR(RegisterLocalForm(
      registry, "cross_entropy_with_softmax_grad_from_logits", "c_softmax_with_cross_entropy_grad_from_logits",
      {start, ranks}, "local: logits_grad of the classes [start_index, start_index + classes) (all-reduces)",
      /*communicates=*/true));
  return RegisterLocalForm(registry, "dropout", "c_dropout",
                           {{"global_shape", std::vector<int64_t>{}}, {"offsets", std::vector<int64_t>{}}},
                           "local: the whole tensor's mask at the piece's global positions");
}

}  // namespace pdist::ir
