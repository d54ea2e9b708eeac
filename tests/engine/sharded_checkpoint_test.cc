// Sharded checkpoints: each rank writes only what it owns, and a run saved under dp2 × mp2 ×
// ZeRO-3 resumes under mp4, pp2 and one rank with the losses and parameters of a run that was
// never interrupted (float64, 1e-10). Damage and half-finished saves are named, not loaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint_format.h"
#include "engine/shard_index.h"
#include "engine/shard_io.h"
#include "engine/sharded_checkpoint.h"
#include "tests/engine/distributed_test_util.h"
#include "tests/testing/temp_path.h"

namespace pdist::engine {
namespace {

using testing::RunOutcome;

constexpr int64_t kSteps = 10, kSaveAt = 5;

ir::Program Model() { return testing::BuildSmallModel("gpt", ir::DataType::kFloat64, /*layers=*/2, /*batch=*/8); }

exec::Feeds Batch(const ir::Program& model, int64_t step) {
  return testing::RandomTokenBatch(model, step, testing::kSmallVocab);
}

// Steps [from, to) on `engine`, their losses appended to `losses`.
void Train(Engine& engine, const ir::Program& model, int64_t from, int64_t to, std::vector<double>& losses) {
  for (int64_t s = from; s < to; ++s) {
    auto r = engine.TrainStep(Batch(model, s));
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back(r->loss);
  }
}

std::unique_ptr<Engine> Make(const ir::Program& model, const std::string& strategy) {
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = strategy;
  auto engine = Engine::Create(model.Clone(), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Saves under `saving` after kSaveAt steps, checks that the files hold each tensor once (no whole
// copy anywhere, no replica writing its shard twice), and resumes under each of `resuming`: the
// losses and the state after kSteps are those of a run without the interruption.
void ExpectResumesAsIfUninterrupted(const std::string& saving, int64_t files_expected,
                                    const std::vector<std::string>& resuming) {
  const ir::Program model = Model();
  RunOutcome uninterrupted;
  {
    std::unique_ptr<Engine> e = Make(model, "{}");
    ASSERT_NE(e, nullptr);
    Train(*e, model, 0, kSteps, uninterrupted.losses);
    auto state = e->WholeState();
    ASSERT_TRUE(state.ok()) << state.status();
    uninterrupted.state = std::move(*state);
  }
  const std::string dir = pdist::testing::UniqueTempPath("zero3.ckpt");
  std::vector<double> first;
  {
    std::unique_ptr<Engine> e = Make(model, saving);
    ASSERT_NE(e, nullptr);
    Train(*e, model, 0, kSaveAt, first);
    ASSERT_TRUE(e->Save(dir).ok());
  }
  int64_t file_bytes = 0, files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".ckpt") continue;
    file_bytes += static_cast<int64_t>(f.file_size());
    ++files;
  }
  EXPECT_EQ(files, files_expected);
  int64_t state_bytes = 0;
  for (const auto& [name, t] : uninterrupted.state) state_bytes += t.num_bytes();
  EXPECT_GE(file_bytes, state_bytes);
  EXPECT_LT(file_bytes, state_bytes * 11 / 10) << "a state is written more than once";

  for (const std::string& strategy : resuming) {
    SCOPED_TRACE(strategy);
    std::unique_ptr<Engine> e = Make(model, strategy);
    ASSERT_NE(e, nullptr);
    const absl::Status loaded = e->Load(dir);
    ASSERT_TRUE(loaded.ok()) << loaded;
    EXPECT_EQ(e->step(), kSaveAt);
    RunOutcome resumed;
    resumed.losses = first;
    Train(*e, model, kSaveAt, kSteps, resumed.losses);
    auto state = e->WholeState();
    ASSERT_TRUE(state.ok()) << state.status();
    resumed.state = std::move(*state);
    testing::ExpectSameTraining(resumed, uninterrupted, model, 1e-10);
  }
}

// ZeRO-3 shards every state over dp and mp: each of the 4 ranks writes its own file.
TEST(ShardedCheckpointTest, ZeroThreeSaveResumesUnderOtherStrategiesAsIfUninterrupted) {
  ExpectResumesAsIfUninterrupted(R"({"dp_degree": 2, "mp_degree": 2, "sharding": {"enable": true, "stage": 3}})", 4,
                                 {R"({"mp_degree": 4})", R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}})", "{}"});
}

// Hybrid ZeRO-3 over pairs of dp 4: the replicas hold the same shards, and only one of them
// writes each (2 files); it loads under ZeRO-3 over all 4 and on one rank.
TEST(ShardedCheckpointTest, HybridZeroThreeWritesEachShardOnce) {
  ExpectResumesAsIfUninterrupted(R"({"dp_degree": 4, "sharding": {"enable": true, "stage": 3, "degree": 2}})", 2,
                                 {R"({"dp_degree": 4, "sharding": {"enable": true, "stage": 3}})", "{}"});
}

// A rank reads the byte ranges of the pieces it needs, not whole files: one rank needs every
// piece and reads exactly the files' bytes (every header and block, none twice); each of two
// pipeline stages reads its own layers' pieces, well under all of it, and together they read
// each piece once.
TEST(ShardedCheckpointTest, EachRankReadsOnlyThePiecesItNeeds) {
  const ir::Program model = Model();
  const std::string dir = pdist::testing::UniqueTempPath("ranges.ckpt");
  {
    std::unique_ptr<Engine> e = Make(model, R"({"dp_degree": 2, "mp_degree": 2, "sharding": {"enable": true, "stage": 3}})");
    ASSERT_NE(e, nullptr);
    ASSERT_TRUE(e->Save(dir).ok());
  }
  int64_t file_bytes = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() == ".ckpt") file_bytes += static_cast<int64_t>(f.file_size());
  }
  auto read_by_each_rank = [&](const std::string& strategy) {
    std::vector<int64_t> bytes;
    std::unique_ptr<Engine> e = Make(model, strategy);
    if (e == nullptr) return bytes;
    for (const auto& runner : e->local_ranks()) {
      int64_t read = 0;
      auto pieces = ReadShardsFor(dir, runner->train_program(), runner->rank(), e->train_program(), &read);
      EXPECT_TRUE(pieces.ok()) << pieces.status();
      bytes.push_back(read);
    }
    return bytes;
  };
  const std::vector<int64_t> one = read_by_each_rank("{}");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], file_bytes);
  const std::vector<int64_t> stages = read_by_each_rank(R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}})");
  ASSERT_EQ(stages.size(), 2u);
  for (int64_t read : stages) EXPECT_LT(read, file_bytes * 3 / 4);
  EXPECT_LE(stages[0] + stages[1], file_bytes + 4 * kCheckpointHeaderBytes);  // headers may be read by both
  std::printf("files %lld bytes; one rank read %lld; pp2 stages read %lld and %lld\n", static_cast<long long>(file_bytes),
              static_cast<long long>(one[0]), static_cast<long long>(stages[0]), static_cast<long long>(stages[1]));

  // An index whose byte ranges point at another piece's block: named, not loaded as the wrong numbers.
  const std::string index_path = (std::filesystem::path(dir) / kShardIndexFile).string();
  std::ifstream in(index_path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto index = DecodeShardIndex(text, index_path);
  ASSERT_TRUE(index.ok()) << index.status();
  std::vector<ShardPiece*> in_file0;
  for (auto& [name, t] : index->tensors) {
    for (ShardPiece& p : t.pieces) {
      if (p.file == 0) in_file0.push_back(&p);
    }
  }
  ASSERT_GE(in_file0.size(), 2u);
  std::swap(in_file0[0]->byte_offset, in_file0[1]->byte_offset);
  std::swap(in_file0[0]->byte_size, in_file0[1]->byte_size);
  std::ofstream(index_path) << EncodeShardIndex(*index);
  const absl::Status swapped = LoadCheckpoint(dir).status();
  EXPECT_NE(swapped.message().find("its index says"), std::string::npos) << swapped;
  const std::string bad_range = R"({"format": "pdist-sharded-checkpoint", "version": 1, "step": 0, "files": ["rank0.ckpt"],
      "tensors": {"w": {"dtype": "f32", "shape": [2], "pieces": [{"file": 0, "offsets": [0], "sizes": [2], "bytes": [-1, 8]}]}}})";
  const absl::Status refused = DecodeShardIndex(bad_range, "index").status();
  EXPECT_NE(refused.message().find("'bytes' must be [offset, size]"), std::string::npos) << refused;
  // A key pdist does not write, at any level, is named (it was skipped).
  const std::string whole = R"({"format": "pdist-sharded-checkpoint", "version": 1, "step": 0, "files": ["rank0.ckpt"],
      "tensors": {"w": {"dtype": "f32", "shape": [2], "pieces": [{"file": 0, "offsets": [0], "sizes": [2]}]}}})";
  ASSERT_TRUE(DecodeShardIndex(whole, "index").ok());
  for (const auto& [from, to, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {R"("step": 0,)", R"("step": 0, "zzz": 1,)", "index: unknown key 'zzz'"},
           {R"("shape": [2],)", R"("shape": [2], "layout": "nhwc",)", "index: tensor 'w': unknown key 'layout'"},
           {R"("sizes": [2])", R"("sizes": [2], "crc": 7)", "piece: unknown key 'crc'"}}) {
    std::string text = whole;
    text.replace(text.find(from), from.size(), to);
    const absl::Status status = DecodeShardIndex(text, "index").status();
    EXPECT_NE(status.message().find(message), std::string::npos) << status;
  }
}

// An engine under `strategy` after two steps, saved into `dir`; null (with a failure) otherwise.
std::unique_ptr<Engine> SavedAfterTwoSteps(const ir::Program& model, const std::string& strategy, const std::string& dir) {
  std::unique_ptr<Engine> e = Make(model, strategy);
  if (e == nullptr) return nullptr;
  std::vector<double> losses;
  Train(*e, model, 0, 2, losses);
  const absl::Status saved = e->Save(dir);
  EXPECT_TRUE(saved.ok()) << saved;
  return saved.ok() ? std::move(e) : nullptr;
}

// `engine`'s whole state is `expected`, bit for bit.
void ExpectSameState(const Engine& engine, const exec::Workspace& expected) {
  auto state = engine.WholeState();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->size(), expected.size());
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(state->contains(name)) << name;
    const exec::Tensor& back = state->at(name);
    ASSERT_EQ(back.num_bytes(), t.num_bytes()) << name;
    EXPECT_EQ(std::memcmp(back.data<char>(), t.data<char>(), static_cast<size_t>(t.num_bytes())), 0) << name;
  }
}

TEST(ShardedCheckpointTest, HalfFinishedStaleAndDamagedSavesAreNamed) {
  const ir::Program model = Model();
  const std::string dir = pdist::testing::UniqueTempPath("dp2.ckpt");
  std::unique_ptr<Engine> e = SavedAfterTwoSteps(model, R"({"dp_degree": 2, "sharding": {"enable": true, "stage": 1}})", dir);
  ASSERT_NE(e, nullptr);
  std::vector<double> losses;
  ASSERT_TRUE(LoadCheckpoint(dir).ok());
  const std::string index = (std::filesystem::path(dir) / kShardIndexFile).string();
  const std::string rank1 = (std::filesystem::path(dir) / "rank1.ckpt").string();

  // A file from another save: its step is not the index's. (The next save writes the other set
  // of files and removes this one once its index is in place.)
  const std::string kept = dir + ".rank1";
  std::filesystem::copy_file(rank1, kept);
  Train(*e, model, 2, 3, losses);
  ASSERT_TRUE(e->Save(dir).ok());
  const std::string rank1_now = (std::filesystem::path(dir) / "rank1.alt.ckpt").string();
  ASSERT_TRUE(std::filesystem::exists(rank1_now));
  EXPECT_FALSE(std::filesystem::exists(rank1));
  std::filesystem::copy_file(kept, rank1_now, std::filesystem::copy_options::overwrite_existing);
  absl::Status stale = LoadCheckpoint(dir).status();
  EXPECT_NE(stale.message().find("is of step 2, its index of step 3"), std::string::npos) << stale;

  // A flipped byte in a piece: the file and the piece are named.
  {
    std::fstream f(rank1_now, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-20, std::ios::end);
    f.put('\x5a');
  }
  auto before = e->WholeState();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::Status damaged = e->Load(dir);
  EXPECT_FALSE(damaged.ok());
  EXPECT_NE(damaged.message().find("rank1.alt.ckpt"), std::string::npos) << damaged;
  // Rank 0's pieces (the parameters and its half of the optimizer states) read fine, rank 1's
  // did not, and neither rank took them: the ranks had loaded, each, what it read (a model from
  // two checkpoints, which a save then wrote out as one). And a file's error does not abort the
  // communicators: the engine goes on (every later call said "communicator 'world' was aborted").
  ExpectSameState(*e, *before);
  EXPECT_EQ(e->step(), 3);
  absl::StatusOr<double> after = e->EvalStep(testing::RandomTokenBatch(model, 0, testing::kSmallVocab));
  EXPECT_TRUE(after.ok()) << after.status();

  // One rank's file given where the directory belongs: said so (it lacked the other ranks' tensors).
  const absl::Status one_file = e->Load(rank1_now);
  EXPECT_NE(one_file.message().find("is one rank's file of the sharded checkpoint"), std::string::npos) << one_file;

  // No index: a save that did not finish is not a checkpoint.
  std::filesystem::remove(index);
  absl::Status half = e->Load(dir);
  EXPECT_NE(half.message().find("without index.json"), std::string::npos) << half;

  // An index that is not one.
  std::ofstream(index) << R"({"format": "pdist-sharded-checkpoint", "version": 7})";
  absl::Status version = LoadCheckpoint(dir).status();
  EXPECT_NE(version.message().find("version 7 is not supported"), std::string::npos) << version;
  std::ofstream(index) << R"({"format": "pdist-sharded-checkpoint", "version": 1, "step": 3, "files": ["../x"],
                              "tensors": {}})";
  absl::Status escape = LoadCheckpoint(dir).status();
  EXPECT_NE(escape.message().find("plain file names"), std::string::npos) << escape;
  // Saving over an index that cannot be read: refused, not guessed (a guess could overwrite the
  // files of a checkpoint that is fine).
  absl::Status over = e->Save(dir);
  EXPECT_EQ(over.code(), absl::StatusCode::kFailedPrecondition) << over;
  EXPECT_NE(over.message().find("index.json cannot be read"), std::string::npos) << over;
}

// A save that fails part-way (here a directory where rank 1's new file goes; on a real run a
// full disk or a kill) leaves the last checkpoint loadable with its own numbers: a save used to
// remove the old index first, so a failed `--load ck --save ck` lost both. Saving again, and
// twice at one step, alternates between the two sets of files and keeps only the committed one.
TEST(ShardedCheckpointTest, AFailedSaveLeavesTheLastCheckpointLoadable) {
  const ir::Program model = Model();
  const std::string dir = pdist::testing::UniqueTempPath("resume.ckpt");
  std::unique_ptr<Engine> e = SavedAfterTwoSteps(model, R"({"dp_degree": 2, "sharding": {"enable": true, "stage": 3}})", dir);
  ASSERT_NE(e, nullptr);
  std::vector<double> losses;
  auto saved = e->WholeState();
  ASSERT_TRUE(saved.ok()) << saved.status();

  Train(*e, model, 2, 3, losses);
  const auto blocker = std::filesystem::path(dir) / "rank1.alt.ckpt.tmp";
  std::filesystem::create_directory(blocker);
  EXPECT_FALSE(e->Save(dir).ok());
  EXPECT_TRUE(e->EvalStep(Batch(model, 0)).ok());  // the ranks' communicators still work
  std::unique_ptr<Engine> resumed = Make(model, "{}");
  ASSERT_NE(resumed, nullptr);
  const absl::Status loaded = resumed->Load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(resumed->step(), 2);
  ExpectSameState(*resumed, *saved);

  std::filesystem::remove(blocker);
  // At step 3, twice: each save writes the set the last one did not and leaves only its own.
  for (const char* set : {".alt.ckpt", ".ckpt"}) {
    ASSERT_TRUE(e->Save(dir).ok());
    absl::StatusOr<Checkpoint> whole = LoadCheckpoint(dir);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(whole->step, 3);
    std::vector<std::string> names;
    for (const auto& f : std::filesystem::directory_iterator(dir)) names.push_back(f.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{".pdist-save.lock", "index.json", absl::StrCat("rank0", set),
                                               absl::StrCat("rank1", set)}));
  }
}

// Two saves into one directory at once (two jobs, two engines) wrote the same files and
// committed a checkpoint mixed from both, or none: rank 0 holds the directory's lock from
// choosing the files to the commit, and a second save meanwhile is refused, writing nothing.
TEST(ShardedCheckpointTest, ASecondSaveIntoTheDirectoryMeanwhileIsRefused) {
  const ir::Program model = Model();
  const std::string dir = pdist::testing::UniqueTempPath("locked.ckpt");
  std::unique_ptr<Engine> e = SavedAfterTwoSteps(model, R"({"dp_degree": 2})", dir);
  ASSERT_NE(e, nullptr);
  std::vector<double> losses;
  Train(*e, model, 2, 3, losses);
  {
    absl::StatusOr<CheckpointSaveLock> other = CheckpointSaveLock::Take(dir);  // another save, midway
    ASSERT_TRUE(other.ok()) << other.status();
    const absl::Status refused = e->Save(dir);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_NE(refused.message().find("another save into it is running"), std::string::npos) << refused;
    absl::StatusOr<Checkpoint> kept = LoadCheckpoint(dir);
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_EQ(kept->step, 2);
    EXPECT_TRUE(e->EvalStep(Batch(model, 0)).ok());  // the engine goes on
  }
  // The lock goes with its holder (the kernel drops it when a process exits, however it exits).
  ASSERT_TRUE(e->Save(dir).ok());
  absl::StatusOr<Checkpoint> saved = LoadCheckpoint(dir);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->step, 3);
}

std::string Bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A directory of symbolic links to another checkpoint's files, loaded and saved into: the save
// replaces the links with files of its own. It wrote the index through its link, so the other
// checkpoint's index named files that were never written there.
TEST(ShardedCheckpointTest, SavingIntoLinksToAnotherCheckpointLeavesThatOneAlone) {
  const ir::Program model = Model();
  const std::filesystem::path original = pdist::testing::UniqueTempPath("original.ckpt");
  std::unique_ptr<Engine> e = SavedAfterTwoSteps(model, "{}", original.string());
  ASSERT_NE(e, nullptr);
  const std::filesystem::path links = pdist::testing::UniqueTempPath("links.ckpt");
  std::filesystem::create_directory(links);
  std::map<std::string, std::string> bytes;
  for (const auto& f : std::filesystem::directory_iterator(original)) {  // as `cp -rs` copies it
    const std::string name = f.path().filename().string();
    bytes[name] = Bytes(f.path());
    std::filesystem::create_symlink(f.path(), links / name);
  }
  ASSERT_EQ(bytes.size(), 3u);  // index.json, rank0.ckpt, and the save lock (a link refused the save)
  ASSERT_TRUE(e->Load(links.string()).ok());
  std::vector<double> losses;
  Train(*e, model, 2, 3, losses);
  ASSERT_TRUE(e->Save(links.string()).ok());
  for (const auto& [name, before] : bytes) EXPECT_EQ(Bytes(original / name), before) << name;
  EXPECT_FALSE(std::filesystem::is_symlink(links / kShardIndexFile));
  absl::StatusOr<Checkpoint> kept = LoadCheckpoint(original.string());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->step, 2);
  absl::StatusOr<Checkpoint> saved = LoadCheckpoint(links.string());
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->step, 3);
}

// What a save would refuse, named before the training whose end it is (pdist-train --save
// checks it first): it trained to the end and then lost the run.
TEST(ShardedCheckpointTest, ASaveTargetThatWouldFailIsNamedBeforeTraining) {
  const std::filesystem::path root = pdist::testing::UniqueTempPath("targets");
  std::filesystem::create_directories(root);
  const std::filesystem::path fresh = root / "new" / "ck";
  EXPECT_TRUE(CheckSaveTarget(fresh.string()).ok());
  EXPECT_TRUE(std::filesystem::is_directory(fresh));

  std::ofstream(root / "file") << "x";
  const absl::Status file = CheckSaveTarget((root / "file").string());
  EXPECT_NE(file.message().find("is a file: a checkpoint is a directory"), std::string::npos) << file;

  std::filesystem::create_directories(root / "foreign");
  std::ofstream(root / "foreign" / kShardIndexFile) << R"({"my": "data"})";
  const absl::Status foreign = CheckSaveTarget((root / "foreign").string());
  EXPECT_EQ(foreign.code(), absl::StatusCode::kFailedPrecondition) << foreign;
  EXPECT_NE(foreign.message().find("index.json cannot be read"), std::string::npos) << foreign;

  for (const char* name : {"rank0.alt.ckpt.tmp", "rank3.ckpt", "index.json"}) {
    const std::filesystem::path dir = root / absl::StrCat("blocked-", name);
    std::filesystem::create_directories(dir / name);
    const absl::Status blocked = CheckSaveTarget(dir.string());
    EXPECT_NE(blocked.message().find(absl::StrCat(name, "' is a directory where the save writes a file")),
              std::string::npos)
        << blocked;
  }

  // A save that fails anyway — before any rank writes (the path is a file) or while they do
  // (a directory where rank 1's file goes) — is an error, not an abort: the ranks, threads here,
  // go on (every later call said "communicator 'world' was aborted").
  const ir::Program model = Model();
  std::unique_ptr<Engine> e = Make(model, R"({"dp_degree": 2, "sharding": {"enable": true, "stage": 1}})");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->Save((root / "file").string()).ok());
  std::filesystem::create_directories(root / "midway" / "rank1.ckpt.tmp");
  const absl::Status midway = e->Save((root / "midway").string());
  EXPECT_NE(midway.message().find("rank1.ckpt.tmp"), std::string::npos) << midway;
  absl::StatusOr<StepResult> step = e->TrainStep(Batch(model, 0));
  EXPECT_TRUE(step.ok()) << step.status();
}

// Brute force: every overlap of two random boxes of a random 3-D tensor, element by element.
TEST(CopyOverlapTest, MatchesElementwiseCopyOnRandomBoxes) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const ir::Shape global = {static_cast<int64_t>(rng() % 5 + 1), static_cast<int64_t>(rng() % 5 + 1),
                              static_cast<int64_t>(rng() % 5 + 1)};
    auto box = [&] {
      ir::LocalSlice b;
      for (int64_t n : global) {
        const int64_t lo = static_cast<int64_t>(rng() % static_cast<uint32_t>(n));
        b.offsets.push_back(lo);
        b.sizes.push_back(static_cast<int64_t>(rng() % static_cast<uint32_t>(n - lo)) + 1);
      }
      return b;
    };
    const ir::LocalSlice a = box(), b = box();
    auto value = [&](int64_t i, int64_t j, int64_t k) { return static_cast<int>((i * global[1] + j) * global[2] + k); };
    std::vector<int> src(static_cast<size_t>(a.sizes[0] * a.sizes[1] * a.sizes[2]));
    for (int64_t i = 0; i < a.sizes[0]; ++i)
      for (int64_t j = 0; j < a.sizes[1]; ++j)
        for (int64_t k = 0; k < a.sizes[2]; ++k)
          src[static_cast<size_t>((i * a.sizes[1] + j) * a.sizes[2] + k)] = value(a.offsets[0] + i, a.offsets[1] + j, a.offsets[2] + k);
    std::vector<int> dst(static_cast<size_t>(b.sizes[0] * b.sizes[1] * b.sizes[2]), -1);
    const int64_t copied = CopyOverlap(reinterpret_cast<const char*>(src.data()), a, reinterpret_cast<char*>(dst.data()), b,
                                       sizeof(int));
    int64_t expected = 0;
    for (int64_t i = 0; i < b.sizes[0]; ++i) {
      for (int64_t j = 0; j < b.sizes[1]; ++j) {
        for (int64_t k = 0; k < b.sizes[2]; ++k) {
          const int64_t gi = b.offsets[0] + i, gj = b.offsets[1] + j, gk = b.offsets[2] + k;
          const bool inside = gi >= a.offsets[0] && gi < a.offsets[0] + a.sizes[0] && gj >= a.offsets[1] &&
                              gj < a.offsets[1] + a.sizes[1] && gk >= a.offsets[2] && gk < a.offsets[2] + a.sizes[2];
          expected += inside ? 1 : 0;
          ASSERT_EQ(dst[static_cast<size_t>((i * b.sizes[1] + j) * b.sizes[2] + k)], inside ? value(gi, gj, gk) : -1)
              << "trial " << trial;
        }
      }
    }
    EXPECT_EQ(copied, expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace pdist::engine
