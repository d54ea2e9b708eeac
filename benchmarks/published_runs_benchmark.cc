// The cost model against published end-to-end runs (issue #17): every row of the
// benchmarks/data/published_runs*.tsv files is priced with every knob fixed as published (the
// planner's EstimateCandidate, as `pdist-plan --strategy` with all keys set), and its predicted
// step time printed beside the published one. Then the efficiency constants are fitted
// leave-one-out per file (one software stack on one GPU type): each row is predicted with the
// constants that fit the other rows of its file best, so the error reported for it is out of
// sample. Last, the planner's own pick for each row.
//
//   published_runs_benchmark benchmarks/data/published_runs*.tsv   (scripts/bench-plan-accuracy.sh)
//   published_runs_benchmark --check benchmarks/data/published_runs.tsv   (ctest plan.published_runs:
//       the presets' own constants only; fails when the mean |error| passes 5% or any row 10%)
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ir/input_file.h"
#include "ir/status.h"
#include "planner/estimate.h"
#include "planner/planned_model.h"
#include "planner/profile.h"
#include "planner/search.h"
#include "strategy/cluster.h"

namespace {

constexpr char kUsage[] =
    "usage: published_runs_benchmark [--check [--max-mean=F] [--max-row=F]] ROWS.tsv...\n"
    "  Prices every row of benchmarks/data/published_runs*.tsv with every knob fixed as published,\n"
    "  then fits each file's efficiencies (one stack on one GPU type) leave-one-out and prints the\n"
    "  out-of-sample errors, and the planner's own pick for each row's model, GPUs and global batch.\n"
    "  --check       only the first table, with each preset's own efficiencies; exit 1 when the mean\n"
    "                |error| passes --max-mean (default 0.05) or a row passes --max-row (0.10)\n";

using pdist::planner::Candidate;
using pdist::planner::Recompute;

struct Row {
  std::string id, cluster;
  std::string system;  // the file it came from: one software stack on one GPU type
  int64_t gpus = 0, layers = 0, hidden = 0, heads = 0, vocab = 0, seq = 0, global_batch = 0;
  Candidate candidate;
  bool unfused_attention = false;
  bool f32_loss = false;  // the loss on an f32 copy of the logits (the `loss` column)
  bool sync_after_backward = false;
  std::optional<pdist::ir::DataType> fsdp_reduce;  // PyTorch FSDP's schedule, reducing in this dtype
  double published_seconds = 0;
};

// Narayanan et al.'s FLOPs per iteration, full recompute counted (their eq. 3).
double HardwareFlopsWithRecompute(const Row& r) {
  const double b = static_cast<double>(r.global_batch), s = static_cast<double>(r.seq), l = static_cast<double>(r.layers),
               h = static_cast<double>(r.hidden), v = static_cast<double>(r.vocab);
  return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

absl::StatusOr<Row> ParseRow(const std::string& line, int line_number) {
  const std::vector<std::string> f = absl::StrSplit(line, '\t');
  const std::string where = absl::StrCat("line ", line_number);
  if (f.size() != 22) return absl::InvalidArgumentError(absl::StrCat(where, ": ", f.size(), " columns, expected 22"));
  Row r;
  r.id = f[0];
  r.cluster = f[1];
  if (absl::Status known = pdist::strategy::ClusterPreset(r.cluster, 8).status(); !known.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", known.message()));
  }
  int64_t* ints[] = {&r.gpus, &r.layers, &r.hidden, &r.heads, &r.vocab, &r.seq, &r.global_batch,
                     &r.candidate.dp, &r.candidate.mp, &r.candidate.pp, &r.candidate.vpp, &r.candidate.micro_batch};
  for (size_t k = 0; k < std::size(ints); ++k) {
    if (!absl::SimpleAtoi(f[2 + k], ints[k]) || *ints[k] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, " (", r.id, "): column ", 3 + k, " is '", f[2 + k],
                                                     "', not a positive integer"));
    }
  }
  Candidate& c = r.candidate;
  if (c.dp * c.mp * c.pp != r.gpus || r.global_batch % (c.dp * c.micro_batch) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, " (", r.id, "): dp × tp × pp must be the GPUs and dp × "
                                                   "micro-batch must divide the global batch"));
  }
  c.micro_batches = r.global_batch / (c.dp * c.micro_batch);
  c.schedule = c.vpp > 1 ? pdist::passes::ScheduleMode::kVPP : pdist::passes::ScheduleMode::k1F1B;
  const std::map<std::string, Recompute> recompute = {
      {"none", Recompute::kNone}, {"selective", Recompute::kSelective}, {"full", Recompute::kFull}};
  auto rc = recompute.find(f[14]);
  if (rc == recompute.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": recompute '", f[14], "'"));
  c.recompute = rc->second;
  if (f[15] != "0" && f[15] != "1") return absl::InvalidArgumentError(absl::StrCat(where, ": sp '", f[15], "' (0|1)"));
  c.sp = f[15] == "1";
  const std::map<std::string, std::optional<pdist::ir::DataType>> fsdp = {
      {"overlap", std::nullopt}, {"after", std::nullopt}, {"fsdp", pdist::ir::DataType::kFloat32},
      {"fsdp-bf16", pdist::ir::DataType::kBFloat16}};
  if ((f[16] != "fused" && f[16] != "unfused") || fsdp.count(f[17]) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": attention '", f[16], "' (fused|unfused), dp_sync '", f[17],
                                                   "' (overlap|after|fsdp|fsdp-bf16)"));
  }
  r.unfused_attention = f[16] == "unfused";
  r.sync_after_backward = f[17] == "after";
  r.fsdp_reduce = fsdp.at(f[17]);
  if (!absl::SimpleAtoi(f[18], &c.zero) || c.zero < 0 || c.zero > 3 || (c.zero > 0 && c.dp == 1)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " (", r.id, "): zero '", f[18], "' (0-3, above 0 with dp > 1)"));
  }
  // FSDP reduce-scatters every micro-batch's gradients and sums the shards.
  c.accumulate_shards = r.fsdp_reduce.has_value() && c.zero >= 2;
  if (f[21] != "f32" && f[21] != "bf16") return absl::InvalidArgumentError(absl::StrCat(where, ": loss '", f[21], "' (f32|bf16)"));
  r.f32_loss = f[21] == "f32";
  double value = 0;
  if (!absl::SimpleAtod(f[20], &value) || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": measured value '", f[20], "'"));
  }
  if (f[19] == "seconds") {
    r.published_seconds = value;
  } else if (f[19] == "hw_tflops") {
    r.published_seconds = HardwareFlopsWithRecompute(r) / (value * 1e12 * static_cast<double>(r.gpus));
  } else if (f[19] == "tokens_per_s") {
    r.published_seconds = static_cast<double>(r.global_batch * r.seq) / value;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, ": measure '", f[19], "' (seconds, hw_tflops or tokens_per_s)"));
  }
  return r;
}

absl::StatusOr<std::vector<Row>> ReadRows(const std::string& path) {
  PDIST_ASSIGN_OR_RETURN(std::string text, pdist::ir::ReadFileToString(path, 1 << 20));
  std::vector<Row> rows;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripSuffix(line, "\r");
    if (line.empty() || line[0] == '#') continue;
    PDIST_ASSIGN_OR_RETURN(Row r, ParseRow(std::string(line), line_number));
    r.system = path.substr(path.find_last_of('/') + 1);
    rows.push_back(std::move(r));
  }
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no rows"));
  return rows;
}

std::string Spec(const Row& r) {
  return absl::StrCat("gpt:layers=", r.layers, ",hidden=", r.hidden, ",heads=", r.heads, ",vocab=", r.vocab,
                      ",seq=", r.seq, ",tied=1,dtype=bf16,f32_loss=", r.f32_loss ? 1 : 0);
}

// The row's system: its cluster preset (with the preset's efficiencies, or `efficiency` where
// given) running the row's attention kernel, and how it synchronises gradients.
struct System {
  pdist::strategy::Cluster cluster;
  pdist::planner::EstimateOptions options;
};

absl::StatusOr<System> SystemOf(const Row& r, const pdist::strategy::Efficiency* efficiency) {
  System s;
  PDIST_ASSIGN_OR_RETURN(s.cluster, pdist::strategy::ClusterPreset(r.cluster, r.gpus));
  if (efficiency != nullptr) s.cluster.device.efficiency = *efficiency;
  s.cluster.device.efficiency.attention = r.unfused_attention ? pdist::strategy::Efficiency::Attention::kUnfused
                                                              : pdist::strategy::Efficiency::Attention::kFused;
  s.options.overlap_gradient_sync = !r.sync_after_backward;
  if (r.fsdp_reduce) {
    s.options.fsdp_schedule = true;
    s.options.fsdp_reduce_dtype = *r.fsdp_reduce;
  }
  return s;
}

// A row priced on many efficiencies: its model and programs built once, re-priced per point.
class RowPricer {
 public:
  static absl::StatusOr<std::unique_ptr<RowPricer>> Make(const Row& r) {
    PDIST_ASSIGN_OR_RETURN(pdist::planner::PlannedModel model, pdist::planner::ModelFromSpec(Spec(r), r.global_batch));
    PDIST_ASSIGN_OR_RETURN(System system, SystemOf(r, nullptr));
    return std::unique_ptr<RowPricer>(new RowPricer(r, std::move(model), std::move(system)));
  }
  // `efficiency`: null for the preset's own.
  absl::StatusOr<pdist::planner::Estimate> Price(const pdist::strategy::Efficiency* efficiency) {
    PDIST_ASSIGN_OR_RETURN(System system, SystemOf(row_, efficiency));
    pdist::planner::Profiler profiler = base_.OnCluster(system.cluster);
    return pdist::planner::EstimateCandidate(row_.candidate, model_, system.cluster, profiler, system.options,
                                             std::numeric_limits<double>::infinity());
  }

 private:
  RowPricer(const Row& r, pdist::planner::PlannedModel model, System system)
      : row_(r), model_(std::move(model)), base_(model_, std::move(system.cluster)) {}
  const Row& row_;
  const pdist::planner::PlannedModel model_;
  pdist::planner::Profiler base_;
};

// A row priced once, on its preset's efficiencies.
absl::StatusOr<pdist::planner::Estimate> Price(const Row& r) {
  PDIST_ASSIGN_OR_RETURN(std::unique_ptr<RowPricer> pricer, RowPricer::Make(r));
  return pricer->Price(nullptr);
}

// The planner's own pick for the row's model, GPU count and global batch on the row's system.
absl::StatusOr<pdist::planner::Estimate> Pick(const Row& r) {
  PDIST_ASSIGN_OR_RETURN(System system, SystemOf(r, nullptr));
  PDIST_ASSIGN_OR_RETURN(pdist::planner::PlannedModel model, pdist::planner::ModelFromSpec(Spec(r), r.global_batch));
  pdist::planner::SearchOptions options;
  options.estimate = system.options;
  PDIST_ASSIGN_OR_RETURN(pdist::planner::SearchResult result, pdist::planner::Search(model, system.cluster, options));
  return result.best();
}

// The term of the step that differs most between two estimates, signed (b − a).
std::string LargestDifference(const pdist::planner::Estimate& a, const pdist::planner::Estimate& b) {
  const std::pair<const char*, double> terms[] = {
      {"compute", b.time.compute - a.time.compute},     {"recompute", b.time.recompute - a.time.recompute},
      {"tensor-parallel", b.time.mp_comm - a.time.mp_comm}, {"data-parallel", b.time.dp_comm - a.time.dp_comm},
      {"pipeline p2p", b.time.pp_comm - a.time.pp_comm}, {"bubble", b.time.bubble - a.time.bubble}};
  const auto* most = std::max_element(std::begin(terms), std::end(terms),
                                      [](const auto& x, const auto& y) { return std::abs(x.second) < std::abs(y.second); });
  return absl::StrCat(most->first, " ", most->second >= 0 ? "+" : "", absl::SixDigits(most->second), " s");
}

double Error(double predicted, const Row& r) { return predicted / r.published_seconds - 1; }

// The distinct values of a row field, in order of first appearance.
std::vector<std::string> Distinct(const std::vector<Row>& rows, std::string Row::*field) {
  std::vector<std::string> names;
  for (const Row& r : rows) {
    if (std::find(names.begin(), names.end(), r.*field) == names.end()) names.push_back(r.*field);
  }
  return names;
}

// The efficiencies tried in the fit: gemm × memory × gemm_half_intensity (0 or 64: off, or the
// value a sweep of 32, 64, 96 and 128 over the H100 rows liked best; docs/cost_model.md), and
// the fused attention kernel's fraction of peak only where a row runs attention fused (the
// others never price it). The rest (the attention backward's rate against its forward's, the
// size factor, the overhead) stay the group's preset's.
std::vector<pdist::strategy::Efficiency> Grid(const std::vector<const Row*>& group) {
  const bool fused = std::any_of(group.begin(), group.end(), [](const Row* r) { return !r->unfused_attention; });
  absl::StatusOr<pdist::strategy::Cluster> preset = pdist::strategy::ClusterPreset(group.front()->cluster, 8);
  pdist::strategy::Efficiency base = preset.ok() ? preset->device.efficiency : pdist::strategy::Efficiency{};
  std::vector<double> attention = {pdist::strategy::Efficiency{}.fused_attention};
  if (fused) attention = {0.1, 0.125, 0.15, 0.175, 0.2, 0.225, 0.25, 0.275, 0.3, 0.35, 0.4, 0.45, 0.5};
  std::vector<pdist::strategy::Efficiency> grid;
  for (double g = 0.40; g <= 0.951; g += 0.025) {
    for (double m : {0.4, 0.5, 0.6, 0.7, 0.8, 0.9}) {
      for (double a : attention) {
        for (double intensity : {0.0, 64.0}) {  // without and with the narrow dimensions' toll
          pdist::strategy::Efficiency e = base;
          e.gemm = g;
          e.memory = m;
          e.fused_attention = a;
          e.gemm_half_intensity = intensity;
          grid.push_back(e);
        }
      }
    }
  }
  return grid;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false;
  double max_mean = 0.05, max_row = 0.10;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool bound = arg.rfind("--max-mean=", 0) == 0 || arg.rfind("--max-row=", 0) == 0;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--check") {
      check = true;
    } else if (bound) {
      double& limit = arg.rfind("--max-mean=", 0) == 0 ? max_mean : max_row;
      if (!absl::SimpleAtod(arg.substr(arg.find('=') + 1), &limit) || !(limit > 0)) {
        std::fprintf(stderr, "published_runs_benchmark: %s is not a positive fraction\n%s", arg.c_str(), kUsage);
        return 2;
      }
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "published_runs_benchmark: unknown flag %s\n%s", arg.c_str(), kUsage);
      return 2;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  absl::StatusOr<std::vector<Row>> rows = std::vector<Row>{};
  for (const std::string& file : files) {
    absl::StatusOr<std::vector<Row>> more = ReadRows(file);
    if (!more.ok()) {
      rows = more.status();
      break;
    }
    rows->insert(rows->end(), more->begin(), more->end());
  }
  if (!rows.ok()) {
    std::fprintf(stderr, "published_runs_benchmark: %s\n", std::string(rows.status().message()).c_str());
    return 1;
  }
  std::printf("With each preset's own efficiencies:\n");
  for (const std::string& name : Distinct(*rows, &Row::cluster)) {
    const pdist::strategy::Efficiency e = pdist::strategy::ClusterPreset(name, 8)->device.efficiency;
    std::printf("  %-9s gemm %.3f, fused attention %.3f (backward %.2f of it), memory %.2f, gemm_half_flops %.2g, "
                "gemm_half_intensity %.0f, op_overhead %.0f us\n",
                name.c_str(), e.gemm, e.fused_attention, e.fused_attention_backward, e.memory, e.gemm_half_flops,
                e.gemm_half_intensity, e.op_overhead * 1e6);
  }
  std::printf("%-22s %-30s %10s %10s %7s   %s\n", "row", "plan", "published", "predicted", "error",
              "compute / recompute / tp / dp / pp / bubble (s), memory GB");
  double sum = 0, worst = 0;
  for (const Row& r : *rows) {
    absl::StatusOr<pdist::planner::Estimate> e = Price(r);
    if (!e.ok()) {
      std::printf("%-22s %s\n", r.id.c_str(), std::string(e.status().message()).c_str());
      return 1;
    }
    const double err = Error(e->step_time, r);
    sum += std::abs(err);
    worst = std::max(worst, std::abs(err));
    const auto& t = e->time;
    std::printf("%-22s %-30s %10.3f %10.3f %+6.1f%%   %.2f / %.2f / %.2f / %.2f / %.2f / %.2f, %.1f%s\n", r.id.c_str(),
                r.candidate.ToString().c_str(), r.published_seconds, e->step_time, 100 * err, t.compute, t.recompute,
                t.mp_comm, t.dp_comm, t.pp_comm, t.bubble, e->memory.total() / 1e9, e->fits ? "" : " (does not fit)");
  }
  const double mean = sum / static_cast<double>(rows->size());
  std::printf("mean |error| %.1f%%, max %.1f%% over %zu rows\n\n", 100 * mean, 100 * worst, rows->size());
  if (check) {
    if (mean <= max_mean && worst <= max_row) return 0;
    std::fprintf(stderr, "published_runs_benchmark: the cost model is off the published runs by %.1f%% on average "
                 "(limit %.1f%%) and %.1f%% at most (limit %.1f%%)\n", 100 * mean, 100 * max_mean, 100 * worst,
                 100 * max_row);
    return 1;
  }

  // Leave one out, per system (a rows file: one software stack on one GPU type, as a device's
  // efficiencies are its kernels' as much as its own): each row predicted with the efficiencies
  // that minimise the mean |error| of the other rows of its file. The grid is priced once per row.
  std::printf("Leave one out (each row predicted with the constants fitted on the other rows of its file):\n");
  std::printf("%-22s %8s %8s %8s %9s %10s %10s %7s\n", "row", "gemm", "attn", "memory", "intensity", "published",
              "predicted", "error");
  sum = 0;
  worst = 0;
  for (const std::string& name : Distinct(*rows, &Row::system)) {
    std::vector<const Row*> group;
    for (const Row& r : *rows) {
      if (r.system == name) group.push_back(&r);
    }
    const std::vector<pdist::strategy::Efficiency> grid = Grid(group);
    const bool progress_on_terminal = isatty(fileno(stderr)) != 0;
    std::vector<std::vector<double>> error(group.size());  // [row][grid point]
    for (size_t i = 0; i < group.size(); ++i) {
      absl::StatusOr<std::unique_ptr<RowPricer>> pricer = RowPricer::Make(*group[i]);
      for (const pdist::strategy::Efficiency& e : grid) {
        absl::StatusOr<pdist::planner::Estimate> est =
            pricer.ok() ? (*pricer)->Price(&e) : absl::StatusOr<pdist::planner::Estimate>(pricer.status());
        error[i].push_back(est.ok() ? Error(est->step_time, *group[i]) : std::numeric_limits<double>::infinity());
      }
      // Redrawn in place on a terminal; in a file (stdout and stderr both redirected to it) one
      // line at the end, after what stdout has so far, so the two never cut each other's lines.
      if (progress_on_terminal) {
        std::fprintf(stderr, "\rfitting %s: %zu of %zu rows priced on %zu grid points", name.c_str(), i + 1,
                     group.size(), grid.size());
      }
    }
    std::fflush(stdout);
    if (progress_on_terminal) {
      std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "fitting %s: %zu rows priced on %zu grid points\n", name.c_str(), group.size(), grid.size());
    }
    auto best_without = [&](size_t left_out) {
      size_t best = 0;
      double best_mean = std::numeric_limits<double>::infinity();
      for (size_t p = 0; p < grid.size(); ++p) {
        double total = 0;
        for (size_t i = 0; i < group.size(); ++i) {
          if (i != left_out) total += std::abs(error[i][p]);
        }
        if (total < best_mean) {
          best_mean = total;
          best = p;
        }
      }
      return best;
    };
    const pdist::strategy::Efficiency& all = grid[best_without(group.size())];
    std::printf("%s, fitted on all %zu of its rows: gemm %.3f, fused attention %.3f, memory %.2f, "
                "gemm_half_intensity %.0f\n",
                name.c_str(), group.size(), all.gemm, all.fused_attention, all.memory, all.gemm_half_intensity);
    for (size_t i = 0; i < group.size(); ++i) {
      const pdist::strategy::Efficiency& e = grid[best_without(i)];
      const double err = error[i][best_without(i)];
      sum += std::abs(err);
      worst = std::max(worst, std::abs(err));
      std::printf("%-22s %8.3f %8.3f %8.2f %9.0f %10.3f %10.3f %+6.1f%%\n", group[i]->id.c_str(), e.gemm,
                  e.fused_attention, e.memory, e.gemm_half_intensity, group[i]->published_seconds,
                  group[i]->published_seconds * (1 + err), 100 * err);
    }
  }
  std::printf("out of sample: mean |error| %.1f%%, max %.1f%% over %zu rows\n\n",
              100 * sum / static_cast<double>(rows->size()), 100 * worst, rows->size());

  // The planner against the hand-tuned configurations: only the model, the GPUs and the global
  // batch fixed, on the same system, with the default constants.
  std::printf("The planner's pick (model, GPUs and global batch fixed) against the published configuration:\n");
  std::printf("%-22s %-44s %10s %10s %7s   %s\n", "row", "pick", "published", "pick", "change",
              "largest difference in a term (pick - published)");
  for (const Row& r : *rows) {
    absl::StatusOr<pdist::planner::Estimate> published = Price(r);
    absl::StatusOr<pdist::planner::Estimate> pick = Pick(r);
    if (!published.ok() || !pick.ok()) {
      std::printf("%-22s %s\n", r.id.c_str(),
                  std::string((published.ok() ? pick.status() : published.status()).message()).c_str());
      continue;
    }
    std::printf("%-22s %-44s %10.3f %10.3f %+6.1f%%   %s%s\n", r.id.c_str(), pick->candidate.ToString().c_str(),
                published->step_time, pick->step_time, 100 * (pick->step_time / published->step_time - 1),
                LargestDifference(*published, *pick).c_str(), published->fits ? "" : " (published does not fit)");
  }
  return 0;
}
