// The search against brute force: on small clusters every candidate of the space is estimated
// without bounds and the planner's pick must be the fastest that fits (or a simpler one within
// the tie tolerance); fixed choices are honoured; nothing fitting is an error naming the
// leanest plan.
#include "planner/search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_format.h"
#include "passes/distributed_programs.h"

namespace pdist::planner {
namespace {

PlannedModel Gpt(const std::string& spec, int64_t batch) { return *ModelFromSpec(spec, batch); }

// `devices` A100s with `memory_gb` each, 4 per node so that some groups cross nodes.
strategy::Cluster SmallCluster(int64_t devices, double memory_gb) {
  strategy::Cluster c = *strategy::ClusterPreset("dgx-a100", 8);
  c.devices_per_node = std::min<int64_t>(devices, 4);
  c.nodes = devices / c.devices_per_node;
  c.device.memory = memory_gb * 1e9;
  return c;
}

// Every candidate of the search space, estimated without pruning; the fastest that fits (and in
// `leanest`, where given, the one that needs least memory, priced whole).
std::optional<Estimate> BruteForce(const PlannedModel& model, const strategy::Cluster& cluster, int64_t* count,
                                   std::optional<Estimate>* leanest = nullptr) {
  Profiler profiler(model, cluster);
  std::optional<Estimate> best;
  const EstimateOptions whole{.prune_by_memory = false};
  const int64_t n = cluster.num_devices(), batch = model.global_batch;
  for (int64_t mp = 1; mp <= cluster.devices_per_node; ++mp) {
    for (int64_t pp = 1; pp <= model.layers; ++pp) {
      if (n % (mp * pp) != 0) continue;
      const int64_t dp = n / (mp * pp);
      for (int64_t b = 1; b <= batch; ++b) {
        if (batch % (dp * b) != 0) continue;
        const int64_t m = batch / (dp * b);
        for (int sp = 0; sp <= (mp > 1 ? 1 : 0); ++sp) {
          for (int schedule = 0; schedule < 3; ++schedule) {
            for (int64_t vpp = 1; vpp <= 8; ++vpp) {
              const auto mode = std::array{passes::ScheduleMode::k1F1B, passes::ScheduleMode::kZBH1,
                                           passes::ScheduleMode::kVPP}[schedule];
              if ((mode == passes::ScheduleMode::kVPP) != (vpp > 1) || (pp == 1 && schedule > 0)) continue;
              if (vpp > 1 && (m % pp != 0 || pp * vpp > model.layers + 2)) continue;
              for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                  Candidate c{.dp = dp, .mp = mp, .pp = pp, .vpp = vpp, .sp = sp == 1, .zero = zero,
                              .micro_batch = b, .micro_batches = m, .schedule = mode, .recompute = rc};
                  for (int64_t degree : ZeroDegreeChoices(c, cluster, {})) {
                    for (bool shards : {false, true}) {
                      if (shards && zero < 2) continue;
                      c.zero_degree = degree;
                      c.accumulate_shards = shards;
                      absl::StatusOr<Estimate> e = EstimateCandidate(c, model, cluster, profiler, whole);
                      if (!e.ok()) continue;  // a degree the shapes cannot take
                      ++*count;
                      if (leanest != nullptr && (!*leanest || e->memory.total() < (*leanest)->memory.total())) {
                        *leanest = *e;
                      }
                      if (e->fits && (!best || e->step_time < best->step_time)) best = *e;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return best;
}

void ExpectSearchMatchesBruteForce(const PlannedModel& model, const strategy::Cluster& cluster) {
  int64_t count = 0;
  const std::optional<Estimate> fastest = BruteForce(model, cluster, &count);
  ASSERT_TRUE(fastest.has_value());
  SearchOptions o;
  absl::StatusOr<SearchResult> r = Search(model, cluster, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Estimate& pick = r->best();
  EXPECT_TRUE(pick.fits);
  EXPECT_LE(pick.step_time, fastest->step_time * (1 + o.tie_tolerance))
      << "planner picked " << pick.candidate.ToString() << ", brute force " << fastest->candidate.ToString();
  EXPECT_LE(pick.candidate.Complexity(), fastest->candidate.Complexity());
  // The bounds let it simulate far fewer than the whole space.
  EXPECT_LT(r->simulated, count);
}

// Nothing fits: the plan named as the leanest is the one that needs least memory of the whole
// space, with what it needs, not a bound. (A user probe: a candidate whose bound was lowest was
// named, needing "at least" less than the capacity the error said it missed, and more than
// another plan needed.)
TEST(SearchTest, WhenNothingFitsTheLeanestPlanIsNamedWithWhatItNeeds) {
  const PlannedModel model = Gpt("gpt:layers=4,hidden=256,heads=4,vocab=512,seq=64", 16);
  int64_t count = 0;
  std::optional<Estimate> leanest;
  BruteForce(model, SmallCluster(4, 80), &count, &leanest);
  ASSERT_TRUE(leanest.has_value());
  // Below what the leanest needs, and below most candidates' bounds (one micro-batch in flight),
  // so that the search cuts their pricing short.
  const strategy::Cluster small = SmallCluster(4, leanest->memory.total() * 0.5 / 1e9);
  SearchOptions o;
  o.estimate.memory_margin = 0;
  absl::StatusOr<SearchResult> r = Search(model, small, o);
  ASSERT_FALSE(r.ok());
  const std::string message(r.status().message());
  EXPECT_NE(message.find(absl::StrFormat("needs %.3g GB", leanest->memory.total() / 1e9)), std::string::npos)
      << message << "\nbrute force: " << leanest->candidate.ToString();
  EXPECT_EQ(message.find("at least"), std::string::npos) << message;
}

TEST(SearchTest, MatchesBruteForceOnFourDevices) {
  ExpectSearchMatchesBruteForce(Gpt("gpt:layers=4,hidden=256,heads=4,vocab=512,seq=64", 16), SmallCluster(4, 80));
}

TEST(SearchTest, MatchesBruteForceWhenMemoryIsTight) {
  // 8 devices of 60 MB: the replicated model with AdamW does not fit; sharding, pipelining or
  // tensor parallelism must make room.
  const PlannedModel model = Gpt("gpt:layers=4,hidden=256,heads=8,vocab=1024,seq=64", 16);
  ExpectSearchMatchesBruteForce(model, SmallCluster(8, 0.06));
  absl::StatusOr<SearchResult> r = Search(model, SmallCluster(8, 0.06), {});
  ASSERT_TRUE(r.ok()) << r.status();
  const Candidate& c = r->best().candidate;
  EXPECT_TRUE(c.zero > 0 || c.pp > 1 || c.mp > 1) << c.ToString();
  EXPECT_FALSE(r->too_big.empty());
}

// Data parallelism over 4 ranks with 4 micro-batches of one sequence, ZeRO 2 and no recompute
// fixed, on devices that hold a quarter of the gradient sums but not all of them: only
// accumulated shards fit. Fixed to false, nothing does; fixed to true, every plan has them.
TEST(SearchTest, AccumulatedShardsFitWhereWholeGradientSumsDoNot) {
  const PlannedModel model = Gpt("gpt:layers=4,hidden=256,heads=8,vocab=1024,seq=64", 16);
  SearchOptions o;
  o.fixed.dp = 4;
  o.fixed.micro_batch = 1;
  o.fixed.zero = 2;
  o.fixed.recompute = Recompute::kNone;
  const strategy::Cluster roomy = SmallCluster(4, 80);
  absl::StatusOr<SearchResult> r = Search(model, roomy, o);
  ASSERT_TRUE(r.ok()) << r.status();
  double whole = 0, shards = 0;
  for (const Estimate& e : r->ranked) (e.candidate.accumulate_shards ? shards : whole) = e.memory.total();
  ASSERT_GT(whole, 0);
  ASSERT_GT(shards, 0);
  ASSERT_LT(shards, whole);
  const double capacity = (shards + whole) / 2;  // bytes between the two
  const strategy::Cluster tight = SmallCluster(4, capacity / 1e9 / (1 - o.estimate.memory_margin));
  r = Search(model, tight, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->best().candidate.accumulate_shards) << r->best().candidate.ToString();
  EXPECT_NE(r->best().candidate.ToString().find("acc-shards"), std::string::npos);
  o.fixed.accumulate_shards = false;
  EXPECT_FALSE(Search(model, tight, o).ok());
  o.fixed.accumulate_shards = true;
  r = Search(model, roomy, o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Estimate& e : r->ranked) EXPECT_TRUE(e.candidate.accumulate_shards) << e.candidate.ToString();
}

TEST(SearchTest, FixedChoicesAreKept) {
  const PlannedModel model = Gpt("gpt:layers=4,hidden=256,heads=4,vocab=512,seq=64", 16);
  SearchOptions o;
  o.fixed.mp = 2;
  o.fixed.pp = 2;
  o.fixed.schedule = passes::ScheduleMode::kZBH1;
  absl::StatusOr<SearchResult> r = Search(model, SmallCluster(8, 80), o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Estimate& e : r->ranked) {
    EXPECT_EQ(e.candidate.mp, 2);
    EXPECT_EQ(e.candidate.pp, 2);
    EXPECT_EQ(e.candidate.dp, 2);
    EXPECT_EQ(e.candidate.schedule, passes::ScheduleMode::kZBH1);
  }
  o.fixed.mp = 3;
  r = Search(model, SmallCluster(8, 80), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mp_degree 3 does not divide the 8 devices"), std::string::npos) << r.status();
}

// A fixed virtual-pipeline degree is tried whatever it is (the search alone stops at 8), and one
// the model cannot be cut into is an error that says why: NeMo's GPT-3 175B ran pp 8 × vpp 12
// (docs/benchmarks.md), which used to end in "no candidate could be built: " and nothing after.
TEST(SearchTest, AFixedVirtualPipelineDegreeIsTriedOrRefusedWithTheReason) {
  const PlannedModel model = Gpt("gpt:layers=24,hidden=256,heads=4,vocab=512,seq=64", 16);
  SearchOptions o;
  o.fixed.pp = 2;
  o.fixed.schedule = passes::ScheduleMode::kVPP;
  o.fixed.vpp = 12;
  o.fixed.micro_batches = 4;
  absl::StatusOr<SearchResult> r = Search(model, SmallCluster(8, 80), o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Estimate& e : r->ranked) EXPECT_EQ(e.candidate.vpp, 12);
  o.fixed.vpp = 40;  // 80 chunks of a model of 24 layers
  r = Search(model, SmallCluster(8, 80), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pp 2 vpp 40: 80 model chunks, but the model cuts into"), std::string::npos)
      << r.status();
  o.fixed.vpp = 3;  // the interleaved schedule takes a multiple of the stages in micro-batches: not 2 of 4
  o.fixed.micro_batches = 2;
  o.fixed.pp = 4;
  r = Search(model, SmallCluster(8, 80), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pp 4 vpp 3 with 2 micro-batches: "), std::string::npos) << r.status();
  // A degree fixed alone (schedule and pp the search's) makes every plan interleave: the layouts
  // without pipeline stages used to take it as vpp 1, and -o wrote that.
  SearchOptions alone;
  alone.fixed.vpp = 3;
  r = Search(model, SmallCluster(8, 80), alone);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->ranked.empty());
  for (const Estimate& e : r->ranked) {
    EXPECT_EQ(e.candidate.vpp, 3) << e.candidate.ToString();
    EXPECT_GT(e.candidate.pp, 1) << e.candidate.ToString();
  }
  alone.fixed.pp = 1;
  r = Search(model, SmallCluster(8, 80), alone);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pp 1: vpp 3 interleaves chunks of pipeline stages"), std::string::npos)
      << r.status();
}

// A fixed stage cut is priced as cut (a plan's own -o file reads back through --strategy), fixes
// pp × vpp to its stages, and a cut the planner cannot price, or that no layout can take, says why.
TEST(SearchTest, AFixedStageCutIsPricedAsGiven) {
  const PlannedModel model = Gpt("gpt:layers=4,hidden=256,heads=4,vocab=512,seq=64", 16);
  const SearchOptions balanced{.fixed = {.dp = 4, .pp = 2, .vpp = 1, .micro_batches = 4}};
  absl::StatusOr<SearchResult> free = Search(model, SmallCluster(8, 80), balanced);
  ASSERT_TRUE(free.ok()) << free.status();
  ASSERT_EQ(free->best().split_before.size(), 1u);
  // Fed back, the balanced plan's own cut is the same plan at the same price.
  SearchOptions again = balanced;
  again.fixed.split_before = free->best().split_before;
  absl::StatusOr<SearchResult> same = Search(model, SmallCluster(8, 80), again);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->best().candidate.ToString(), free->best().candidate.ToString());
  EXPECT_DOUBLE_EQ(same->best().step_time, free->best().step_time);
  // A lopsided cut (the embedding alone on stage 0) is priced as given, and slower.
  SearchOptions lopsided = balanced;
  lopsided.fixed.split_before = {"gpt.h.0.*"};
  absl::StatusOr<SearchResult> cut = Search(model, SmallCluster(8, 80), lopsided);
  ASSERT_TRUE(cut.ok()) << cut.status();
  for (const Estimate& e : cut->ranked) {
    EXPECT_EQ(e.split_before, std::vector<std::string>{"gpt.h.0.*"});
    EXPECT_EQ(e.candidate.pp * e.candidate.vpp, 2);
  }
  EXPECT_GT(cut->best().step_time, free->best().step_time);
  // Three marks: 4 virtual stages, as pp 4 or as pp 2 × vpp 2 — the degrees follow the cut.
  SearchOptions four;
  four.fixed.split_before = {"gpt.h.1.*", "gpt.h.2.*", "gpt.h.3.*"};
  absl::StatusOr<SearchResult> r = Search(model, SmallCluster(8, 80), four);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int64_t> pps;
  for (const Estimate& e : r->ranked) {
    EXPECT_EQ(e.candidate.pp * e.candidate.vpp, 4) << e.candidate.ToString();
    EXPECT_TRUE(passes::CheckExecutable(e.candidate.ToStrategy(e.split_before)).ok()) << e.candidate.ToString();
    pps.insert(e.candidate.pp);
  }
  EXPECT_EQ(pps, (std::set<int64_t>{2, 4}));
  auto error = [&model](const FixedChoices& fixed) {
    absl::StatusOr<SearchResult> failed = Search(model, SmallCluster(8, 80), {.fixed = fixed});
    EXPECT_FALSE(failed.ok());
    return failed.ok() ? std::string() : std::string(failed.status().message());
  };
  EXPECT_NE(error({.split_before = {"gpt.h.1.attn*"}}).find("'gpt.h.1.attn*' is not where a segment of gpt:layers=4"),
            std::string::npos);
  EXPECT_NE(error({.split_before = {"gpt.h.1.attn*"}}).find("cuts at 'gpt.h.0.*', 'gpt.h.1.*'"), std::string::npos);
  EXPECT_NE(error({.split_before = {"gpt.h.2.*", "gpt.h.1.*"}}).find("list the stages in program order"),
            std::string::npos);
  EXPECT_NE(error({.pp = 4, .split_before = {"gpt.h.2.*"}}).find("split_before makes 2 virtual stages, which need"),
            std::string::npos);
  EXPECT_NE(error({.pp = 2, .vpp = 1, .split_before = {"gpt.h.1.*", "gpt.h.2.*", "gpt.h.3.*"}})
                .find("pp 2: pipeline.split_before makes 4 virtual stages, 2 per stage, not vpp_degree 1"),
            std::string::npos);
}

// A section turned on with its details left to the search, and a detail that needs another:
// every plan keeps what was fixed (pdist-plan used to write ZeRO 1 for accumulated shards and
// drop them), and a search with no plan left lists every reason.
TEST(SearchTest, ASectionTurnedOnKeepsItsDetailsTheSearchsAndEveryPlanKeepsIt) {
  const PlannedModel model = Gpt("gpt:layers=4,hidden=256,heads=8,vocab=1024,seq=64", 16);
  SearchOptions o;
  o.fixed.sharded = true;
  o.fixed.recomputed = true;
  o.fixed.accumulate_shards = true;
  o.fixed.micro_batches = 2;
  absl::StatusOr<SearchResult> r = Search(model, SmallCluster(8, 80), o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int64_t> stages;
  for (const Estimate& e : r->ranked) {
    stages.insert(e.candidate.zero);
    EXPECT_TRUE(e.candidate.accumulate_shards) << e.candidate.ToString();
    EXPECT_NE(e.candidate.recompute, Recompute::kNone) << e.candidate.ToString();
    EXPECT_TRUE(e.candidate.ToStrategy({}).sharding.accumulate_shards) << e.candidate.ToString();
  }
  EXPECT_FALSE(stages.empty());
  EXPECT_FALSE(stages.contains(0));
  EXPECT_FALSE(stages.contains(1));  // accumulated shards need stage 2 or 3

  // On one device: what rules the plans out is named, and a micro-batching that another one of
  // the same layout got past is not (it would send the reader after the wrong key).
  SearchOptions none;
  none.fixed.sp = true;
  absl::StatusOr<SearchResult> failed = Search(model, SmallCluster(1, 80), none);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("mp 1: sp splits the tensor-parallel group"), std::string::npos)
      << failed.status();
  EXPECT_EQ(failed.status().message().find("max-micro-batch"), std::string::npos) << failed.status();
  SearchOptions whole;
  whole.fixed.micro_batches = 1;
  whole.max_micro_batch = 8;  // the batch of 16 in one micro-batch: 16
  failed = Search(model, SmallCluster(1, 80), whole);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("dp 1: micro-batch 16 is past the largest tried, 8 (--max-micro-batch)"),
            std::string::npos)
      << failed.status();
}

// Unless given, the largest micro-batch tried is 64 sequences, or as many as make 131,072 tokens
// where that is more: MosaicML's 512-token runs used micro-batches of 128, which a cap of 64
// sequences kept the search from (docs/benchmarks.md, "A100 rows with FSDP").
TEST(SearchTest, TheLargestMicroBatchTriedGrowsForShortSequences) {
  EXPECT_EQ(MaxMicroBatch(0, 2048), 64);
  EXPECT_EQ(MaxMicroBatch(0, 8192), 64);
  EXPECT_EQ(MaxMicroBatch(0, 512), 256);
  EXPECT_EQ(MaxMicroBatch(0, 1), 64);  // no sequence: samples, not tokens
  EXPECT_EQ(MaxMicroBatch(8, 512), 8);  // as given

  // A 512-token model whose one-device plan must run the whole batch of 128 at once.
  absl::StatusOr<PlannedModel> model = ModelFromSpec("gpt:layers=2,hidden=64,heads=4,vocab=256,seq=512", 128);
  ASSERT_TRUE(model.ok()) << model.status();
  SearchOptions o;
  o.fixed.micro_batches = 1;
  absl::StatusOr<SearchResult> found = Search(*model, SmallCluster(1, 80), o);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->best().candidate.micro_batch, 128) << found->best().candidate.ToString();
  o.max_micro_batch = 64;
  EXPECT_FALSE(Search(*model, SmallCluster(1, 80), o).ok());

  // A fixed micro-batch past a cap that was given is refused, naming both (it was kept silently).
  SearchOptions both;
  both.fixed.micro_batch = 2;
  both.max_micro_batch = 1;
  absl::StatusOr<SearchResult> refused = Search(*model, SmallCluster(1, 80), both);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("pipeline.micro_batch_size 2 is past --max-micro-batch 1"),
            std::string::npos)
      << refused.status();
}

// Every plan the search ranks passes the engine's own check of a strategy, hybrid ZeRO included
// (with ZeRO 1 fixed, on 2 nodes of 4: sharding over one node's ranks gathers within the node).
TEST(SearchTest, EveryRankedPlanIsOneTheEngineRuns) {
  SearchOptions o;
  o.fixed.dp = 8;
  o.fixed.zero = 1;
  absl::StatusOr<SearchResult> r =
      Search(Gpt("gpt:layers=4,hidden=256,heads=8,vocab=1024,seq=64", 16), SmallCluster(8, 80), o);
  ASSERT_TRUE(r.ok()) << r.status();
  bool hybrid = false;
  for (const Estimate& e : r->ranked) {
    EXPECT_TRUE(passes::CheckExecutable(e.candidate.ToStrategy(e.split_before)).ok()) << e.candidate.ToString();
    hybrid = hybrid || e.candidate.HybridZero();
  }
  EXPECT_TRUE(hybrid) << "dp 8 on nodes of 4: ZeRO over one node's 4 ranks is among the plans";
}

TEST(SearchTest, NothingFitsNamesTheLeanestPlan) {
  absl::StatusOr<SearchResult> r =
      Search(Gpt("gpt:layers=4,hidden=256,heads=8,vocab=1024,seq=64", 16), SmallCluster(4, 0.001), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("no plan fits in 0.0009 GB per device (0.001 GB less the 10% margin)"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("the leanest, dp"), std::string::npos) << r.status();
  // Term by term, and what lowers it.
  EXPECT_NE(r.status().message().find("GB: parameters "), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(" activations "), std::string::npos) << r.status();
  // What lowers it: not what the leanest plan does already (it is the leanest because it shards
  // and recomputes all it can here).
  const std::string message(r.status().message());
  const std::string leanest = message.substr(message.find("the leanest, "), message.find(" needs ") - message.find("the leanest, "));
  EXPECT_NE(r.status().message().find("more devices"), std::string::npos) << r.status();
  if (leanest.find("zero3") != std::string::npos) {
    EXPECT_EQ(r.status().message().find("ZeRO stage 3"), std::string::npos) << r.status();
  }
  if (leanest.find("rc-full") != std::string::npos) {
    EXPECT_EQ(r.status().message().find(", recompute"), std::string::npos) << r.status();
  }
  // Knobs --strategy fixed are not suggested; freeing them is.
  SearchOptions fixed;
  fixed.fixed.sharded = false;
  fixed.fixed.recompute = Recompute::kNone;
  r = Search(Gpt("gpt:layers=4,hidden=256,heads=8,vocab=1024,seq=64", 16), SmallCluster(4, 0.001), fixed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("ZeRO stage 3"), std::string::npos) << r.status();
  EXPECT_EQ(r.status().message().find(", recompute"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("leaving --strategy's fixed choices free"), std::string::npos) << r.status();
}

TEST(SearchTest, ProgressReportsEveryFactorisation) {
  SearchOptions o;
  std::vector<SearchProgress> seen;
  o.progress = [&](const SearchProgress& p) { seen.push_back(p); };
  absl::StatusOr<SearchResult> r =
      Search(Gpt("gpt:layers=4,hidden=256,heads=4,vocab=512,seq=64", 16), SmallCluster(4, 80), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().factorisations_done, seen.back().factorisations);
  EXPECT_EQ(seen.back().priced, r->candidates);
  EXPECT_GT(seen.back().best_step_time, 0);
  // Every layout says how it fared; the pick's holds the pick.
  ASSERT_EQ(static_cast<int64_t>(r->layouts.size()), seen.back().factorisations);
  int64_t holding_pick = 0;
  for (const LayoutOutcome& l : r->layouts) {
    EXPECT_TRUE(l.best || l.leanest || l.slower_bound > 0 || !l.not_built.empty()) << l.dp << l.mp << l.pp;
    if (l.best) {
      EXPECT_GE(l.best->step_time, r->ranked.front().step_time * (1 - o.tie_tolerance));
    }
    const Candidate& c = r->best().candidate;
    if (l.dp == c.dp && l.mp == c.mp && l.pp == c.pp) {
      ++holding_pick;
      ASSERT_TRUE(l.best.has_value());
    }
  }
  EXPECT_EQ(holding_pick, 1);
}

TEST(SearchTest, DivisorsInOrder) { EXPECT_EQ(Divisors(12), (std::vector<int64_t>{1, 2, 3, 4, 6, 12})); }

}  // namespace
}  // namespace pdist::planner

namespace pdist::planner {
namespace {

// Model specs with a wrong key, value or model are InvalidArgument naming them.
TEST(ModelSpecTest, BadSpecsNameTheirCulprit) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bert:layers=4,hidden=64,heads=4,vocab=64,seq=8", "unknown model 'bert'"},
      {"gpt:layers=4,hiden=64,heads=4,vocab=64,seq=8", "unknown key 'hiden'"},
      {"gpt:layers=four,hidden=64,heads=4,vocab=64,seq=8", "layers='four' is not a non-negative integer"},
      {"gpt:layers=4,hidden=64,heads=4,vocab=64", "needs seq=N"},
      {"gpt:layers=0,hidden=64,heads=4,vocab=64,seq=8", "needs layers=N (N > 0)"},
      {"gpt:layers=4,hidden=64,heads=5,vocab=64,seq=8", "divisible"},
      {"gpt:layers=4,hidden=64,heads=4,vocab=64,seq=8,dtype=f99", "dtype 'f99'"},
      {"llama:layers=4,hidden=64,heads=4,vocab=64,seq=8,tied=-1", "tied='-1'"},
      // Each was taken: a flag of 2 as true, an empty item, the last of two values, an int dtype.
      {"gpt:layers=4,hidden=64,heads=4,vocab=64,seq=8,tied=2", "tied must be 0 or 1"},
      {"gpt:layers=4,hidden=64,heads=4,vocab=64,seq=8,,", "an empty item (a stray ',')"},
      {"gpt:layers=2,layers=3,hidden=64,heads=4,vocab=64,seq=8", "'layers' given twice"},
      {"gpt:layers=4,hidden=64,heads=4,vocab=64,seq=8,dtype=int64", "not a floating-point dtype"},
  };
  for (const auto& [spec, message] : cases) {
    absl::StatusOr<PlannedModel> m = ModelFromSpec(spec, 8);
    ASSERT_FALSE(m.ok()) << spec;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(m.status().message().find(message), std::string::npos) << m.status();
  }
  EXPECT_TRUE(ModelFromSpec("llama:layers=4,hidden=64,heads=4,vocab=64,seq=8", 8).ok());
  EXPECT_TRUE(ModelFromSpec("gpt:layers=1,hidden=64,heads=4,vocab=64,seq=8", 8).ok());
}

}  // namespace
}  // namespace pdist::planner
