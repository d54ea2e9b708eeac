// ScalarArray<T>: one element dressed as an Eigen array, so that the activation math written
// once against Eigen's array API (executor/math/activation.h: x.exp(), x.square(),
// (x > 0).select(a, b), ...) runs per element on a GPU — and on the CPU in the test that checks
// it against the Eigen kernels. Only the members that math uses are here.
#pragma once

#include <math.h>

#include "executor/host_device.h"

namespace pdist::exec::math {

namespace scalar {
// float and double overloads of the C math library, callable from host and device code.
PDIST_HOST_DEVICE inline float Exp(float x) { return expf(x); }
PDIST_HOST_DEVICE inline double Exp(double x) { return exp(x); }
PDIST_HOST_DEVICE inline float Erf(float x) { return erff(x); }
PDIST_HOST_DEVICE inline double Erf(double x) { return erf(x); }
PDIST_HOST_DEVICE inline float Erfc(float x) { return erfcf(x); }
PDIST_HOST_DEVICE inline double Erfc(double x) { return erfc(x); }
PDIST_HOST_DEVICE inline float Tanh(float x) { return tanhf(x); }
PDIST_HOST_DEVICE inline double Tanh(double x) { return tanh(x); }
PDIST_HOST_DEVICE inline float Sqrt(float x) { return sqrtf(x); }
PDIST_HOST_DEVICE inline double Sqrt(double x) { return sqrt(x); }
#if defined(__CUDA_ARCH__)
PDIST_HOST_DEVICE inline float Rsqrt(float x) { return rsqrtf(x); }
PDIST_HOST_DEVICE inline double Rsqrt(double x) { return rsqrt(x); }
#else
inline float Rsqrt(float x) { return 1.0f / sqrtf(x); }
inline double Rsqrt(double x) { return 1.0 / sqrt(x); }
#endif
}  // namespace scalar

template <typename T>
class ScalarMask;

template <typename T>
class ScalarArray {
 public:
  using Scalar = T;
  PDIST_HOST_DEVICE ScalarArray(T v) : v_(v) {}  // NOLINT: implicit, as Eigen's scalar operands
  PDIST_HOST_DEVICE T value() const { return v_; }

  PDIST_HOST_DEVICE ScalarArray exp() const { return scalar::Exp(v_); }
  PDIST_HOST_DEVICE ScalarArray erf() const { return scalar::Erf(v_); }
  PDIST_HOST_DEVICE ScalarArray erfc() const { return scalar::Erfc(v_); }
  PDIST_HOST_DEVICE ScalarArray tanh() const { return scalar::Tanh(v_); }
  PDIST_HOST_DEVICE ScalarArray sqrt() const { return scalar::Sqrt(v_); }
  PDIST_HOST_DEVICE ScalarArray rsqrt() const { return scalar::Rsqrt(v_); }
  PDIST_HOST_DEVICE ScalarArray square() const { return v_ * v_; }
  PDIST_HOST_DEVICE ScalarArray cube() const { return v_ * v_ * v_; }
  PDIST_HOST_DEVICE ScalarArray inverse() const { return T(1) / v_; }
  PDIST_HOST_DEVICE ScalarArray max(T other) const { return v_ > other ? v_ : other; }
  PDIST_HOST_DEVICE ScalarArray operator-() const { return -v_; }
  PDIST_HOST_DEVICE ScalarMask<T> operator>(T other) const { return ScalarMask<T>(v_ > other); }

 private:
  T v_;
};

template <typename T>
class ScalarMask {
 public:
  PDIST_HOST_DEVICE explicit ScalarMask(bool m) : m_(m) {}
  PDIST_HOST_DEVICE ScalarArray<T> select(ScalarArray<T> a, ScalarArray<T> b) const { return m_ ? a : b; }

 private:
  bool m_;
};

#define PDIST_SCALAR_ARRAY_OP_(op)                                                                            \
  template <typename T>                                                                                       \
  PDIST_HOST_DEVICE ScalarArray<T> operator op(ScalarArray<T> a, ScalarArray<T> b) {                          \
    return a.value() op b.value();                                                                            \
  }                                                                                                           \
  template <typename T>                                                                                       \
  PDIST_HOST_DEVICE ScalarArray<T> operator op(T a, ScalarArray<T> b) { return a op b.value(); }             \
  template <typename T>                                                                                       \
  PDIST_HOST_DEVICE ScalarArray<T> operator op(ScalarArray<T> a, T b) { return a.value() op b; }
PDIST_SCALAR_ARRAY_OP_(+)
PDIST_SCALAR_ARRAY_OP_(-)
PDIST_SCALAR_ARRAY_OP_(*)
PDIST_SCALAR_ARRAY_OP_(/)
#undef PDIST_SCALAR_ARRAY_OP_

}  // namespace pdist::exec::math
