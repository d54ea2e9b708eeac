// One registration function per op family (one file each in ir/ops/); RegisterAllOps calls them
// all. Explicit calls, not static initialisers, so that static linking never drops an op.
#pragma once

#include "absl/status/status.h"

namespace pdist::ir {

class OpRegistry;

absl::Status RegisterAllOps(OpRegistry& registry);

absl::Status RegisterElementwiseOps(OpRegistry& registry);  // add subtract multiply divide maximum compare
absl::Status RegisterBroadcastOps(OpRegistry& registry);    // expand where
absl::Status RegisterGatherOps(OpRegistry& registry);       // gather gather_grad
absl::Status RegisterActivationOps(OpRegistry& registry);   // scale relu gelu silu tanh exp cast dropout
absl::Status RegisterMatmulOps(OpRegistry& registry);       // matmul
absl::Status RegisterFusedOps(OpRegistry& registry);        // fused_gemm_epilogue(_grad) (after matmul, gelu)
absl::Status RegisterReductionOps(OpRegistry& registry);    // sum mean max min full
absl::Status RegisterShapeOps(OpRegistry& registry);        // reshape (un)squeeze transpose split concat slice
absl::Status RegisterNormOps(OpRegistry& registry);         // softmax log_softmax layer_norm rms_norm
absl::Status RegisterNnOps(OpRegistry& registry);           // embedding cross_entropy_with_softmax fused_rope flash_attn
absl::Status RegisterOptimizerOps(OpRegistry& registry);    // sgd momentum adamw
absl::Status RegisterLossScalingOps(OpRegistry& registry);  // count_nonfinite update_loss_scaling
absl::Status RegisterReshardOps(OpRegistry& registry);      // reshard
absl::Status RegisterCollectiveOps(OpRegistry& registry);   // c_allreduce, c_allgather, c_reduce_scatter, c_alltoall
absl::Status RegisterLocalForms(OpRegistry& registry);       // c_embedding, c_softmax_with_cross_entropy (+ grads, from logits), c_dropout

}  // namespace pdist::ir
