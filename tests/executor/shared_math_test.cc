// The per-element math the CUDA kernels run, checked on the CPU: the activation structs of
// executor/math/activation.h instantiated with ScalarArray (one element at a time, as a GPU
// thread runs them) against the CPU kernels, which instantiate the same structs with Eigen arrays.
// A GPU differs from this only in its libm (erff, expf, tanhf: a few ulp).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "executor/executor.h"
#include "executor/math/activation.h"
#include "executor/math/scalar_array.h"
#include "executor/random.h"
#include "ir/builder.h"

namespace pdist::exec {
namespace {

using ir::DataType;

// The activation `op` and its gradient on the CPU kernels: {out, x_grad} for inputs x, saved, g.
std::pair<std::vector<double>, std::vector<double>> CpuKernels(const std::string& op, DataType dtype,
                                                               const std::vector<double>& x,
                                                               const std::vector<double>& saved,
                                                               const std::vector<double>& g,
                                                               const ir::AttributeMap& attrs) {
  const ir::TensorType type{{static_cast<int64_t>(x.size())}, dtype};
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* out = *b.Op1(op, {b.Data("x", type)}, attrs);
  ir::Value* dx = *b.Op1(op + "_grad", {b.Data("saved", type), b.Data("g", type)}, attrs);
  absl::StatusOr<Executor> executor = Executor::Create(p, {.fetch_ids = {out->id(), dx->id()}});
  EXPECT_TRUE(executor.ok()) << executor.status();
  Workspace ws;
  absl::StatusOr<RunResult> run = executor->Run(
      {{"x", TensorFromDoubles(type, x)}, {"saved", TensorFromDoubles(type, saved)}, {"g", TensorFromDoubles(type, g)}},
      ws);
  EXPECT_TRUE(run.ok()) << run.status();
  return {TensorToDoubles(run->fetched.at(out->id())), TensorToDoubles(run->fetched.at(dx->id()))};
}

template <typename Act, typename T>
void ExpectScalarMathIsTheKernels(const std::string& op, DataType dtype, double low, double high, double tolerance,
                                  const ir::AttributeMap& attrs) {
  constexpr int kPoints = 4096;
  std::vector<double> x(kPoints), saved(kPoints), g(kPoints);
  for (int i = 0; i < kPoints; ++i) {
    x[i] = static_cast<T>(low + (high - low) * UniformAt(11, i));
    saved[i] = static_cast<T>(low + (high - low) * UniformAt(12, i));
    g[i] = static_cast<T>(-1 + 2 * UniformAt(13, i));
  }
  const auto [out, dx] = CpuKernels(op, dtype, x, saved, g, attrs);
  using A = math::ScalarArray<T>;
  for (int i = 0; i < kPoints; ++i) {
    const double forward = A(Act::Forward(A(static_cast<T>(x[i])))).value();
    const double backward = A(Act::Backward(A(static_cast<T>(saved[i])), A(static_cast<T>(g[i])))).value();
    ASSERT_NEAR(forward, out[i], tolerance * std::max(1.0, std::abs(out[i]))) << op << "(" << x[i] << ")";
    ASSERT_NEAR(backward, dx[i], tolerance * std::max(1.0, std::abs(dx[i])))
        << op << "_grad(" << saved[i] << ", " << g[i] << ")";
  }
}

// f32: the Eigen kernels' vectorised exp/erf/tanh against libm, a few ulp apart; f64 closer.
template <typename Act>
void ExpectBothPrecisions(const std::string& op, double low, double high, const ir::AttributeMap& attrs = {}) {
  ExpectScalarMathIsTheKernels<Act, float>(op, DataType::kFloat32, low, high, 1e-5, attrs);
  ExpectScalarMathIsTheKernels<Act, double>(op, DataType::kFloat64, low, high, 1e-12, attrs);
}

TEST(SharedMathTest, TheActivationsOneElementAtATimeAreTheCpuKernels) {
  ExpectBothPrecisions<math::Relu>("relu", -3, 3);
  ExpectBothPrecisions<math::Silu>("silu", -6, 6);
  ExpectBothPrecisions<math::Tanh>("tanh", -4, 4);
  ExpectBothPrecisions<math::Exp>("exp", -8, 8);
  ExpectBothPrecisions<math::Sigmoid>("sigmoid", -8, 8);
  ExpectBothPrecisions<math::Erf>("erf", -3, 3);
  ExpectBothPrecisions<math::Sqrt>("sqrt", 0.01, 9);
  ExpectBothPrecisions<math::Rsqrt>("rsqrt", 0.01, 9);
}

TEST(SharedMathTest, BothGeluFormsOneElementAtATimeAreTheCpuKernels) {
  // gelu's form is an attribute: the erf form is the op's default.
  ExpectBothPrecisions<math::GeluErf>("gelu", -5, 5);
  ExpectBothPrecisions<math::GeluTanh>("gelu", -5, 5, {{"approximate", true}});
}

}  // namespace
}  // namespace pdist::exec
