// Dynamic loss scaling's rule (Paddle's update_loss_scaling, ir/ops/loss_scaling.cc), written
// once for the CPU kernel and the CUDA kernel (one thread reads the five scalars on the device).
#pragma once

#include <cstdint>
#include <cstring>

#include "executor/host_device.h"

namespace pdist::exec::math {

struct LossScalingState {
  double found_inf = 0;  // > 0: this step's gradients overflowed
  double scale = 1;
  double good_steps = 0;
  double bad_steps = 0;
  double skipped_steps = 0;
};

struct LossScalingRule {
  int64_t incr_every = 1000;
  int64_t decr_every = 2;
  double incr_ratio = 2;
  double decr_ratio = 0.5;
};

// Whether `x` is finite (no <cmath>: the same bits test on either side).
PDIST_HOST_DEVICE inline bool FiniteFloat(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  return (bits & 0x7f800000u) != 0x7f800000u;
}

// An overflowing step is skipped and, after decr_every of them in a row, the scale shrinks (not
// below 1); after incr_every good steps in a row it grows, unless the grown scale would not fit
// the f32 that holds it.
PDIST_HOST_DEVICE inline LossScalingState UpdateLossScaling(LossScalingState s, const LossScalingRule& rule) {
  if (s.found_inf > 0) {
    s.good_steps = 0;
    s.skipped_steps += 1;
    if (++s.bad_steps == static_cast<double>(rule.decr_every)) {
      const double shrunk = s.scale * rule.decr_ratio;
      s.scale = shrunk > 1.0 ? shrunk : 1.0;
      s.bad_steps = 0;
    }
  } else {
    s.bad_steps = 0;
    if (++s.good_steps == static_cast<double>(rule.incr_every)) {
      const float grown = static_cast<float>(s.scale * rule.incr_ratio);
      if (FiniteFloat(grown)) s.scale = grown;
      s.good_steps = 0;
    }
  }
  return s;
}

}  // namespace pdist::exec::math
