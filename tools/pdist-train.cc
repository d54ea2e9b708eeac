// pdist-train: trains a model on a token or text dataset (the command-line face of Engine::Fit).
//
//   pdist-train model.pb --data data/essay.txt --steps 300 --lr 3e-3 --losses-out losses.json
//   pdist-train model.pb --data data/essay.txt --strategy dp2mp2.json            # 4 ranks as threads
//   pdist-run --nprocs 4 -- pdist-train model.pb --data ... --strategy dp2mp2.json --backend gloo
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/comm_backend.h"
#include "engine/engine.h"
#include "engine/token_batches.h"
#include "ir/serialize.h"
#include "tools/cli.h"
#include "tools/progress_bar.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "pdist-train: %s\n", std::string(status.message()).c_str());
  return 1;
}

absl::Status WriteLosses(const std::string& path, const std::vector<pdist::engine::StepResult>& results) {
  nlohmann::json losses = nlohmann::json::array();
  for (const auto& r : results) losses.push_back(r.loss);
  std::ofstream out(path);
  out << nlohmann::json{{"losses", losses}}.dump() << "\n";
  if (!out) return absl::InvalidArgumentError("cannot write --losses-out file '" + path + "'");
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("%s '%s' cannot be opened", what, path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Kernel time per op type, largest first, per step.
void PrintProfile(const std::map<std::string, double>& op_seconds, int64_t steps) {
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto& [type, t] : op_seconds) {
    rows.push_back({t / static_cast<double>(steps), type});
    total += t / static_cast<double>(steps);
  }
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "kernel time per step: %.2f ms\n", total * 1e3);
  for (const auto& [t, type] : rows) {
    std::fprintf(stderr, "  %-36s %9.3f ms  %5.1f%%\n", type.c_str(), t * 1e3, 100 * t / total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pdist;
  std::string data, data_format = "text", strategy_path, losses_out, optimizer = "adamw", save, load;
  std::string backend = "inproc";
  // pdist-run --timeline passes its directory to every rank through the environment.
  std::string timeline = std::getenv("PDIST_TIMELINE_DIR") != nullptr ? std::getenv("PDIST_TIMELINE_DIR") : "";
  int64_t steps = 100, seed = 1, warmup = 0, decay = 0, data_seed = 1, ranks = 0;
  double lr = 1e-3, weight_decay = 0.01, collective_timeout = 300, bucket_mb = 25;
  bool quiet = false, profile = false;
  cli::FlagSet flags("pdist-train", "MODEL --data FILE [options]",
                     "Trains MODEL (model.pb or textual IR with a loss) on a dataset and reports the loss of every step.");
  flags.String("data", &data, "training data: a text file (read as bytes) or a token file");
  flags.String("data-format", &data_format, "text | u16 | u32 | pdtok");
  flags.Int("data-seed", &data_seed, "seed of the order of training windows");
  flags.Int("steps", &steps, "optimizer steps to run");
  flags.Double("lr", &lr, "peak learning rate");
  flags.Int("warmup", &warmup, "linear warm-up steps");
  flags.Int("decay", &decay, "cosine-decay steps after warm-up (0: constant)");
  flags.String("optimizer", &optimizer, "adamw | momentum | sgd");
  flags.Double("weight-decay", &weight_decay, "adamw coeff / momentum regularization");
  flags.Int("seed", &seed, "parameter initialisation seed");
  flags.String("strategy", &strategy_path, "strategy JSON file (docs/strategy.md)");
  flags.Int("ranks", &ranks,
            "in-process ranks (threads); must match the strategy's dp × mp × pp (default: that product; without "
            "--strategy, N ranks of data parallelism)");
  flags.String("backend", &backend, engine::CommBackendHelp());
  flags.Double("collective-timeout-s", &collective_timeout, "how long a collective waits for the other ranks");
  flags.Double("bucket-mb", &bucket_mb, "gradient all-reduce bucket size in MiB (0: one all-reduce per gradient)");
  flags.String("losses-out", &losses_out, "write {\"losses\": [...]} to this JSON file");
  flags.String("timeline", &timeline,
               "write the last step's timeline here: a Chrome trace per rank (rank<k>.trace.json, for Perfetto or "
               "chrome://tracing) and pipeline.svg, a row per rank (docs/pipeline.md)");
  flags.String("save", &save, "write a checkpoint here at the end");
  flags.String("load", &load, "resume from this checkpoint");
  flags.Bool("quiet", &quiet, "no progress bar");
  flags.Bool("profile", &profile, "time every kernel and print the time per op type (steps after the first)");
  const std::vector<std::string> args = flags.ParseOrExit(argc, argv);
  if (args.size() != 1 || data.empty()) {
    std::fprintf(stderr, "pdist-train: expected MODEL and --data FILE\n%s", flags.Help().c_str());
    return 2;
  }

  engine::EngineOptions options;
  options.lr = {.base = lr, .warmup_steps = warmup, .decay_steps = decay};
  options.seed = static_cast<uint64_t>(seed);
  options.profile = profile;
  options.optimizer.weight_decay = weight_decay;
  if (auto type = passes::ParseOptimizerType(optimizer); type.ok()) {
    options.optimizer.type = *type;
  } else {
    return Fail(type.status());
  }
  if (!strategy_path.empty()) {
    auto text = ReadFile(strategy_path, "strategy file");
    if (!text.ok()) return Fail(text.status());
    options.strategy_json = *text;
  }
  options.backend = backend;
  options.timeline_dir = timeline;
  options.collective_timeout_s = collective_timeout;
  if (bucket_mb < 0) return Fail(absl::InvalidArgumentError(absl::StrFormat("--bucket-mb %g must be >= 0", bucket_mb)));
  options.gradient_bucket_bytes = static_cast<int64_t>(bucket_mb * 1024 * 1024);
  if (ranks < 0) return Fail(absl::InvalidArgumentError(absl::StrFormat("--ranks %d must be positive", ranks)));
  absl::StatusOr<const engine::CommBackend*> comm_backend = engine::FindCommBackend(backend);
  if (!comm_backend.ok()) return Fail(comm_backend.status());
  if (ranks > 0 && (*comm_backend)->process_per_rank) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--ranks sets in-process ranks; with --backend ", backend,
                                                        ", pdist-run sets WORLD_SIZE")));
  }
  if (options.strategy_json.empty() && ranks > 1) {
    options.strategy_json = absl::StrFormat("{\"dp_degree\": %d}", ranks);  // plain data parallelism
  }
  auto program = ir::LoadProgramAuto(args[0]);
  if (!program.ok()) return Fail(program.status());
  engine::TokenDatasetOptions data_options;
  data_options.path = data;
  data_options.seed = static_cast<uint64_t>(data_seed);
  if (auto format = engine::ParseTokenFormat(data_format); format.ok()) {
    data_options.format = *format;
  } else {
    return Fail(format.status());
  }
  auto resolved = engine::DatasetOptionsForModel(*program, data_options);
  if (!resolved.ok()) return Fail(resolved.status());
  auto dataset = engine::TokenDataset::Open(*resolved);
  if (!dataset.ok()) return Fail(dataset.status());
  auto trainer = engine::Engine::Create(std::move(*program), options);
  if (!trainer.ok()) return Fail(trainer.status());
  if (ranks > 0 && ranks != (*trainer)->world_size()) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--ranks %d but the strategy has %d ranks (dp_degree × mp_degree × pp_degree)", ranks, (*trainer)->world_size())));
  }
  // Under gloo every process trains; rank 0 reports and writes files.
  const bool reporter = (*trainer)->first_local_rank() == 0;
  quiet = quiet || !reporter;
  if (!load.empty()) {
    if (absl::Status s = (*trainer)->Load(load); !s.ok()) return Fail(s);
    dataset->Seek((*trainer)->step());
  }

  const int64_t tokens_per_step = (*trainer)->tokens_per_step();
  tools::ProgressBar bar(steps);
  double seconds = 0;
  int64_t done = 0;
  std::map<std::string, double> op_seconds;  // summed over steps after the first (warm-up)
  auto results = (*trainer)->Fit(engine::BatchesFrom(*dataset), steps, [&](const engine::StepResult& r) {
    seconds += r.seconds;
    ++done;
    if (done > 1) {
      for (const auto& [type, t] : r.op_seconds) op_seconds[type] += t;
    }
    if (!quiet) {
      bar.Update(done, absl::StrFormat("loss %.4f  lr %.2e  %s tok/s", r.loss, r.lr,
                                       tools::HumanCount(static_cast<double>(tokens_per_step * done) / seconds)));
    }
    return true;
  });
  if (!quiet) bar.Finish();
  if (!results.ok()) return Fail(results.status());
  if (reporter && !results->empty()) {
    std::fprintf(stderr, "pdist-train: %lld steps, loss %.4f -> %.4f, %.1f tokens/s, peak activation memory %s\n",
                 static_cast<long long>(results->size()), results->front().loss, results->back().loss,
                 static_cast<double>(tokens_per_step * done) / seconds,
                 tools::HumanCount(static_cast<double>(results->back().peak_bytes)).append("B").c_str());
  }
  if (reporter && profile && done > 1) PrintProfile(op_seconds, done - 1);
  if (reporter && !losses_out.empty()) {
    if (absl::Status s = WriteLosses(losses_out, *results); !s.ok()) return Fail(s);
  }
  if (!save.empty()) {
    if (absl::Status s = (*trainer)->Save(save); !s.ok()) return Fail(s);
  }
  return 0;
}
