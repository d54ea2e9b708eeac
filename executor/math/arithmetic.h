// The binary arithmetic ops' per-element math, shared by the CPU kernels
// (executor/cpu/elementwise_kernels.cc) and the CUDA kernels (executor/cuda/elementwise_kernels.cu):
// the forward f(x, y) and each operand's partial derivative times g = out_grad.
#pragma once

#include "executor/host_device.h"

namespace pdist::exec::math {

struct Add {
  template <typename T> PDIST_HOST_DEVICE static T F(T x, T y) { return x + y; }
  template <typename T> PDIST_HOST_DEVICE static T Dx(T, T, T g) { return g; }
  template <typename T> PDIST_HOST_DEVICE static T Dy(T, T, T g) { return g; }
};
struct Subtract {
  template <typename T> PDIST_HOST_DEVICE static T F(T x, T y) { return x - y; }
  template <typename T> PDIST_HOST_DEVICE static T Dx(T, T, T g) { return g; }
  template <typename T> PDIST_HOST_DEVICE static T Dy(T, T, T g) { return -g; }
};
struct Multiply {
  template <typename T> PDIST_HOST_DEVICE static T F(T x, T y) { return x * y; }
  template <typename T> PDIST_HOST_DEVICE static T Dx(T, T y, T g) { return g * y; }
  template <typename T> PDIST_HOST_DEVICE static T Dy(T x, T, T g) { return g * x; }
};
struct Divide {
  template <typename T> PDIST_HOST_DEVICE static T F(T x, T y) { return x / y; }
  template <typename T> PDIST_HOST_DEVICE static T Dx(T, T y, T g) { return g / y; }
  template <typename T> PDIST_HOST_DEVICE static T Dy(T x, T y, T g) { return -(g / y) * (x / y); }  // no y*y overflow
};
struct Maximum {  // ties send the gradient to y (see ir/ops/elementwise.cc)
  template <typename T> PDIST_HOST_DEVICE static T F(T x, T y) { return x > y ? x : y; }
  template <typename T> PDIST_HOST_DEVICE static T Dx(T x, T y, T g) { return x > y ? g : T(0); }
  template <typename T> PDIST_HOST_DEVICE static T Dy(T x, T y, T g) { return x > y ? T(0) : g; }
};

}  // namespace pdist::exec::math
