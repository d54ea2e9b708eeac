// RunOp and CheckOpGradients: single-op programs through the real builder, autodiff and executor.
#include "tests/testing/op_testing.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "executor/executor.h"
#include "executor/random.h"
#include "ir/builder.h"
#include "ir/status.h"
#include "passes/autodiff.h"

namespace pdist::testing {

using exec::Tensor;

Tensor RandomTensor(const ir::TensorType& type, uint64_t seed, double lo, double hi) {
  std::vector<double> values(static_cast<size_t>(type.num_elements()));
  const uint64_t key = exec::StreamKey(seed, 0x5EED);
  for (size_t i = 0; i < values.size(); ++i) {
    const double u = lo + (hi - lo) * exec::UniformAt(key, i);
    values[i] = type.dtype == ir::DataType::kBool ? (u > 0.5 ? 1.0 : 0.0)
                : ir::IsFloatingPoint(type.dtype)   ? u
                                                    : std::floor(u);
  }
  return exec::TensorFromDoubles(type, values);
}

namespace {

struct OneOpProgram {
  ir::Program program;
  std::vector<ir::Value*> results;
  exec::Feeds feeds;
};

absl::StatusOr<OneOpProgram> BuildOneOp(const std::string& op_type, const std::vector<Tensor>& inputs,
                                        const ir::AttributeMap& attrs) {
  OneOpProgram p;
  ir::Builder b(&p.program);
  std::vector<ir::Value*> operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      operands.push_back(nullptr);
      continue;
    }
    const std::string name = absl::StrCat("in", i);
    operands.push_back(b.Data(name, inputs[i].type()));
    p.feeds[name] = inputs[i];
  }
  PDIST_ASSIGN_OR_RETURN(p.results, b.Create(op_type, operands, attrs));
  return p;
}

// Loss = sum_k sum(result_k * weight_k): built into the program so that AppendBackward sees it.
absl::StatusOr<ir::Value*> WeightedSumLoss(ir::Builder& b, const std::vector<ir::Value*>& results,
                                           const std::vector<int>& which, exec::Feeds& feeds, uint64_t seed) {
  ir::Value* loss = nullptr;
  for (size_t k = 0; k < results.size(); ++k) {
    ir::Value* r = results[k];
    const bool selected = which.empty() ? ir::IsFloatingPoint(r->type().dtype)
                                        : std::find(which.begin(), which.end(), static_cast<int>(k)) != which.end();
    if (!selected || r->type().num_elements() == 0) continue;
    const std::string name = absl::StrCat("loss_weight", k);
    ir::Value* w = b.Data(name, r->type());
    feeds[name] = RandomTensor(r->type(), seed + 100 + k);
    PDIST_ASSIGN_OR_RETURN(ir::Value* prod, b.Op1("multiply", {r, w}));
    PDIST_ASSIGN_OR_RETURN(ir::Value* s, b.Op1("sum", {prod}));
    if (loss == nullptr) {
      loss = s;
    } else {
      PDIST_ASSIGN_OR_RETURN(loss, b.Op1("add", {loss, s}));
    }
  }
  if (loss == nullptr) return absl::InvalidArgumentError("no floating-point result to differentiate");
  return loss;
}

absl::StatusOr<double> EvalLoss(const ir::Program& program, const exec::Feeds& feeds) {
  PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(program));
  exec::Workspace ws;
  PDIST_ASSIGN_OR_RETURN(exec::RunResult r, executor.Run(feeds, ws));
  return r.loss;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op_type, const std::vector<Tensor>& inputs,
                                          const ir::AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(OneOpProgram p, BuildOneOp(op_type, inputs, attrs));
  exec::ExecutorOptions options;
  for (const ir::Value* r : p.results) options.fetch_ids.push_back(r->id());
  PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(p.program, options));
  exec::Workspace ws;
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, executor.Run(p.feeds, ws));
  std::vector<Tensor> out;
  for (const ir::Value* r : p.results) out.push_back(run.fetched.at(r->id()));
  return out;
}

absl::Status CheckOpGradients(const std::string& op_type, const std::vector<GradInput>& inputs,
                              const ir::AttributeMap& attrs, const GradCheckOptions& options) {
  std::vector<Tensor> values;
  for (const GradInput& in : inputs) values.push_back(in.value);
  PDIST_ASSIGN_OR_RETURN(OneOpProgram p, BuildOneOp(op_type, values, attrs));
  ir::Builder b(&p.program);
  PDIST_ASSIGN_OR_RETURN(ir::Value* loss, WeightedSumLoss(b, p.results, options.loss_results, p.feeds, options.seed));
  p.program.set_loss(loss);

  // Differentiate with respect to the inputs by making them (frozen-free) parameters: autodiff
  // differentiates parameters, so each differentiable input becomes one.
  ir::Program grad_program;
  {
    ir::Builder gb(&grad_program);
    exec::Feeds feeds;
    std::vector<ir::Value*> operands;
    std::vector<int> diff_inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i].value;
      if (!t.defined()) {
        operands.push_back(nullptr);
        continue;
      }
      const std::string name = absl::StrCat("in", i);
      if (inputs[i].differentiable && t.dtype() == ir::DataType::kFloat64) {
        operands.push_back(gb.Parameter(name, t.type(), "zeros"));
        diff_inputs.push_back(static_cast<int>(i));
      } else {
        operands.push_back(gb.Data(name, t.type()));
      }
    }
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::Value*> results, gb.Create(op_type, operands, attrs));
    exec::Feeds loss_feeds;
    PDIST_ASSIGN_OR_RETURN(ir::Value* gloss, WeightedSumLoss(gb, results, options.loss_results, loss_feeds, options.seed));
    grad_program.set_loss(gloss);
    PDIST_RETURN_IF_ERROR(passes::AppendBackward(grad_program, gloss));

    exec::ExecutorOptions exec_options;
    for (const ir::StateUpdate& g : grad_program.gradients()) exec_options.fetch_ids.push_back(g.new_value->id());
    PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(grad_program, exec_options));
    exec::Workspace ws;
    for (const auto& [name, t] : p.feeds) {
      if (grad_program.FindArgument(name) && grad_program.FindArgument(name)->role() == ir::ValueRole::kParameter) {
        ws[name] = t;
      } else {
        feeds[name] = t;
      }
    }
    PDIST_ASSIGN_OR_RETURN(exec::RunResult run, executor.Run(feeds, ws));

    for (int i : diff_inputs) {
      const std::string name = absl::StrCat("in", i);
      const ir::Value* param = grad_program.FindArgument(name);
      const ir::Value* grad = grad_program.GradientOf(param);
      if (grad == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(op_type, ": no gradient reached input ", i));
      }
      const Tensor analytic = run.fetched.at(grad->id());
      // Central differences on the forward-only program.
      Tensor x = p.feeds.at(name).Clone();
      exec::Feeds perturbed = p.feeds;
      perturbed[name] = x;
      double worst = 0;
      std::string worst_msg;
      for (int64_t e = 0; e < x.num_elements(); ++e) {
        double* xe = x.data<double>() + e;
        const double saved = *xe;
        *xe = saved + options.step;
        PDIST_ASSIGN_OR_RETURN(double plus, EvalLoss(p.program, perturbed));
        *xe = saved - options.step;
        PDIST_ASSIGN_OR_RETURN(double minus, EvalLoss(p.program, perturbed));
        *xe = saved;
        const double numeric = (plus - minus) / (2 * options.step);
        const double a = analytic.At(e);
        const double excess = std::abs(a - numeric) - (options.atol + options.rtol * std::abs(numeric));
        if (excess > worst) {
          worst = excess;
          worst_msg = absl::StrCat(op_type, ": gradient of input ", i, " element ", e, ": analytic ", a,
                                   " vs numeric ", numeric);
        }
      }
      if (worst > 0) return absl::InternalError(worst_msg);
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::testing
