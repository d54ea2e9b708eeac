// The C API's batches from host memory: pdist_feed arrays (numpy arrays, from Python) turned
// into the engine's feeds, checked against the model's data inputs, for one train or eval step.
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/c_api.h"
#include "engine/c_api_internal.h"
#include "ir/status.h"

namespace {

using pdist::engine::capi::Fail;
using pdist::engine::capi::ToCode;

constexpr int kMaxFeedDims = 8;

std::string DataInputNames(const pdist::ir::Program& forward) {
  std::vector<std::string> names;
  for (const pdist::ir::Value* arg : forward.block().arguments()) {
    if (arg->role() == pdist::ir::ValueRole::kDataInput) names.push_back(absl::StrCat("'", arg->name(), "'"));
  }
  return absl::StrJoin(names, ", ");
}

// The feed's declared type; nothing is read from `data` yet.
absl::StatusOr<pdist::ir::TensorType> FeedType(const pdist_feed& feed, int index) {
  const std::string where = absl::StrCat("feeds[", index, "]");
  if (feed.name == nullptr || feed.dtype == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": name or dtype is NULL"));
  absl::StatusOr<pdist::ir::DataType> dtype = pdist::ir::ParseDataType(feed.dtype);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " ('", feed.name, "'): dtype '", feed.dtype, "' is not a dtype"));
  }
  if (feed.ndim < 0 || feed.ndim > kMaxFeedDims || (feed.ndim > 0 && feed.shape == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " ('", feed.name, "'): ndim ", feed.ndim, " must be in [0, ",
                                                   kMaxFeedDims, "] with a shape of as many dims"));
  }
  return pdist::ir::TensorType{pdist::ir::Shape(feed.shape, feed.shape + feed.ndim), *dtype};
}

// Every feed a data input of the model, of its type, each once (checked before anything is
// allocated or read); the executor then checks that every data input has one.
absl::StatusOr<pdist::exec::Feeds> FeedsFrom(const pdist::engine::Engine& engine, const pdist_feed* feeds, int n) {
  if (n < 0 || (n > 0 && feeds == nullptr)) return absl::InvalidArgumentError(absl::StrCat("feeds is NULL or num_feeds (", n, ") < 0"));
  const pdist::ir::Program& forward = engine.forward_program();
  pdist::exec::Feeds out;
  for (int i = 0; i < n; ++i) {
    PDIST_ASSIGN_OR_RETURN(const pdist::ir::TensorType type, FeedType(feeds[i], i));
    const pdist::ir::Value* arg = forward.FindArgument(feeds[i].name);
    if (arg == nullptr || arg->role() != pdist::ir::ValueRole::kDataInput) {
      return absl::InvalidArgumentError(absl::StrCat("feeds[", i, "]: '", feeds[i].name,
                                                     "' is not a data input of the model (data inputs: ",
                                                     DataInputNames(forward), ")"));
    }
    // numpy has no bfloat16: an f32 array feeds a bf16 or f16 input, rounded here.
    const bool rounded = type.dtype == pdist::ir::DataType::kFloat32 && type.shape == arg->type().shape &&
                         (arg->type().dtype == pdist::ir::DataType::kBFloat16 ||
                          arg->type().dtype == pdist::ir::DataType::kFloat16);
    if (arg->type() != type && !rounded) {
      return absl::InvalidArgumentError(absl::StrCat("feeds[", i, "] ('", feeds[i].name, "'): ", type.ToString(),
                                                     ", but the model's data input is ", arg->type().ToString()));
    }
    if (out.count(feeds[i].name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("feeds[", i, "]: '", feeds[i].name, "' is fed twice"));
    }
    pdist::exec::Tensor t = pdist::exec::Tensor::Empty(type);
    if (t.num_bytes() > 0) {
      if (feeds[i].data == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("feeds[", i, "] ('", feeds[i].name, "'): data is NULL"));
      }
      std::memcpy(t.raw(), feeds[i].data, static_cast<size_t>(t.num_bytes()));
    }
    if (rounded) t = pdist::exec::CastTensor(t, arg->type().dtype);
    out.emplace(feeds[i].name, std::move(t));
  }
  return out;
}

}  // namespace

extern "C" {

pdist_status pdist_engine_train_step(pdist_engine* engine, const pdist_feed* feeds, int num_feeds, double* loss) {
  if (engine == nullptr) return Fail("engine is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  absl::StatusOr<pdist::exec::Feeds> fed = FeedsFrom(*engine->engine, feeds, num_feeds);
  if (!fed.ok()) return ToCode(fed.status());
  absl::StatusOr<pdist::engine::StepResult> step = engine->engine->TrainStep(*fed);
  if (!step.ok()) return ToCode(step.status());
  if (loss != nullptr) *loss = step->loss;
  return ToCode(absl::OkStatus());
}

pdist_status pdist_engine_eval_step(const pdist_engine* engine, const pdist_feed* feeds, int num_feeds, double* loss) {
  if (engine == nullptr || loss == nullptr) return Fail("engine or loss is NULL");
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  absl::StatusOr<pdist::exec::Feeds> fed = FeedsFrom(*engine->engine, feeds, num_feeds);
  if (!fed.ok()) return ToCode(fed.status());
  absl::StatusOr<double> value = engine->engine->EvalStep(*fed);
  if (!value.ok()) return ToCode(value.status());
  *loss = *value;
  return ToCode(absl::OkStatus());
}

pdist_status pdist_engine_predict(pdist_engine* engine, const pdist_feed* feeds, int num_feeds,
                                  const pdist_output** outputs, int* num_outputs) {
  if (engine == nullptr || outputs == nullptr || num_outputs == nullptr) {
    return Fail("engine, outputs or num_outputs is NULL");
  }
  std::lock_guard<std::recursive_mutex> lock(engine->mu);
  absl::StatusOr<pdist::exec::Feeds> fed = FeedsFrom(*engine->engine, feeds, num_feeds);
  if (!fed.ok()) return ToCode(fed.status());
  absl::StatusOr<std::map<std::string, pdist::exec::Tensor>> predicted = engine->engine->Predict(*fed);
  if (!predicted.ok()) return ToCode(predicted.status());
  engine->predicted.clear();
  engine->predicted_names.clear();
  engine->predicted_shapes.clear();
  engine->outputs.clear();
  // In the model's order; numpy has no bfloat16, so low-precision floats widen to f32.
  for (const pdist::ir::ProgramOutput& o : engine->engine->forward_program().outputs()) {
    pdist::exec::Tensor t = predicted->at(o.name);
    if (pdist::ir::IsLowPrecisionFloat(t.dtype())) {
      t = pdist::exec::CastTensor(t, pdist::ir::DataType::kFloat32);
    }
    engine->predicted_names.push_back(o.name);
    engine->predicted_shapes.push_back(t.shape());
    engine->predicted.push_back(std::move(t));
  }
  for (size_t i = 0; i < engine->predicted.size(); ++i) {
    const pdist::exec::Tensor& t = engine->predicted[i];
    engine->outputs.push_back({engine->predicted_names[i].c_str(), pdist::ir::DataTypeName(t.dtype()),
                               static_cast<int>(t.shape().size()), engine->predicted_shapes[i].data(), t.raw()});
  }
  *outputs = engine->outputs.data();
  *num_outputs = static_cast<int>(engine->outputs.size());
  return ToCode(absl::OkStatus());
}

}  // extern "C"
