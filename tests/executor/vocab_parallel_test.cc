// The CPU's vocab-parallel cross entropy (c_softmax_with_cross_entropy, ir/ops/local_forms.cc)
// run alone, outside the engine's mp runs that prove it end to end: on a group of one holding
// every class it is cross_entropy_with_softmax; a label outside the piece reads a logit of 0; and
// on two ranks, each holding half of the classes, the pieces are the whole softmax and every rank
// gets the whole loss; the gradient from the logits likewise. The CUDA kernel is compared with
// this one on a GPU (cuda_kernel_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "executor/comm/comm_groups.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "executor/executor.h"
#include "executor/random.h"
#include "ir/builder.h"
#include "ir/op_def.h"

namespace pdist::exec {
namespace {

using ir::DataType;

constexpr int64_t kLanes = 6, kClasses = 10, kIgnore = -100;
const std::vector<double> kLabels = {0, 9, 4, kIgnore, 5, 7};

Tensor Logits(int64_t first_class, int64_t classes) {
  std::vector<double> v;
  for (int64_t lane = 0; lane < kLanes; ++lane) {
    for (int64_t c = first_class; c < first_class + classes; ++c) {
      v.push_back(8 * UniformAt(5, static_cast<uint64_t>(lane * kClasses + c)) - 4);
    }
  }
  return TensorFromDoubles({{kLanes, classes}, DataType::kFloat64}, v);
}

Tensor Labels() { return TensorFromDoubles({{kLanes, 1}, DataType::kInt64}, kLabels); }

// Runs one op of `type` on the named inputs (data values of their types) and returns its results.
std::vector<Tensor> RunOne(const std::string& type, const std::vector<std::pair<std::string, Tensor>>& inputs,
                           const ir::AttributeMap& attrs, std::shared_ptr<comm::CommGroups> groups) {
  ir::Program p;
  ir::Builder b(&p);
  std::vector<ir::Value*> operands;
  Feeds feeds;
  for (const auto& [name, tensor] : inputs) {
    operands.push_back(b.Data(name, tensor.type()));
    feeds.emplace(name, tensor);
  }
  absl::StatusOr<std::vector<ir::Value*>> out = b.Create(type, operands, attrs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  std::vector<int64_t> fetch_ids;
  for (const ir::Value* v : *out) fetch_ids.push_back(v->id());
  absl::StatusOr<Executor> executor = Executor::Create(p, {.fetch_ids = fetch_ids, .comm_groups = std::move(groups)});
  EXPECT_TRUE(executor.ok()) << executor.status();
  if (!executor.ok()) return {};
  Workspace ws;
  absl::StatusOr<RunResult> run = executor->Run(feeds, ws);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  std::vector<Tensor> results;
  for (int64_t id : fetch_ids) results.push_back(run->fetched.at(id));
  return results;
}

// Runs `type` on (logits, label) and returns its two results (softmax, loss).
std::vector<Tensor> RunCrossEntropy(const std::string& type, const Tensor& logits, const ir::AttributeMap& attrs,
                                    std::shared_ptr<comm::CommGroups> groups = nullptr) {
  return RunOne(type, {{"logits", logits}, {"label", Labels()}}, attrs, std::move(groups));
}

ir::AttributeMap PieceAttrs(int64_t start, std::vector<int64_t> ranks) {
  return {{"start_index", start}, {"ignore_index", kIgnore}, {"ranks", std::move(ranks)}};
}

std::shared_ptr<comm::CommGroups> Groups(std::shared_ptr<comm::InprocWorld> world, int rank) {
  auto comm = comm::CreateInprocCommunicator(std::move(world), rank);
  EXPECT_TRUE(comm.ok()) << comm.status();
  auto groups = comm::CommGroups::Create(*comm, {ir::ProcessMesh::Range({2})});
  EXPECT_TRUE(groups.ok()) << groups.status();
  return groups.ok() ? *groups : nullptr;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << what << " " << i;
}

// Each of two ranks (threads of one in-process world) runs `piece(rank, its groups)`, holding
// the classes [rank · kClasses / 2, (rank + 1) · kClasses / 2); their results by rank.
std::vector<std::vector<Tensor>> OnTwoRanks(
    const std::function<std::vector<Tensor>(int, std::shared_ptr<comm::CommGroups>)>& piece) {
  auto world = std::make_shared<comm::InprocWorld>(2);
  std::vector<std::vector<Tensor>> pieces(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back([&, r] { pieces[r] = piece(r, Groups(world, r)); });
  for (std::thread& t : ranks) t.join();
  return pieces;
}

// Rank r's columns of a whole [kLanes, kClasses] tensor (its classes, as OnTwoRanks splits them).
std::vector<double> ColumnsOf(const Tensor& whole, int r) {
  const std::vector<double> all = TensorToDoubles(whole);
  std::vector<double> columns;
  for (int64_t lane = 0; lane < kLanes; ++lane) {
    for (int64_t c = r * kClasses / 2; c < (r + 1) * kClasses / 2; ++c) columns.push_back(all[lane * kClasses + c]);
  }
  return columns;
}

TEST(VocabParallelKernelTest, OnAGroupOfOneHoldingEveryClassItIsTheCrossEntropy) {
  auto comm = comm::CreateInprocCommunicator(std::make_shared<comm::InprocWorld>(1), 0);
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto groups = comm::CommGroups::Create(*comm, {ir::ProcessMesh::Range({1})});
  ASSERT_TRUE(groups.ok()) << groups.status();
  const Tensor logits = Logits(0, kClasses);
  const std::vector<Tensor> piece = RunCrossEntropy("c_softmax_with_cross_entropy", logits, PieceAttrs(0, {0}), *groups);
  const std::vector<Tensor> whole = RunCrossEntropy("cross_entropy_with_softmax", logits, {{"ignore_index", kIgnore}});
  ASSERT_EQ(piece.size(), 2u);
  ASSERT_EQ(whole.size(), 2u);
  ExpectNear(TensorToDoubles(piece[0]), TensorToDoubles(whole[0]), "softmax");
  ExpectNear(TensorToDoubles(piece[1]), TensorToDoubles(whole[1]), "loss");
  EXPECT_EQ(TensorToDoubles(piece[1])[3], 0) << "the ignored lane";

  // Held classes [5, 15): labels 0, 4 (lanes 0, 2) are another rank's, so their logit reads 0:
  // the loss is log Σ exp + 0 − 0 over this piece alone.
  const Tensor shifted = Logits(0, kClasses);
  const std::vector<Tensor> outside = RunCrossEntropy("c_softmax_with_cross_entropy", shifted, PieceAttrs(5, {0}), *groups);
  ASSERT_EQ(outside.size(), 2u);
  const std::vector<double> x = TensorToDoubles(shifted);
  for (int64_t lane : {0, 2}) {
    double sum = 0;
    for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(x[lane * kClasses + c]);
    EXPECT_NEAR(TensorToDoubles(outside[1])[lane], std::log(sum), 1e-12) << "lane " << lane;
  }
}

TEST(VocabParallelKernelTest, TwoRanksHoldingHalfTheClassesEachGiveTheWholeLoss) {
  const Tensor logits = Logits(0, kClasses);
  const std::vector<Tensor> whole = RunCrossEntropy("cross_entropy_with_softmax", logits, {{"ignore_index", kIgnore}});
  ASSERT_EQ(whole.size(), 2u);
  const std::vector<std::vector<Tensor>> pieces = OnTwoRanks([](int r, std::shared_ptr<comm::CommGroups> groups) {
    return RunCrossEntropy("c_softmax_with_cross_entropy", Logits(r * kClasses / 2, kClasses / 2),
                           PieceAttrs(r * kClasses / 2, {0, 1}), std::move(groups));
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(pieces[r].size(), 2u) << "rank " << r;
    ExpectNear(TensorToDoubles(pieces[r][0]), ColumnsOf(whole[0], r), absl::StrCat("rank ", r, " softmax piece"));
    ExpectNear(TensorToDoubles(pieces[r][1]), TensorToDoubles(whole[1]), absl::StrCat("rank ", r, " loss"));
  }
}

// The gradient from the logits (bf16/f16 models' backward): each rank's piece, from its logits
// piece and the two all-reduces, is its columns of the whole gradient.
TEST(VocabParallelKernelTest, TwoRanksGradientsFromTheLogitsArePiecesOfTheWholeGradient) {
  const Tensor g = TensorFromDoubles({{kLanes, 1}, DataType::kFloat64}, {0.5, -1, 2, 3, 0.25, 1});
  const std::vector<Tensor> whole = RunOne("cross_entropy_with_softmax_grad_from_logits",
                                           {{"label", Labels()}, {"logits", Logits(0, kClasses)}, {"loss_grad", g}},
                                           {{"ignore_index", kIgnore}}, nullptr);
  ASSERT_EQ(whole.size(), 1u);
  const std::vector<std::vector<Tensor>> pieces = OnTwoRanks([&g](int r, std::shared_ptr<comm::CommGroups> groups) {
    return RunOne("c_softmax_with_cross_entropy_grad_from_logits",
                  {{"label", Labels()}, {"logits", Logits(r * kClasses / 2, kClasses / 2)}, {"loss_grad", g}},
                  PieceAttrs(r * kClasses / 2, {0, 1}), std::move(groups));
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(pieces[r].size(), 1u) << "rank " << r;
    ExpectNear(TensorToDoubles(pieces[r][0]), ColumnsOf(whole[0], r), absl::StrCat("rank ", r, " gradient piece"));
  }
}

// The gradient from the logits piece written over the piece (ir::OpDef::overwrites_dying_operand,
// inherited from cross_entropy_with_softmax_grad_from_logits): the softmax goes straight into the
// storage it reads, each logit read before its probability is written, and gives the numbers of
// a run into a buffer of its own.
TEST(VocabParallelKernelTest, TheGradientWrittenOverItsLogitsIsTheSame) {
  auto comm = comm::CreateInprocCommunicator(std::make_shared<comm::InprocWorld>(1), 0);
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto groups = comm::CommGroups::Create(*comm, {ir::ProcessMesh::Range({1})});
  ASSERT_TRUE(groups.ok()) << groups.status();
  ir::Program p;
  ir::Builder b(&p);
  const Tensor logits = Logits(0, kClasses), labels = Labels();
  const Tensor g = TensorFromDoubles({{kLanes, 1}, DataType::kFloat64}, {0.5, -1, 2, 3, 0.25, 1});
  absl::StatusOr<std::vector<ir::Value*>> grad =
      b.Create("c_softmax_with_cross_entropy_grad_from_logits",
               {b.Data("label", labels.type()), b.Data("logits", logits.type()), b.Data("loss_grad", g.type())},
               PieceAttrs(0, {0}));
  ASSERT_TRUE(grad.ok()) << grad.status();
  const ir::Operation& op = *(*grad)[0]->producer();
  ASSERT_EQ(ir::OverwritableOperands(op), (std::vector<std::pair<size_t, size_t>>{{0, 1}}));
  auto run = [&](const Tensor& x, const Tensor* donated) {
    std::vector<Tensor> out(1);
    KernelContext ctx(op, {&labels, &x, &g}, &out);
    ctx.set_comm_groups(groups->get());
    if (donated != nullptr) ctx.Donate(0, *donated);
    const absl::Status status = (*KernelRegistry::Global().Find(DeviceType::kCPU, op.type()))(ctx);
    EXPECT_TRUE(status.ok()) << status;
    return out[0];
  };
  const Tensor fresh = run(logits, nullptr);
  Tensor storage = Logits(0, kClasses);
  const Tensor over = run(storage, &storage);
  EXPECT_EQ(over.raw(), storage.raw());
  EXPECT_EQ(TensorToDoubles(over), TensorToDoubles(fresh));
}

}  // namespace
}  // namespace pdist::exec
