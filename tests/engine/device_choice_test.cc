// The rank's GPU under each launcher: its local index from the first launcher variable set, the
// MPI launchers' before Slurm's (only LOCAL_RANK was read: under srun or mpirun every rank of a
// node took GPU 0, which NCCL refuses as a duplicate GPU).
#include "engine/device_choice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace pdist::engine {
namespace {

constexpr const char* kVariables[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};

// Clears the launcher variables for a test and puts the process's own values back after it.
class LocalRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVariables) {
      const char* value = std::getenv(v);
      saved_.push_back(value != nullptr ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i]) {
        setenv(kVariables[i], saved_[i]->c_str(), 1);
      } else {
        unsetenv(kVariables[i]);
      }
    }
  }
  std::vector<std::optional<std::string>> saved_;
};

TEST_F(LocalRankTest, EachLauncherSaysTheRanksIndexOnItsNode) {
  absl::StatusOr<std::optional<int>> none = LocalRankFromEnv();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  for (const char* v : kVariables) {
    setenv(v, "3", 1);
    absl::StatusOr<std::optional<int>> rank = LocalRankFromEnv();
    ASSERT_TRUE(rank.ok()) << v << ": " << rank.status();
    EXPECT_EQ(*rank, 3) << v;
    unsetenv(v);
  }
}

TEST_F(LocalRankTest, LocalRankComesFirstAndABadValueIsNamed) {
  // mpirun inside an sbatch script: the batch step's SLURM_LOCALID is 0 on every rank.
  setenv("SLURM_LOCALID", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  absl::StatusOr<std::optional<int>> mpi = LocalRankFromEnv();
  ASSERT_TRUE(mpi.ok()) << mpi.status();
  EXPECT_EQ(*mpi, 1);
  setenv("LOCAL_RANK", "2", 1);
  absl::StatusOr<std::optional<int>> local = LocalRankFromEnv();
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local, 2);
  setenv("LOCAL_RANK", "gpu2", 1);
  absl::StatusOr<std::optional<int>> bad = LocalRankFromEnv();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("LOCAL_RANK='gpu2' is not a GPU index"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace pdist::engine
