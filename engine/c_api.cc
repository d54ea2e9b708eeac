// The C API over engine::Engine: status codes, a thread-local last error, opaque handles.
#include "engine/c_api.h"

#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/c_api_internal.h"
#include "engine/engine.h"
#include "engine/engine_version.h"
#include "engine/launched_rank.h"
#include "engine/token_batches.h"
#include "ir/serialize.h"
#include "ir/status.h"

namespace {
thread_local std::string last_error;
}  // namespace

namespace pdist::engine::capi {

pdist_status ToCode(const absl::Status& status) {
  last_error = status.ok() ? "" : std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kOk: return PDIST_OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return PDIST_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound: return PDIST_NOT_FOUND;
    case absl::StatusCode::kFailedPrecondition: return PDIST_FAILED_PRECONDITION;
    case absl::StatusCode::kUnimplemented: return PDIST_UNIMPLEMENTED;
    default: return PDIST_INTERNAL;
  }
}

pdist_status Fail(const char* message) { return ToCode(absl::InvalidArgumentError(message)); }

absl::Status WrongOptionType(const char* what, const std::string& key, const char* expected, const std::string& value) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": \"", key, "\" must be ", expected, ", got ", value));
}

}  // namespace pdist::engine::capi

namespace {

using pdist::engine::capi::Fail;
using pdist::engine::capi::ToCode;

absl::StatusOr<pdist::engine::EngineOptions> ToOptions(const pdist_engine_config* config) {
  pdist_engine_config defaults;
  pdist_engine_config_init(&defaults);
  const pdist_engine_config& c = config ? *config : defaults;
  pdist::engine::EngineOptions o;
  PDIST_ASSIGN_OR_RETURN(o.optimizer.type, pdist::passes::ParseOptimizerType(c.optimizer ? c.optimizer : "adamw"));
  // Worded as the engine words its own check (nan and inf read differently from the two).
  if (!(c.learning_rate > 0) || !std::isfinite(c.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat("learning_rate ", c.learning_rate, " must be > 0 and finite"));
  }
  o.lr.base = c.learning_rate;
  o.lr.warmup_steps = c.warmup_steps;
  o.lr.decay_steps = c.decay_steps;
  o.optimizer.weight_decay = c.weight_decay;
  o.optimizer.beta1 = c.beta1;
  o.optimizer.beta2 = c.beta2;
  o.optimizer.epsilon = c.epsilon;
  o.seed = c.seed;
  if (c.strategy_json) o.strategy_json = c.strategy_json;
  o.backend = c.backend != nullptr ? c.backend : pdist::engine::BackendFromEnvironment();
  if (c.device != nullptr) o.device = c.device;
  if (c.fusions != nullptr) PDIST_RETURN_IF_ERROR(pdist::WithContext(o.SetFusions(c.fusions), "fusions"));
  if (c.timeline_dir != nullptr) o.timeline_dir = c.timeline_dir;
  o.collective_timeout_s = c.collective_timeout_s;  // checked by Engine::Create, by name
  o.checkpoint_timeout_s = c.checkpoint_timeout_s;
  return o;
}

pdist_status Create(absl::StatusOr<pdist::ir::Program> program, const pdist_engine_config* config,
                    pdist_engine** engine) {
  if (engine == nullptr) return Fail("engine output pointer is NULL");
  *engine = nullptr;
  if (!program.ok()) return ToCode(program.status());
  absl::StatusOr<pdist::engine::EngineOptions> options = ToOptions(config);
  if (!options.ok()) return ToCode(options.status());
  // A rank that pdist-run started dies with it, as pdist-train's ranks do.
  if (absl::Status followed = pdist::engine::FollowLauncher(); !followed.ok()) return ToCode(followed);
  auto created = pdist::engine::Engine::Create(std::move(*program), *std::move(options));
  if (!created.ok()) return ToCode(created.status());
  *engine = new pdist_engine{std::move(*created)};
  return ToCode(absl::OkStatus());
}

absl::StatusOr<pdist::engine::TokenDataset> OpenDataset(const pdist::engine::Engine& engine, const pdist_dataset* data,
                                                        bool shuffle) {
  if (data == nullptr || data->path == nullptr) return absl::InvalidArgumentError("dataset or its path is NULL");
  pdist::engine::TokenDatasetOptions o;
  o.path = data->path;
  switch (data->format) {
    case PDIST_DATA_TEXT_BYTES: o.format = pdist::engine::TokenFormat::kText; break;
    case PDIST_DATA_UINT16: o.format = pdist::engine::TokenFormat::kUint16; break;
    case PDIST_DATA_UINT32: o.format = pdist::engine::TokenFormat::kUint32; break;
    default: return absl::InvalidArgumentError(absl::StrCat("unknown dataset format ", static_cast<int>(data->format)));
  }
  o.seed = data->seed;
  o.shuffle = shuffle;
  PDIST_ASSIGN_OR_RETURN(o, pdist::engine::DatasetOptionsForModel(engine.forward_program(), o));
  return pdist::engine::TokenDataset::Open(o);
}

}  // namespace

extern "C" {

void pdist_engine_config_init(pdist_engine_config* config) {
  if (config == nullptr) return;
  *config = pdist_engine_config{};
  config->optimizer = "adamw";
  config->learning_rate = 1e-3;
  config->weight_decay = 0.01;
  config->beta1 = 0.9;
  config->beta2 = 0.999;
  config->epsilon = 1e-8;
  config->seed = 1;
  const pdist::engine::EngineOptions engine_defaults;
  config->collective_timeout_s = engine_defaults.collective_timeout_s;
  config->checkpoint_timeout_s = engine_defaults.checkpoint_timeout_s;
}

pdist_status pdist_engine_create_from_file(const char* model_path, const pdist_engine_config* config,
                                           pdist_engine** engine) {
  if (model_path == nullptr) return Fail("model path is NULL");
  return Create(pdist::ir::LoadProgramAuto(model_path), config, engine);
}

pdist_status pdist_engine_create_from_bytes(const void* model_bytes, size_t size, const pdist_engine_config* config,
                                            pdist_engine** engine) {
  if (model_bytes == nullptr) return Fail("model bytes are NULL");
  // What a model file holds: a model.pb's bytes or the program's text (pdist_program_print's), the
  // C string's NUL included or not.
  const std::string_view bytes(static_cast<const char*>(model_bytes), size);
  absl::StatusOr<pdist::ir::Program> program = pdist::ir::DecodeProgram(bytes);
  if (!program.ok() && !bytes.empty() && bytes.back() == '\0') {
    absl::StatusOr<pdist::ir::Program> text = pdist::ir::DecodeProgram(bytes.substr(0, bytes.find_last_not_of('\0') + 1));
    if (text.ok()) program = std::move(text);
  }
  return Create(std::move(program), config, engine);
}

void pdist_engine_destroy(pdist_engine* engine) { delete engine; }

namespace {

// Whether every rank goes on after a step: a callback's wish to stop, agreed over the job
// (Engine::MaxOverRanks). Ranks that are processes each run their own callback, and Python's
// Ctrl-C reaches each at its own moment (pdist-run forwards it to all): one that stopped alone
// would leave the others in their next step's collectives until it exited or they timed out.
// A failed agreement (the world is then aborted) stops, and is kept in `failed`.
bool EveryRankGoesOn(const pdist::engine::Engine& engine, int callback_result, absl::Status& failed) {
  absl::StatusOr<int64_t> any = engine.MaxOverRanks(callback_result != 0 ? 1 : 0);
  if (!any.ok()) {
    failed = pdist::WithContext(any.status(), "agreeing with the other ranks on whether to stop");
    return false;
  }
  return *any == 0;
}

}  // namespace

pdist_status pdist_engine_fit(pdist_engine* engine, const pdist_dataset* data, int64_t steps,
                              pdist_step_callback callback, void* user_data) {
  if (engine == nullptr) return Fail("engine is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  if (steps < 0) return ToCode(absl::InvalidArgumentError(absl::StrCat("steps must be >= 0, got ", steps)));
  absl::StatusOr<pdist::engine::TokenDataset> dataset = OpenDataset(*engine->engine, data, /*shuffle=*/true);
  if (!dataset.ok()) return ToCode(dataset.status());
  dataset->Seek(engine->engine->step());  // resuming after load continues the data order
  absl::Status agreeing;
  auto result = engine->engine->Fit(pdist::engine::BatchesFrom(*dataset), steps,
                                    [&](const pdist::engine::StepResult& r) {
                                      const int stop = callback == nullptr ? 0 : callback(r.step, r.loss, r.seconds, user_data);
                                      return EveryRankGoesOn(*engine->engine, stop, agreeing);
                                    });
  return ToCode(agreeing.ok() ? result.status() : agreeing);
}

pdist_status pdist_engine_evaluate(pdist_engine* engine, const pdist_dataset* data, int64_t steps, double* mean_loss) {
  return pdist_engine_evaluate_with_callback(engine, data, steps, nullptr, nullptr, mean_loss);
}

pdist_status pdist_engine_evaluate_with_callback(pdist_engine* engine, const pdist_dataset* data, int64_t steps,
                                                 pdist_step_callback callback, void* user_data, double* mean_loss) {
  if (engine == nullptr || mean_loss == nullptr) return Fail("engine or mean_loss is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  absl::StatusOr<pdist::engine::TokenDataset> dataset = OpenDataset(*engine->engine, data, /*shuffle=*/false);
  if (!dataset.ok()) return ToCode(dataset.status());
  // Every rank agrees after every batch, a callback or not (as fit does): a rank with a callback
  // beside ranks without one would otherwise call one more collective per batch than they.
  absl::Status agreeing;
  auto on_batch = [&](int64_t batch, double loss, double seconds) {
    const int stop = callback == nullptr ? 0 : callback(batch, loss, seconds, user_data);
    return EveryRankGoesOn(*engine->engine, stop, agreeing);
  };
  absl::StatusOr<double> loss = engine->engine->Evaluate(pdist::engine::BatchesFrom(*dataset), steps, on_batch);
  if (!agreeing.ok()) return ToCode(agreeing);
  if (!loss.ok()) return ToCode(loss.status());
  *mean_loss = *loss;
  return ToCode(absl::OkStatus());
}

pdist_status pdist_engine_any_rank(pdist_engine* engine, int value, int* any) {
  if (engine == nullptr || any == nullptr) return Fail("engine or any is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  absl::Status failed;
  *any = EveryRankGoesOn(*engine->engine, value, failed) ? 0 : 1;
  return ToCode(failed);
}

pdist_status pdist_engine_save(const pdist_engine* engine, const char* path) {
  if (engine == nullptr || path == nullptr) return Fail("engine or path is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  return ToCode(engine->engine->Save(path));
}

pdist_status pdist_engine_load(pdist_engine* engine, const char* path) {
  if (engine == nullptr || path == nullptr) return Fail("engine or path is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  return ToCode(engine->engine->Load(path));
}

int64_t pdist_engine_step(const pdist_engine* engine) {
  if (engine == nullptr) return -1;
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  return engine->engine->step();
}

int64_t pdist_engine_local_rank_count(const pdist_engine* engine) {
  return engine == nullptr ? 0 : static_cast<int64_t>(engine->engine->local_ranks().size());
}

const char* pdist_last_error(void) { return last_error.c_str(); }

const char* pdist_version(void) { return pdist::EngineVersion(); }

}  // extern "C"
