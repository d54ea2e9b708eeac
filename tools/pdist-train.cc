// pdist-train: trains a model on a token or text dataset (the command-line face of Engine::Fit).
//
//   pdist-train model.pb --data data/essay.txt --steps 300 --lr 3e-3 --losses-out losses.json
//   pdist-train model.pb --data data/essay.txt --strategy dp2mp2.json            # 4 ranks as threads
//   pdist-run --nprocs 4 -- pdist-train model.pb --data ... --strategy dp2mp2.json --backend gloo

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/comm_backend.h"
#include "engine/engine.h"
#include "engine/launched_rank.h"
#include "engine/sharded_checkpoint.h"
#include "engine/token_batches.h"
#include "ir/dist/shard_tensor.h"
#include "ir/models/model_stats.h"
#include "ir/output_file.h"
#include "ir/serialize.h"
#include "ir/status.h"
#include "strategy/cluster.h"
#include "strategy/strategy.h"
#include "tools/cli.h"
#include "tools/progress_bar.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "pdist-train: %s\n", std::string(status.message()).c_str());
  return 1;
}

// {"losses": [...]} and, with --eval-data, {"held_out": [{"step": 100, "loss": 2.31}, ...]}.
absl::Status WriteLosses(const std::string& path, const std::vector<pdist::engine::StepResult>& results,
                         const std::vector<std::pair<int64_t, double>>& held_out) {
  nlohmann::json losses = nlohmann::json::array();
  for (const auto& r : results) losses.push_back(r.loss);
  nlohmann::json out = {{"losses", losses}};
  if (!held_out.empty()) {
    out["held_out"] = nlohmann::json::array();
    for (const auto& [step, loss] : held_out) out["held_out"].push_back({{"step", step}, {"loss", loss}});
  }
  const std::string json = out.dump() + "\n";
  return pdist::WithContext(pdist::ir::WriteFileAtomically(path, json), "--losses-out");
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

// Ctrl-C or SIGTERM while training: the step running finishes, then the run ends as a finished
// one does (checkpoint, losses) and exits 128 + the signal. Ranks that are processes (pdist-run
// forwards the signal to each, or one rank alone got it) agree after every step on whether any
// was signalled (Engine::MaxOverRanks), so that all stop after the same step: one that went on
// would leave the others' save waiting for it.
//
// A second Ctrl-C (SIGINT after either) stops this process at once: a person asked twice. More
// SIGTERMs are ignored: a scheduler sends one to every process of a job and pdist-run forwards
// its own, so a rank often gets two within milliseconds, and the scheduler's SIGKILL follows
// anyway. `received` is this process's own signal; `stopping`, the one the ranks agreed on (a
// peer's, perhaps), decides the exit status but never makes a first signal a second one.
//
// Before the first step there is nothing to save: a signal then ends the process at once, as
// it would without the handler (a rank still meeting its peers would otherwise wait in the
// rendezvous for one that the same signal killed before it could install its handler).
volatile std::sig_atomic_t received = 0;
volatile std::sig_atomic_t training = 0;
std::sig_atomic_t stopping = 0;

void StopAfterThisStep(int signo) {
  if (training == 0 || (received != 0 && signo == SIGINT)) {
    std::signal(signo, SIG_DFL);
    std::raise(signo);
    return;
  }
  if (received == 0) received = signo;
}

// Every flag of the tool, as given.
struct TrainFlags {
  std::string data, data_format = "text", strategy_path, losses_out, optimizer = "adamw", save, load, eval_data, cluster;
  int64_t eval_every = 0, eval_batches = 4, save_every = 0;
  bool eval_batches_given = false;  // the default shrinks to a small held-out file; a given count does not
  std::string backend = "inproc";
  std::string device = "cpu";
  std::string timeline;
  std::string fusions = "auto";
  int64_t steps = 100, seed = 1, warmup = 0, decay = 0, data_seed = 1, ranks = 0;
  double lr = 1e-3, weight_decay = 0.01, collective_timeout = 300, checkpoint_timeout = 3600, bucket_mb = 25, peak_tflops = 0;
  bool quiet = false, profile = false;
};

void RegisterFlags(pdist::cli::FlagSet& flags, TrainFlags* f) {
  flags.String("data", &f->data, "training data: a text file (read as bytes) or a token file");
  flags.String("data-format", &f->data_format, "text | u16 | u32 | pdtok");
  flags.String("eval-data", &f->eval_data, "held-out data (same format): its loss is reported every --eval-every steps");
  flags.Int("eval-every", &f->eval_every, "with --eval-data: evaluate every K steps and after the last (default: only after)");
  flags.Int("eval-batches", &f->eval_batches, "with --eval-data: batches per evaluation, in file order");
  flags.Int("data-seed", &f->data_seed, "seed of the order of training windows");
  flags.Int("steps", &f->steps, "optimizer steps to run, >= 1 (after --load: this many more than the checkpoint's)");
  flags.Double("lr", &f->lr, "peak learning rate");
  flags.Int("warmup", &f->warmup, "linear warm-up steps");
  flags.Int("decay", &f->decay, "cosine-decay steps after warm-up (0: constant)");
  flags.String("optimizer", &f->optimizer, "adamw | momentum | sgd");
  flags.Double("weight-decay", &f->weight_decay, "adamw coeff / momentum regularization");
  flags.Int("seed", &f->seed, "parameter initialisation seed");
  flags.String("strategy", &f->strategy_path, "strategy JSON file, or the JSON itself (docs/strategy.md)");
  flags.Int("ranks", &f->ranks,
            "in-process ranks (threads); must match the strategy's dp × mp × pp (default: that product; without "
            "--strategy, N ranks of data parallelism, as are pdist-run's N processes)");
  flags.String("backend", &f->backend, pdist::engine::CommBackendHelp());
  flags.String("device", &f->device,
               "where each rank runs: cpu, cuda (the rank's GPU: LOCAL_RANK under pdist-run), cuda:N, or cpu:N "
               "(the host, state kept apart as on a GPU: for testing). On cuda, bf16/f16 attention runs on cuDNN's "
               "fused attention where libcudnn.so.9 loads; PDIST_CUDA_ATTENTION=gemm|cudnn in the environment "
               "overrides (docs/gpu.md)");
  flags.String("fusions", &f->fusions,
               "kernel fusions of each rank's program: auto (all on cuda, none on cpu), all, none, or a comma list "
               "of optimizer (multi-tensor updates) and gemm-epilogue (bias, GELU and bias gradient in GEMM "
               "epilogues); on the CPU they change no number (docs/gpu.md)");
  flags.Double("collective-timeout-s", &f->collective_timeout, "how long a collective waits for the other ranks, in seconds (> 0; a deadline far off, "
               "such as 1e9, is how to wait without one)");
  flags.Double("checkpoint-timeout-s", &f->checkpoint_timeout,
               "with ranks that are processes: how long a save or load waits for the slowest rank's files, in "
               "seconds (> 0; as given, even below --collective-timeout-s)");
  flags.Double("bucket-mb", &f->bucket_mb, "gradient all-reduce bucket size in MiB (0: one all-reduce per gradient)");
  flags.String("losses-out", &f->losses_out, "write {\"losses\": [...]} to this JSON file");
  flags.String("timeline", &f->timeline,
               "write the last step's timeline here: a Chrome trace per rank (rank<k>.trace.json, for Perfetto or "
               "chrome://tracing) and pipeline.svg, a row per rank (docs/pipeline.md)");
  flags.String("save", &f->save, "write a checkpoint into this directory at the end (each rank its own pieces)");
  flags.Int("save-every", &f->save_every, "also every N steps (each save replaces the last whole; 0: at the end only)");
  flags.String("load", &f->load, "resume from this checkpoint (saved under any strategy)");
  flags.Bool("quiet", &f->quiet, "no progress bar");
  flags.Double("peak-tflops", &f->peak_tflops,
               "one rank's peak TFLOP/s (pdist-plan --calibrate measures it): the progress line then shows MFU");
  flags.String("cluster", &f->cluster,
               "a cluster file (pdist-plan --calibrate -o writes one) or preset: its device's peak for the model's "
               "dtype gives MFU, as the planner computes it");
  flags.Bool("profile", &f->profile, "time every kernel and print the time per op type (steps after the first)");
}

// The engine's options from the flags; errors name the flag.
absl::StatusOr<pdist::engine::EngineOptions> EngineOptionsFrom(const TrainFlags& f) {
  using namespace pdist;
  engine::EngineOptions options;
  options.lr = {.base = f.lr, .warmup_steps = f.warmup, .decay_steps = f.decay};
  options.seed = static_cast<uint64_t>(f.seed);
  options.profile = f.profile;
  options.optimizer.weight_decay = f.weight_decay;
  PDIST_ASSIGN_OR_RETURN(options.optimizer.type, passes::ParseOptimizerType(f.optimizer));
  if (!f.strategy_path.empty()) {
    absl::StatusOr<std::string> text = strategy::ReadStrategyArgument(f.strategy_path);
    if (!text.ok()) return WithContext(text.status(), "strategy file");
    // Checked here too: the engine reads an empty strategy text as "no strategy", and an empty
    // file is a mistake, not a request to train on one rank.
    PDIST_RETURN_IF_ERROR(
        WithContext(strategy::ParseStrategy(*text).status(), strategy::StrategyArgumentName(f.strategy_path)));
    options.strategy_json = *std::move(text);
  }
  options.backend = f.backend;
  options.device = f.device;
  options.timeline_dir = f.timeline;
  options.collective_timeout_s = f.collective_timeout;
  options.checkpoint_timeout_s = f.checkpoint_timeout;
  PDIST_RETURN_IF_ERROR(pdist::WithContext(options.SetFusions(f.fusions), "--fusions"));
  if (f.steps < 1) return absl::InvalidArgumentError(absl::StrFormat("--steps %d must be >= 1", f.steps));
  if (f.peak_tflops < 0) return absl::InvalidArgumentError(absl::StrFormat("--peak-tflops %g must be >= 0", f.peak_tflops));
  if (f.eval_every < 0) return absl::InvalidArgumentError(absl::StrFormat("--eval-every %d must be >= 0", f.eval_every));
  if (f.eval_batches < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("--eval-batches %d must be >= 1", f.eval_batches));
  }
  // Bounded above too: MiB × 2^20 past int64 overflowed into a negative byte count.
  if (f.bucket_mb < 0 || f.bucket_mb > 1 << 20) {
    return absl::InvalidArgumentError(absl::StrFormat("--bucket-mb %g must be in [0, 1048576]", f.bucket_mb));
  }
  options.gradient_bucket_bytes = static_cast<int64_t>(f.bucket_mb * 1024 * 1024);
  if (f.ranks < 0) return absl::InvalidArgumentError(absl::StrFormat("--ranks %d must be positive", f.ranks));
  if (f.eval_every > 0 && f.eval_data.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("--eval-every %d needs --eval-data", f.eval_every));
  }
  // Where the results go, checked before the training rather than after it.
  if (!f.losses_out.empty()) {
    PDIST_RETURN_IF_ERROR(pdist::WithContext(pdist::ir::CheckOutputPath(f.losses_out), "--losses-out"));
  }
  if (f.save_every < 0) return absl::InvalidArgumentError(absl::StrFormat("--save-every %d must be >= 0", f.save_every));
  if (f.save_every > 0 && f.save.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("--save-every %d needs --save DIR", f.save_every));
  }
  // Checked before the training (a path under a file, an unwritable place, an unreadable index
  // all failed only after the last step): made if missing.
  if (!f.save.empty()) PDIST_RETURN_IF_ERROR(pdist::WithContext(pdist::engine::CheckSaveTarget(f.save), "--save"));
  PDIST_ASSIGN_OR_RETURN(const engine::CommBackend* backend, engine::FindCommBackend(f.backend));
  if (f.ranks > 0 && backend->process_per_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ranks sets in-process ranks; with --backend ", f.backend, ", pdist-run sets WORLD_SIZE"));
  }
  if (options.strategy_json.empty() && f.ranks > 1) {
    options.strategy_json = absl::StrFormat("{\"dp_degree\": %d}", f.ranks);  // plain data parallelism
  }
  return options;
}

// The training data, or with `eval` the held-out data, read in file order.
absl::StatusOr<pdist::engine::TokenDataset> OpenDataset(const TrainFlags& f, const pdist::ir::Program& model,
                                                        bool eval = false) {
  using namespace pdist;
  engine::TokenDatasetOptions options;
  options.path = eval ? f.eval_data : f.data;
  options.seed = static_cast<uint64_t>(f.data_seed);
  options.shuffle = !eval;
  PDIST_ASSIGN_OR_RETURN(options.format, engine::ParseTokenFormat(f.data_format));
  PDIST_ASSIGN_OR_RETURN(engine::TokenDatasetOptions resolved, engine::DatasetOptionsForModel(model, options));
  return engine::TokenDataset::Open(resolved);
}

// The mean loss over f.eval_batches batches of the held-out data, from its start.
absl::StatusOr<double> HeldOutLoss(const TrainFlags& f, pdist::engine::Engine& trainer,
                                   pdist::engine::TokenDataset& held_out) {
  held_out.Seek(0);
  return trainer.Evaluate(pdist::engine::BatchesFrom(held_out), f.eval_batches);
}

// Fits `trainer` for f.steps with a progress bar (and the held-out loss every f.eval_every
// steps), then reports, writes the losses and saves.
absl::Status FitAndReport(const TrainFlags& f, pdist::engine::Engine& trainer, pdist::engine::TokenDataset& dataset,
                          pdist::engine::TokenDataset* held_out) {
  using namespace pdist;
  // Under gloo every process trains; rank 0 reports and writes files.
  const bool reporter = trainer.first_local_rank() == 0;
  const bool quiet = f.quiet || !reporter;
  const int64_t tokens_per_step = trainer.tokens_per_step();
  // Model FLOPs per step (forward with attention unmasked, and the backward at twice the forward:
  // the Megatron / PaLM convention the planner's MFU uses); 0 when the ops have no FLOP count.
  const double flops_per_step = 3 * ir::models::CountForwardModelFlops(trainer.forward_program()).value_or(0);
  // "0.42 TFLOP/s (MFU 12.5%)" over `steps` steps in `secs` seconds ("" without a FLOP count).
  auto flops_rate = [&](double steps, double secs) -> std::string {
    if (flops_per_step <= 0) return "";
    const double tflops = flops_per_step * steps / secs / 1e12;
    // The job's total; per rank too, as pdist-plan gives it per device (the two read as one number).
    const int64_t ranks = trainer.world_size();
    std::string text = ranks > 1 ? absl::StrFormat("%.3g TFLOP/s (%.3g per rank)", tflops, tflops / static_cast<double>(ranks))
                                 : absl::StrFormat("%.3g TFLOP/s", tflops);
    if (f.peak_tflops > 0) {
      absl::StrAppend(&text, absl::StrFormat(" (MFU %.1f%%)",
                                             100 * tflops / (f.peak_tflops * static_cast<double>(trainer.world_size()))));
    }
    return text;
  };
  tools::ProgressBar bar(f.steps);
  double seconds = 0, first_step_seconds = 0;
  int64_t done = 0;
  std::map<std::string, double> op_seconds;  // summed over steps after the first (warm-up)
  absl::Status eval_status;
  std::vector<engine::StepResult> trained;  // kept here too: a step that fails returns none of them
  std::vector<std::pair<int64_t, double>> held_out_losses;  // (steps trained, loss)
  absl::Status periodic_save;
  // A failed agreement on stopping ends the run with its error; the engine has stopped the
  // world, so nothing collective (the final evaluation and save) runs after it.
  absl::Status agreeing;
  auto signalled = [&]() -> bool {
    absl::StatusOr<int64_t> signal = trainer.MaxOverRanks(received);
    if (!signal.ok()) {
      agreeing = signal.status();
      return true;
    }
    if (*signal != 0) stopping = static_cast<std::sig_atomic_t>(*signal);
    return *signal != 0;
  };
  training = 1;
  auto results = trainer.Fit(engine::BatchesFrom(dataset), f.steps, [&](const engine::StepResult& r) {
    trained.push_back(r);
    seconds += r.seconds;
    if (++done == 1) first_step_seconds = r.seconds;
    // Before a periodic save, which the final one would repeat when the run stops here.
    if (signalled()) return false;
    if (f.save_every > 0 && done % f.save_every == 0 && done < f.steps) {
      periodic_save = trainer.Save(f.save);
      if (!periodic_save.ok()) return false;
    }
    if (held_out != nullptr && f.eval_every > 0 && done % f.eval_every == 0 && done < f.steps) {
      absl::StatusOr<double> loss = HeldOutLoss(f, trainer, *held_out);
      if (!loss.ok()) {
        eval_status = loss.status();
        return false;
      }
      held_out_losses.emplace_back(r.step + 1, *loss);
      if (reporter) std::fprintf(stderr, "%spdist-train: step %lld, held-out loss %.4f\n", quiet ? "" : "\n",
                                 static_cast<long long>(r.step + 1), *loss);
    }
    if (done > 1) {
      for (const auto& [type, t] : r.op_seconds) op_seconds[type] += t;
    }
    if (!quiet) {
      // Under float16 loss scaling: the scale, and the steps skipped because a gradient overflowed.
      const std::string scaling = r.loss_scale ? absl::StrFormat("  scale %g  skipped %lld", *r.loss_scale,
                                                                 static_cast<long long>(r.skipped_steps))
                                               : "";
      bar.Update(done, absl::StrFormat("loss %.4f  lr %.2e  %s tok/s  %s%s", r.loss, r.lr,
                                       tools::HumanCount(static_cast<double>(tokens_per_step * done) / seconds),
                                       flops_rate(static_cast<double>(done), seconds), scaling));
    }
    return true;
  });
  if (!quiet) bar.Finish();
  if (!results.ok()) {
    // The losses of the steps that ran are still a result (a divergence's curve, above all).
    if (reporter && !f.losses_out.empty() && !trained.empty()) {
      WriteLosses(f.losses_out, trained, held_out_losses).IgnoreError();
    }
    return results.status();
  }
  // A mid-run evaluation or checkpoint that failed stopped the training; the outputs still go
  // out below, and its error with theirs.
  const absl::Status stopped =
      !agreeing.ok()      ? WithContext(agreeing, "agreeing with the other ranks on whether to stop")
      : !eval_status.ok() ? WithContext(eval_status, "--eval-data")
                          : WithContext(periodic_save, absl::StrCat("--save-every ", f.save_every));
  if (!agreeing.ok()) {
    if (reporter && !f.losses_out.empty() && !trained.empty()) {
      WriteLosses(f.losses_out, trained, held_out_losses).IgnoreError();
    }
    return stopped;
  }
  if (stopping != 0 && reporter) {
    std::fprintf(stderr, "pdist-train: %s after step %lld of %lld: the checkpoint and losses go out as at the end\n",
                 stopping == SIGINT ? "interrupted" : "terminated", static_cast<long long>(done),
                 static_cast<long long>(f.steps));
  }
  if (reporter && !results->empty()) {
    // The rate leaves out the first step when there are others: it pays one-time costs (the
    // allocator's first blocks, cuBLASLt's heuristics, page faults) that a long run does not.
    const bool warm = done > 1;
    const double timed_steps = static_cast<double>(warm ? done - 1 : done);
    const double timed_seconds = warm ? seconds - first_step_seconds : seconds;
    const std::string rate = flops_rate(timed_steps, timed_seconds);
    std::fprintf(stderr, "pdist-train: %lld steps, loss %.4f -> %.4f, %.1f tokens/s%s%s, peak activation memory %s\n",
                 static_cast<long long>(results->size()), results->front().loss, results->back().loss,
                 static_cast<double>(tokens_per_step) * timed_steps / timed_seconds,
                 rate.empty() ? "" : (", " + rate).c_str(),
                 warm ? absl::StrCat(" (steps 2-", done, ")").c_str() : "",
                 tools::HumanCount(static_cast<double>(results->back().peak_bytes)).append("B").c_str());
    if (results->back().loss_scale) {
      // The count is the run's, kept in checkpoints: out of every step since the first, not this call's.
      std::fprintf(stderr, "pdist-train: float16 loss scale %g at the end; %lld of %lld steps skipped on overflow\n",
                   *results->back().loss_scale, static_cast<long long>(results->back().skipped_steps),
                   static_cast<long long>(results->back().step + 1));
    }
  }
  absl::Status held_out_status;  // reported after the outputs are written: a failed evaluation lost them
  if (held_out != nullptr) {
    absl::StatusOr<double> loss = HeldOutLoss(f, trainer, *held_out);
    if (loss.ok()) {
      if (!results->empty()) held_out_losses.emplace_back(results->back().step + 1, *loss);
      if (reporter) std::fprintf(stderr, "pdist-train: held-out loss %.4f (%lld batches of %s)\n", *loss,
                                 static_cast<long long>(f.eval_batches), f.eval_data.c_str());
    } else {
      held_out_status = pdist::WithContext(loss.status(), "--eval-data");
    }
  }
  if (reporter && f.profile && done > 1) PrintProfile(op_seconds, done - 1);
  // The checkpoint first, and each output whatever became of the other: a losses file that could
  // not be written lost the trained model.
  const absl::Status saved = f.save.empty() ? absl::OkStatus() : trainer.Save(f.save);
  const absl::Status losses =
      reporter && !f.losses_out.empty() ? WriteLosses(f.losses_out, *results, held_out_losses) : absl::OkStatus();
  std::vector<absl::Status> failed;
  for (const absl::Status& s : {stopped, saved, losses, held_out_status}) {
    if (!s.ok()) failed.push_back(s);
  }
  if (failed.empty()) return absl::OkStatus();
  // A save or evaluation that failed mid-run (a full disk) usually fails the same way at the
  // end: said once.
  std::vector<std::string> messages;
  for (const absl::Status& s : failed) {
    auto said = std::find_if(messages.begin(), messages.end(),
                             [&](const std::string& m) { return absl::StrContains(m, s.message()); });
    if (said != messages.end()) {
      said->append(" (and again at the end)");
    } else {
      messages.emplace_back(s.message());
    }
  }
  return absl::Status(failed.front().code(), absl::StrJoin(messages, "; and "));
}

// One rank's peak TFLOP/s for the model's dtype from --cluster (a file, or a preset sized to the
// job), else --peak-tflops (0: no MFU).
absl::StatusOr<double> PeakTflops(const TrainFlags& f, const pdist::ir::Program& model, int64_t world_size) {
  using namespace pdist;
  if (f.cluster.empty()) return f.peak_tflops;
  absl::StatusOr<strategy::Cluster> cluster;
  if (absl::StatusOr<std::string> text = ir::ReadFileToString(f.cluster); text.ok()) {
    cluster = strategy::ParseCluster(*text);
  } else if (text.status().code() == absl::StatusCode::kNotFound) {
    cluster = strategy::ClusterPreset(f.cluster, world_size);
  } else {
    cluster = text.status();
  }
  if (!cluster.ok()) return WithContext(cluster.status(), absl::StrCat("--cluster ", f.cluster));
  const ir::Value* loss = model.loss();
  PDIST_ASSIGN_OR_RETURN(double peak, cluster->PeakFlops(loss != nullptr ? loss->type().dtype : ir::DataType::kFloat32));
  return peak / 1e12;
}

absl::Status Train(const std::string& model_path, TrainFlags f) {
  using namespace pdist;
  PDIST_ASSIGN_OR_RETURN(engine::EngineOptions options, EngineOptionsFrom(f));
  PDIST_ASSIGN_OR_RETURN(ir::Program program, ir::LoadProgramAuto(model_path));
  // Under pdist-run (srun, mpirun) the processes are the ranks: without a strategy, as many of
  // data parallelism (each used to train alone, racing on every file it wrote) — unless the
  // program places its tensors itself (shard_tensor), whose meshes name the ranks.
  PDIST_ASSIGN_OR_RETURN(const engine::CommBackend* backend, engine::FindCommBackend(f.backend));
  if (options.strategy_json.empty() && backend->process_per_rank && engine::LaunchedProcesses() > 1 &&
      !ir::HasPlacements(program)) {
    options.strategy_json = absl::StrFormat("{\"dp_degree\": %d}", engine::LaunchedProcesses());
  }
  PDIST_ASSIGN_OR_RETURN(engine::TokenDataset dataset, OpenDataset(f, program));
  std::optional<engine::TokenDataset> held_out;
  if (!f.eval_data.empty()) {
    absl::StatusOr<engine::TokenDataset> opened = OpenDataset(f, program, /*eval=*/true);
    if (!opened.ok()) return WithContext(opened.status(), "--eval-data");
    held_out = *std::move(opened);
    // An evaluation reads the held-out batches in order from the start: more than the file holds
    // would count its batches again (and a huge count would run for hours).
    if (!f.eval_batches_given) f.eval_batches = std::min(f.eval_batches, held_out->batches_per_epoch());
    if (f.eval_batches > held_out->batches_per_epoch()) {
      return absl::InvalidArgumentError(absl::StrFormat("--eval-batches %d: %s holds %d batches of this model's shape",
                                                        f.eval_batches, f.eval_data, held_out->batches_per_epoch()));
    }
  }
  PDIST_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> trainer, engine::Engine::Create(std::move(program), options));
  TrainFlags with_peak = f;
  PDIST_ASSIGN_OR_RETURN(with_peak.peak_tflops, PeakTflops(f, trainer->forward_program(), trainer->world_size()));
  if (f.ranks > 0 && f.ranks != trainer->world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--ranks %d but the strategy has %d ranks (dp_degree × mp_degree × pp_degree)", f.ranks, trainer->world_size()));
  }
  if (!f.load.empty()) {
    PDIST_RETURN_IF_ERROR(trainer->Load(f.load));
    dataset.Seek(trainer->step());
    if (trainer->first_local_rank() == 0) {
      std::fprintf(stderr, "pdist-train: resumed from step %lld of %s; %lld more steps\n",
                   static_cast<long long>(trainer->step()), f.load.c_str(), static_cast<long long>(f.steps));
    }
  }
  return FitAndReport(with_peak, *trainer, dataset, held_out ? &*held_out : nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (absl::Status followed = pdist::engine::FollowLauncher(); !followed.ok()) return Fail(followed);
  TrainFlags f;
  // What a launcher says through the environment, unless a flag overrides it: pdist-run's
  // --timeline directory, and the backend its ranks use (gloo under pdist-run, srun, mpirun).
  if (const char* dir = std::getenv("PDIST_TIMELINE_DIR")) f.timeline = dir;
  f.backend = pdist::engine::BackendFromEnvironment();
  pdist::cli::FlagSet flags("pdist-train", "MODEL --data FILE [options]",
                            "Trains MODEL (model.pb or textual IR with a loss) on a dataset and reports the loss of every "
                            "step.");
  RegisterFlags(flags, &f);
  const std::vector<std::string> args = flags.ParseOrExit(argc, argv);
  f.eval_batches_given = flags.Given("eval-batches");
  // What is wrong, in one line (the whole --help after it hid it).
  if (args.size() > 1) {
    std::fprintf(stderr, "pdist-train: one MODEL, got %zu arguments ('%s', '%s'%s); the data goes after --data\n"
                         "(run 'pdist-train --help' for usage)\n",
                 args.size(), args[0].c_str(), args[1].c_str(), args.size() > 2 ? ", ..." : "");
    return 2;
  }
  if (args.empty() || f.data.empty()) {
    std::fprintf(stderr, "pdist-train: expected MODEL and --data FILE%s\n(run 'pdist-train --help' for usage)\n",
                 args.empty() ? "" : " (no --data given)");
    return 2;
  }
  std::signal(SIGINT, StopAfterThisStep);
  std::signal(SIGTERM, StopAfterThisStep);
  absl::Status trained = Train(args[0], f);
  if (!trained.ok()) return Fail(trained);
  return stopping != 0 ? 128 + stopping : 0;
}
