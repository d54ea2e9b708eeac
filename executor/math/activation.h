// The activations' math, written once against Eigen's array API and shared: the CPU kernels
// (executor/cpu/activation_kernels.cc) instantiate it with Eigen array maps (vectorised), the
// CUDA kernels (executor/cuda/activation_launch.cu) with ScalarArray, one element per thread.
// tests/executor/shared_math_test.cc runs the ScalarArray form on the CPU against the Eigen
// kernels, so the math a GPU runs is checked where there is no GPU.
#pragma once

#include <math.h>

#include "executor/host_device.h"

namespace pdist::exec::math {

template <typename A>
using Scalar = typename A::Scalar;

// Each activation: Forward(x) and Backward(saved, g), where saved is what the gradient op reads
// (out for relu, tanh, exp, sigmoid, sqrt and rsqrt; x for gelu, silu and erf, as declared in
// ir/ops/activation.cc) and g is
// out_grad. Arguments are Eigen array maps; results are expressions.
struct Relu {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x.max(Scalar<A>(0)); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& out, const A& g) { return (out > Scalar<A>(0)).select(g, Scalar<A>(0)); }
};

// gelu(x) = x Φ(x), Φ(x) = 0.5 erfc(−x / √2). Not 0.5 (1 + erf(x / √2)): for x < 0 that sum
// cancels (1 + erf(−2) = 0.005), and an erf a few ulp apart (the CPU's libm, the GPU's) becomes
// a gelu 1e-5 apart; erfc keeps full relative precision there.
struct GeluErf {
  template <typename A>
  PDIST_HOST_DEVICE static auto Phi(const A& x) {
    using T = Scalar<A>;
    return T(0.5) * (x * T(-M_SQRT1_2)).erfc();
  }
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x * Phi(x); }
  // Φ(x) + x φ(x), φ the standard normal density.
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& x, const A& g) {
    using T = Scalar<A>;
    const T inv_sqrt_2pi = T(0.3989422804014327);
    return g * (Phi(x) + inv_sqrt_2pi * x * (T(-0.5) * x.square()).exp());
  }
};

// gelu(x) ≈ 0.5 x (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³), computed as x σ(2u) (the same
// function: 0.5 (1 + tanh u) = σ(2u)) so that nothing cancels for x < 0, as above.
struct GeluTanh {
  static constexpr double kSqrt2OverPi = 0.7978845608028654;
  static constexpr double kCubic = 0.044715;
  template <typename A>
  PDIST_HOST_DEVICE static auto Inner(const A& x) {
    using T = Scalar<A>;
    return T(kSqrt2OverPi) * (x + T(kCubic) * x.cube());
  }
  // σ(2u) and σ(−2u), each without a subtraction.
  template <typename A>
  PDIST_HOST_DEVICE static auto Sigmoid2u(const A& x) { return (Scalar<A>(1) + (Scalar<A>(-2) * Inner(x)).exp()).inverse(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto SigmoidMinus2u(const A& x) { return (Scalar<A>(1) + (Scalar<A>(2) * Inner(x)).exp()).inverse(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x * Sigmoid2u(x); }
  // d/dx x σ(2u) = σ(2u) + 2 x σ(2u) σ(−2u) u'.
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& x, const A& g) {
    using T = Scalar<A>;
    const auto dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * x.square());
    return g * (Sigmoid2u(x) + T(2) * x * Sigmoid2u(x) * SigmoidMinus2u(x) * dinner);
  }
};

// silu(x) = x σ(x); silu'(x) = σ(x) (1 + x (1 − σ(x))).
struct Silu {
  template <typename A>
  PDIST_HOST_DEVICE static auto Sigmoid(const A& x) { return (Scalar<A>(1) + (-x).exp()).inverse(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x * Sigmoid(x); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& x, const A& g) {
    using T = Scalar<A>;
    const auto s = Sigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};

struct Tanh {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x.tanh(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& out, const A& g) { return g * (Scalar<A>(1) - out.square()); }
};

struct Exp {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x.exp(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& out, const A& g) { return g * out; }
};

struct Sigmoid {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return (Scalar<A>(1) + (-x).exp()).inverse(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& out, const A& g) { return g * out * (Scalar<A>(1) - out); }
};

struct Erf {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x.erf(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& x, const A& g) {
    using T = Scalar<A>;
    return g * T(M_2_SQRTPI) * (-x.square()).exp();
  }
};

struct Sqrt {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x.sqrt(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& out, const A& g) { return g * Scalar<A>(0.5) / out; }
};

struct Rsqrt {
  template <typename A>
  PDIST_HOST_DEVICE static auto Forward(const A& x) { return x.rsqrt(); }
  template <typename A>
  PDIST_HOST_DEVICE static auto Backward(const A& out, const A& g) { return g * Scalar<A>(-0.5) * out.cube(); }
};

}  // namespace pdist::exec::math
