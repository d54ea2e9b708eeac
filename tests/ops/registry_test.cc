// Every registered op is complete: shape inference, cost, SPMD rules, a gradient (or a stated
// reason for none), and a CPU kernel. A new op that misses a piece fails here by name.
#include <gtest/gtest.h>

#include "executor/kernel.h"
#include "ir/op_def.h"

namespace pdist {
namespace {

TEST(OpRegistryTest, EveryOpHasACpuKernel) {
  const exec::KernelRegistry& kernels = exec::KernelRegistry::Global();
  std::vector<std::string> missing;
  for (const std::string& name : ir::OpRegistry::Global().Names()) {
    if (kernels.Find(exec::DeviceType::kCPU, name) == nullptr) missing.push_back(name);
  }
  EXPECT_TRUE(missing.empty()) << "ops without a CPU kernel: " << ::testing::PrintToString(missing);
}

TEST(OpRegistryTest, EveryKernelBelongsToARegisteredOp) {
  std::vector<std::string> orphans;
  for (const std::string& name : exec::KernelRegistry::Global().OpTypes(exec::DeviceType::kCPU)) {
    if (ir::OpRegistry::Global().Find(name) == nullptr) orphans.push_back(name);
  }
  EXPECT_TRUE(orphans.empty()) << "kernels of unknown ops: " << ::testing::PrintToString(orphans);
}

TEST(OpRegistryTest, EveryOpIsCompleteAndGradientOpsAreNamedSo) {
  for (const std::string& name : ir::OpRegistry::Global().Names()) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(name);
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->infer_meta) << name;
    EXPECT_TRUE(def->cost) << name;
    EXPECT_TRUE(def->infer_spmd && def->infer_spmd_reverse && def->describe_spmd) << name;
    if (def->grad_kind == ir::GradKind::kDifferentiable) {
      EXPECT_TRUE(def->grad) << name;
    }
    // A *_grad op is a gradient op: it must not claim a gradient of its own.
    if (name.size() > 5 && name.substr(name.size() - 5) == "_grad") {
      EXPECT_EQ(def->grad_kind, ir::GradKind::kGradientOp) << name;
    }
  }
}

TEST(OpRegistryTest, FoundationOpsAreAllThere) {
  const char* required[] = {
      "matmul", "add", "subtract", "multiply", "divide", "maximum", "greater_than", "less_than", "equal",
      "scale", "relu", "gelu", "silu", "tanh", "exp", "softmax", "log_softmax", "layer_norm", "rms_norm",
      "embedding", "reshape", "unsqueeze", "squeeze", "transpose", "split", "split_with_num", "concat", "slice",
      "sum", "mean", "max", "min", "cast", "full", "dropout", "cross_entropy_with_softmax", "fused_rope",
      "flash_attn", "sgd", "momentum", "adamw"};
  for (const char* name : required) EXPECT_NE(ir::OpRegistry::Global().Find(name), nullptr) << name;
}

}  // namespace
}  // namespace pdist
