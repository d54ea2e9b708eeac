// Executor: memory planning (free after last use, peak), initialisation, feed errors.
#include "executor/executor.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "executor/memory_planner.h"
#include "ir/builder.h"
#include "ir/op_def.h"

namespace pdist::exec {
namespace {

using ir::DataType;

TEST(MemoryPlannerTest, FreesEachValueAfterItsLastUse) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{256}, DataType::kFloat32});  // 1 KiB each
  ir::Value* a = *b.Op1("relu", {x});                       // op 0
  ir::Value* c = *b.Op1("relu", {a});                       // op 1: last use of a
  ir::Value* d = *b.Op1("relu", {c});                       // op 2: last use of c
  ir::Value* loss = *b.Op1("sum", {d});                     // op 3: last use of d
  p.set_loss(loss);
  MemoryPlan plan = PlanMemory(p, {});
  ASSERT_EQ(plan.release_after.size(), 4u);
  EXPECT_EQ(plan.release_after[0], std::vector<int64_t>{});
  EXPECT_EQ(plan.release_after[1], std::vector<int64_t>{a->id()});
  EXPECT_EQ(plan.release_after[2], std::vector<int64_t>{c->id()});
  EXPECT_EQ(plan.release_after[3], std::vector<int64_t>{d->id()});
  // Never more than two 1 KiB activations alive (+ the 4-byte loss).
  EXPECT_EQ(plan.estimated_peak_bytes, 2048);

  auto executor = Executor::Create(p);
  ASSERT_TRUE(executor.ok()) << executor.status();
  Workspace ws;
  auto run = executor->Run({{"x", Tensor::Zeros({{256}, DataType::kFloat32})}}, ws);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->peak_bytes, 2048);
}

// add_grad reads only the types of x and y (ir::OpDef::type_only_operands): a value it is the
// last to name is freed after its last reader of the data, and the kernel runs without it,
// summing the output gradient over the broadcast dim all the same.
TEST(MemoryPlannerTest, AUseOfTheTypeAloneKeepsNothingAlive) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{4, 256}, DataType::kFloat32});
  ir::Value* bias = b.Data("bias", {{256}, DataType::kFloat32});
  ir::Value* g = b.Data("g", {{4, 256}, DataType::kFloat32});
  ir::Value* a = *b.Op1("relu", {x});                                   // op 0
  ir::Value* y = *b.Op1("relu", {a});                                   // op 1: a's last data reader
  const std::vector<ir::Value*> grads = *b.Create("add_grad", {a, bias, g});  // op 2: a's type only
  ir::Value* loss = *b.Op1("sum", {y});                                  // op 3
  p.set_loss(loss);
  const ir::Operation& add_grad = *grads[1]->producer();
  EXPECT_FALSE(ir::ReadsOperand(add_grad, 0));
  EXPECT_FALSE(ir::ReadsOperand(add_grad, 1));
  EXPECT_TRUE(ir::ReadsOperand(add_grad, 2));
  const MemoryPlan plan = PlanMemory(p, {grads[1]->id()});
  EXPECT_EQ(plan.release_after[1], (std::vector<int64_t>{a->id()}));

  ExecutorOptions options;
  options.fetch_ids = {grads[1]->id()};
  auto executor = Executor::Create(p, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  Tensor g_value = Tensor::Zeros({{4, 256}, DataType::kFloat32});
  for (int64_t i = 0; i < g_value.num_elements(); ++i) g_value.data<float>()[i] = static_cast<float>(i / 256 + 1);
  Workspace ws;
  auto run = executor->Run({{"x", Tensor::Zeros({{4, 256}, DataType::kFloat32})},
                            {"bias", Tensor::Zeros({{256}, DataType::kFloat32})},
                            {"g", g_value}},
                           ws);
  ASSERT_TRUE(run.ok()) << run.status();
  const Tensor& bias_grad = run->fetched.at(grads[1]->id());
  for (int64_t j = 0; j < 256; ++j) ASSERT_EQ(bias_grad.data<float>()[j], 1 + 2 + 3 + 4) << j;
}

// Cross entropy's gradient from the logits is written over the logits where they die at it
// (ir::OpDef::overwrites_dying_operand): the step peaks at one [64, 96] tensor, not two, and
// gives the numbers the same op gives when the logits are kept (fetched) and it writes a buffer
// of its own. f32, and bf16 through the CPU's float math (its rounded result cast into the
// donated storage).
TEST(MemoryPlannerTest, AGradientIsWrittenOverTheLogitsThatDieAtIt) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    SCOPED_TRACE(ir::DataTypeName(dtype));
    ir::Program p;
    ir::Builder b(&p);
    const ir::TensorType type{{64, 96}, dtype};
    ir::Value* x = b.Data("x", type);
    ir::Value* label = b.Data("label", {{64, 1}, DataType::kInt64});
    ir::Value* g = b.Data("g", {{64, 1}, ir::ComputeDtype(dtype)});
    ir::Value* logits = *b.Op1("scale", {x}, {{"scale", 2.0}});  // an op's result: it can die
    ir::Value* dx = *b.Op1("cross_entropy_with_softmax_grad_from_logits", {label, logits, g});
    std::vector<double> xs(64 * 96), labels(64);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>((i * 37) % 23) / 8 - 1;
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<double>((i * 7) % 96);
    const Feeds feeds = {{"x", TensorFromDoubles(type, xs)},
                         {"label", TensorFromDoubles(label->type(), labels)},
                         {"g", TensorFromDoubles(g->type(), std::vector<double>(64, 1))}};
    auto run = [&](std::vector<int64_t> fetch) {
      ExecutorOptions options;
      options.fetch_ids = std::move(fetch);
      auto executor = Executor::Create(p, options);
      EXPECT_TRUE(executor.ok()) << executor.status();
      Workspace ws;
      absl::StatusOr<RunResult> r = executor->Run(feeds, ws);
      EXPECT_TRUE(r.ok()) << r.status();
      return r.ok() ? *r : RunResult{};
    };
    const RunResult over = run({dx->id()});
    const RunResult kept = run({dx->id(), logits->id()});  // the logits survive: no donation
    const int64_t one = type.num_bytes();
    EXPECT_EQ(over.peak_bytes, one);
    EXPECT_EQ(kept.peak_bytes, 2 * one);
    ASSERT_EQ(over.fetched.count(dx->id()), 1u);
    ASSERT_EQ(kept.fetched.count(dx->id()), 1u);
    EXPECT_EQ(TensorToDoubles(over.fetched.at(dx->id())), TensorToDoubles(kept.fetched.at(dx->id())));
  }
}

// Cross entropy makes nothing beside its results: the forward without a softmax result needs
// each lane's logsumexp only, and the gradient from the logits writes the softmax straight into
// its result (the logits' storage, where donated). A temporary of the logits' size would be
// memory the planner does not count (a bf16 head's f32 loss: a second f32 copy of the logits)
// and that the executor's live-byte peak does not see, so the host allocator's calls are counted.
TEST(MemoryPlannerTest, CrossEntropyAllocatesNothingBesideItsResults) {
  ir::Program p;
  ir::Builder b(&p);
  const ir::TensorType type{{16, 40}, DataType::kFloat32};
  ir::Value* logits = b.Data("logits", type);
  ir::Value* label = b.Data("label", {{16, 1}, DataType::kInt64});
  absl::StatusOr<std::vector<ir::Value*>> ce =
      b.Create("cross_entropy_with_softmax", {logits, label}, {{"return_softmax", false}});
  ASSERT_TRUE(ce.ok()) << ce.status();
  ir::Value* g = b.Data("g", (*ce)[1]->type());
  absl::StatusOr<std::vector<ir::Value*>> grad =
      b.Create("cross_entropy_with_softmax_grad_from_logits", {label, logits, g}, {{"return_softmax", false}});
  ASSERT_TRUE(grad.ok()) << grad.status();
  std::vector<double> xs(16 * 40), labels(16);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>((i * 37) % 23) / 4 - 2;
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = i == 3 ? -100 : static_cast<double>((i * 7) % 40);
  const Tensor x = TensorFromDoubles(type, xs), l = TensorFromDoubles(label->type(), labels);
  const Tensor ones = TensorFromDoubles(g->type(), std::vector<double>(16, 1));
  // Runs op's CPU kernel, with `donated` as result 0's storage when given; returns the results
  // and how many blocks the host allocator handed out meanwhile.
  auto run = [](const ir::Operation& op, std::vector<const Tensor*> inputs, const Tensor* donated) {
    std::vector<Tensor> out(op.num_results());
    KernelContext ctx(op, std::move(inputs), &out);
    if (donated != nullptr) ctx.Donate(0, *donated);
    const KernelFn* fn = KernelRegistry::Global().Find(DeviceType::kCPU, op.type());
    EXPECT_NE(fn, nullptr) << op.type();
    const int64_t before = HostAllocator::Instance().stats().allocations;
    const absl::Status status = (*fn)(ctx);
    EXPECT_TRUE(status.ok()) << status;
    return std::make_pair(std::move(out), HostAllocator::Instance().stats().allocations - before);
  };
  const auto [forward, forward_blocks] = run(*(*ce)[0]->producer(), {&x, &l}, nullptr);
  EXPECT_EQ(forward_blocks, 2);  // the empty softmax result and the loss
  EXPECT_EQ(forward[0].num_elements(), 0);
  const auto [gradient, gradient_blocks] = run(*(*grad)[0]->producer(), {&l, &x, &ones}, nullptr);
  EXPECT_EQ(gradient_blocks, 1);  // its result
  Tensor storage = TensorFromDoubles(type, xs);  // a copy of the logits, dying at the gradient
  const auto [over, over_blocks] = run(*(*grad)[0]->producer(), {&l, &storage, &ones}, &storage);
  EXPECT_EQ(over_blocks, 0);
  EXPECT_EQ(over[0].raw(), storage.raw());
  // The same numbers either way, and the loss from the logsumexp is the textbook one.
  EXPECT_EQ(TensorToDoubles(over[0]), TensorToDoubles(gradient[0]));
  const std::vector<double> loss = TensorToDoubles(forward[1]), dx = TensorToDoubles(gradient[0]);
  for (int64_t lane = 0; lane < 16; ++lane) {
    double sum = 0;
    for (int64_t c = 0; c < 40; ++c) sum += std::exp(xs[lane * 40 + c]);
    const double want = lane == 3 ? 0 : std::log(sum) - xs[lane * 40 + static_cast<int64_t>(labels[lane])];
    EXPECT_NEAR(loss[lane], want, 1e-5 * (1 + std::abs(want))) << "lane " << lane;
    for (int64_t c = 0; c < 40; ++c) {
      const double p_c = lane == 3 ? 0 : std::exp(xs[lane * 40 + c]) / sum;
      const double want_dx = p_c - (lane != 3 && c == labels[lane] ? 1 : 0);
      EXPECT_NEAR(dx[lane * 40 + c], want_dx, 1e-6) << "lane " << lane << " class " << c;
    }
  }
}

// Two 1 KiB parameters updated by sgd in the optimizer's ops: each new value replaces its state
// right after the op that made it (the old tensor is read by nothing later), so the step never
// holds both new values beside the old ones; a failure after the first update leaves it installed.
struct TwoUpdates {
  ir::Program p;
  Workspace ws;  // initialised
  Feeds feeds;   // zero gradients, learning rate 0
};

TwoUpdates TwoSgdUpdates(bool fail_after_first) {
  TwoUpdates t;
  ir::Builder b(&t.p);
  const ir::TensorType type{{256}, DataType::kFloat32}, scalar{{}, DataType::kFloat32};
  ir::Value* w1 = b.Parameter("w1", type, "ones");
  ir::Value* w2 = b.Parameter("w2", type, "ones");
  ir::Value* g1 = b.Data("g1", type);
  ir::Value* g2 = b.Data("g2", type);
  ir::Value* lr = b.Data("lr", scalar);
  b.set_op_role(ir::OpRole::kOptimizer);
  ir::Value* n1 = *b.Op1("sgd", {w1, lr, g1});  // op 0
  if (fail_after_first) {
    // A collective with no communicator fails when it runs: the run stops after op 0.
    EXPECT_TRUE(b.Op1("c_allreduce", {n1}, {{"ranks", std::vector<int64_t>{0, 1}}}).ok());
  }
  ir::Value* n2 = *b.Op1("sgd", {w2, lr, g2});
  t.p.add_update(w1, n1);
  t.p.add_update(w2, n2);
  EXPECT_TRUE(InitializeWorkspace(t.p, 1, t.ws).ok());
  t.feeds = {{"g1", Tensor::Zeros(type)}, {"g2", Tensor::Zeros(type)}, {"lr", Tensor::Zeros(scalar)}};
  return t;
}

TEST(MemoryPlannerTest, UpdatesAreInstalledRightAfterTheOptimizerOpThatMakesThem) {
  TwoUpdates t = TwoSgdUpdates(false);
  MemoryPlan plan = PlanMemory(t.p, {});
  ASSERT_EQ(plan.install_after.size(), 2u);
  EXPECT_EQ(plan.install_after[0], std::vector<size_t>{0});
  EXPECT_EQ(plan.install_after[1], std::vector<size_t>{1});
  EXPECT_EQ(plan.estimated_peak_bytes, 1024);  // one new value at a time; installed, it is persistent

  auto executor = Executor::Create(t.p);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const void* old_w1 = t.ws.at("w1").buffer_id();
  auto run = executor->Run(t.feeds, t.ws);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->peak_bytes, 1024);  // holding every new value to the end measured 2048
  EXPECT_NE(t.ws.at("w1").buffer_id(), old_w1);
}

TEST(ExecutorTest, AFailureAmongTheOptimizerOpsLeavesTheEarlierUpdatesInstalled) {
  TwoUpdates t = TwoSgdUpdates(true);
  auto executor = Executor::Create(t.p);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const void* old_w1 = t.ws.at("w1").buffer_id();
  const void* old_w2 = t.ws.at("w2").buffer_id();
  auto run = executor->Run(t.feeds, t.ws);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(t.ws.at("w1").buffer_id(), old_w1);  // updated in place before the failure
  EXPECT_EQ(t.ws.at("w2").buffer_id(), old_w2);
}

TEST(ExecutorTest, APipelinedStepRunsTheOptimizerJobLast) {
  // Updates are installed in place during O; a job after it would read the new state.
  TwoUpdates t = TwoSgdUpdates(false);
  auto executor = Executor::Create(t.p);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const std::vector<ir::PipelineJob> jobs = {{.kind = ir::JobKind::kOptimizer}, {.kind = ir::JobKind::kForward}};
  auto run = executor->RunJobs(jobs, {t.feeds}, t.ws);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("the optimizer job must come last, not at 1 of 2 jobs"), std::string::npos)
      << run.status();
}

// The prologue runs once, before every job, and what it makes every micro-batch reads: with two
// micro-batches, loss = Σ_k sum(x_k · 2w); the step's live bytes come back to nothing but what
// the step returns (its step value released once, not once per micro-batch).
TEST(ExecutorTest, APipelinedStepRunsThePrologueOnceForEveryMicroBatch) {
  ir::Program p;
  ir::Builder b(&p);
  const ir::TensorType type{{4}, DataType::kFloat64};
  ir::Value* w = b.Parameter("w", type, "ones");
  ir::Value* x = b.Data("x", type);
  b.set_op_role(ir::OpRole::kPrologue);
  ir::Value* doubled = *b.Op1("scale", {w}, {{"scale", 2.0}});
  b.set_op_role(ir::OpRole::kForward);
  p.set_loss(*b.Op1("sum", {*b.Op1("multiply", {x, doubled})}));
  ExecutorOptions options;
  options.profile = true;
  auto executor = Executor::Create(p, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  Workspace ws;
  ASSERT_TRUE(InitializeWorkspace(p, 1, ws).ok());
  ws["w"] = TensorFromDoubles(type, {1, 2, 3, 4});
  std::vector<Feeds> micro(2);
  for (int k = 0; k < 2; ++k) {
    const double base = 10.0 * k;
    micro[static_cast<size_t>(k)] = {{"x", TensorFromDoubles(type, {base, base + 1, base + 2, base + 3})}};
  }
  const std::vector<ir::PipelineJob> jobs = {{.kind = ir::JobKind::kForward, .micro_batch = 0},
                                             {.kind = ir::JobKind::kForward, .micro_batch = 1},
                                             {.kind = ir::JobKind::kOptimizer}};
  auto run = executor->RunJobs(jobs, micro, ws);
  ASSERT_TRUE(run.ok()) << run.status();
  // Σ_i 2·w_i·(x0_i + x1_i) = 2·(1·10 + 2·12 + 3·14 + 4·16) = 280
  EXPECT_DOUBLE_EQ(run->loss, 280.0);
  EXPECT_GT(run->op_seconds.count("scale"), 0u);
  auto again = executor->RunJobs(jobs, micro, ws);  // a second step: the prologue again, once
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_DOUBLE_EQ(again->loss, 280.0);
}

TEST(ExecutorTest, MissingOrMistypedFeedIsAnError) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{4}, DataType::kFloat32});
  p.set_loss(*b.Op1("sum", {x}));
  auto executor = Executor::Create(p);
  ASSERT_TRUE(executor.ok());
  Workspace ws;
  auto missing = executor->Run({}, ws);
  EXPECT_NE(std::string(missing.status().message()).find("no feed for data input 'x'"), std::string::npos);
  auto mistyped = executor->Run({{"x", Tensor::Zeros({{5}, DataType::kFloat32})}}, ws);
  EXPECT_NE(std::string(mistyped.status().message()).find("f32[5]"), std::string::npos) << mistyped.status();
}

TEST(InitializerTest, SameSeedAndNameGiveSameTensorWhateverTheProgram) {
  ir::Program p1, p2;
  ir::Builder b1(&p1), b2(&p2);
  b1.Parameter("w", {{64}, DataType::kFloat32}, "normal(0.02)");
  b2.Parameter("other", {{8}, DataType::kFloat32}, "zeros");
  b2.Parameter("w", {{64}, DataType::kFloat32}, "normal(0.02)");
  Workspace ws1, ws2, ws3;
  ASSERT_TRUE(InitializeWorkspace(p1, 7, ws1).ok());
  ASSERT_TRUE(InitializeWorkspace(p2, 7, ws2).ok());
  ASSERT_TRUE(InitializeWorkspace(p1, 8, ws3).ok());
  double sum_sq = 0;
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(ws1.at("w").At(i), ws2.at("w").At(i));
    sum_sq += ws1.at("w").At(i) * ws1.at("w").At(i);
  }
  EXPECT_NE(ws1.at("w").At(0), ws3.at("w").At(0));
  // The standard deviation is about 0.02 (64 samples: within a factor of 1.5).
  EXPECT_GT(std::sqrt(sum_sq / 64), 0.02 / 1.5);
  EXPECT_LT(std::sqrt(sum_sq / 64), 0.02 * 1.5);
}

// A large tensor is filled on all cores in chunks, each starting its multi-index walk where its
// chunk begins: every element must be the one a single thread gives.
TEST(InitializerTest, ALargeTensorIsTheSameOnOneThreadAndOnMany) {
  ir::Program p;
  ir::Builder b(&p);
  b.Parameter("w", {{37, 61, 97}, DataType::kFloat32}, "normal(0.02)");  // 218,929 elements
  b.Parameter("u", {{300, 1001}, DataType::kBFloat16}, "uniform(0.5)");
  Workspace serial, parallel;
  const int threads = KernelThreadsOfThisThread();
  SetKernelThreadsOfThisThread(1);
  ASSERT_TRUE(InitializeWorkspace(p, 3, serial).ok());
  SetKernelThreadsOfThisThread(4);
  ASSERT_TRUE(InitializeWorkspace(p, 3, parallel).ok());
  SetKernelThreadsOfThisThread(threads);
  for (const char* name : {"w", "u"}) {
    const Tensor& a = serial.at(name);
    const Tensor& c = parallel.at(name);
    ASSERT_EQ(a.num_bytes(), c.num_bytes()) << name;
    EXPECT_EQ(std::memcmp(a.raw(), c.raw(), static_cast<size_t>(a.num_bytes())), 0) << name;
  }
  EXPECT_NE(serial.at("w").At(0), serial.at("w").At(1));
}

TEST(InitializerTest, BadInitStringNamesTheValue) {
  ir::Program p;
  ir::Builder b(&p);
  b.Parameter("w", {{4}, DataType::kFloat32}, "gaussian(1)");
  Workspace ws;
  absl::Status status = InitializeWorkspace(p, 1, ws);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("'w'"), std::string::npos);
  EXPECT_NE(std::string(status.message()).find("gaussian(1)"), std::string::npos);
}

}  // namespace
}  // namespace pdist::exec
