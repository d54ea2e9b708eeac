#include <gtest/gtest.h>
#include <iostream>
#include "engine/distributed_programs.h"
#include "passes/partition.h"
#include "ir/printer.h"
#include "tests/engine/distributed_test_util.h"
namespace pdist::engine {
TEST(ZZDebug, Dump) {
  const char* env = std::getenv("PDIST_DEBUG_STRATEGY");
  if (env == nullptr) GTEST_SKIP();
  ir::Program model = testing::BuildSmallModel(std::getenv("PDIST_DEBUG_MODEL") ? std::getenv("PDIST_DEBUG_MODEL") : "gpt", ir::DataType::kFloat32, 4, 8);
  auto s = strategy::ParseStrategy(env);
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = BuildDistributedPrograms(model, *s, {});
  ASSERT_TRUE(p.ok()) << p.status();
  passes::ReshardPlanCache plans;
  int rank = std::atoi(std::getenv("PDIST_DEBUG_RANK"));
  auto local = passes::PartitionProgram(p->train, rank, plans);
  ASSERT_TRUE(local.ok()) << local.status();
  ir::ValueNumbering n(*local);
  for (const ir::Value* a : local->block().arguments()) std::cout << "arg " << n.Name(a) << " " << a->name() << " " << (a->dist_attr() ? a->dist_attr()->ToString() : "") << "\n";
  int i = 0;
  for (const auto& op : local->block().ops()) {
    std::cout << i++ << " [" << ir::OpRoleName(op->role()) << " c" << op->chunk() << "] " << ir::PrintOperation(*op, n) << "\n";
  }
}
}
