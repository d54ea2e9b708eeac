// SPMD rules of the nn op families — softmax, norms, embedding, cross entropy, rope, attention and
// the optimizers — each an NnRule (ir/spmd/nn_rule.h); docs/spmd-nn.md explains the choices.
//
//   const spmd::SpmdRuleFns rule = spmd::LayerNormRule();
//   OpDef{..., .infer_spmd = rule.infer, .infer_spmd_reverse = rule.reverse, .describe_spmd = rule.describe}
//   rule.describe({&x_f32_8_32_64, &w, &b}, {{"begin_norm_axis", 2}, ...})
//     → "abc,c,c->abc,a,a  bc→Replicate"
#pragma once

#include <string>

#include "ir/spmd/einsum_rule.h"

namespace pdist::ir::spmd {

// --- rules_norm.cc -----------------------------------------------------------------------------
// softmax / log_softmax (x) → out: "abc->abc  c→Replicate" (the axis replicated).
SpmdRuleFns SoftmaxRule(const std::string& op);
// <op>_grad (out, out_grad) → x_grad: "abc,abc->abc  c→Replicate".
SpmdRuleFns SoftmaxGradRule(const std::string& op);
// layer_norm (x, scale?, bias?) → out, mean, variance: "abc,c,c->abc,ab,ab  c→Replicate"
// (begin_norm_axis 2; the statistics, x.shape[:2], keep every leading axis's sharding).
SpmdRuleFns LayerNormRule();
// layer_norm_grad (x, scale?, bias?, mean, variance, out_grad) → x_grad, scale_grad, bias_grad:
// aligned as Paddle's; scale_grad and bias_grad Partial over the sharded leading axis.
SpmdRuleFns LayerNormGradRule();
// rms_norm (x, scale) → out, invvar: "abc,c->abc,a  bc→Replicate".
SpmdRuleFns RmsNormRule();
// rms_norm_grad (x, scale, invvar, out_grad) → x_grad, scale_grad.
SpmdRuleFns RmsNormGradRule();

// --- rules_nn.cc -------------------------------------------------------------------------------
// embedding (x, weight) → out: "ab,jk->abk  j→Partial" (vocab-parallel; j replicated when
// padding_idx is set).
SpmdRuleFns EmbeddingRule();
// embedding_grad (x, weight, out_grad) → weight_grad: "ab,jk,abk->jk  ab→Partial".
SpmdRuleFns EmbeddingGradRule();
// cross_entropy_with_softmax (logits, label) → softmax, loss: "abk,ab1->abk,ab1  loss: k→reduced
// in kernel" for a hard label on the last axis with use_softmax, else k→Replicate; the softmax
// "_" (an empty f[0]) without return_softmax.
SpmdRuleFns CrossEntropyRule();
// cross_entropy_with_softmax_grad (label, softmax, loss_grad) → logits_grad: "ab1,abk,ab1->abk".
SpmdRuleFns CrossEntropyGradRule();
// cross_entropy_with_softmax_grad_from_logits (label, logits, loss_grad) → logits_grad: the same
// axes; with k sharded its local form all-reduces the row max and sum as the forward does.
SpmdRuleFns CrossEntropyGradFromLogitsRule();
// fused_rope (q, k?, v?, sin?, cos?, position_ids?) → out_q, out_k, out_v:
// "bshd,bshd,bshd,sd,sd,bs->bshd,bshd,bshd  sd→Replicate".
SpmdRuleFns FusedRopeRule();
// fused_rope_grad (sin?, cos?, position_ids?, out_q_grad, out_k_grad?, out_v_grad?)
//   → q_grad, k_grad, v_grad.
SpmdRuleFns FusedRopeGradRule();

// --- rules_attention.cc ------------------------------------------------------------------------
// flash_attn / flash_attention (q, k, v, fixed_seed_offset?, attn_mask?)
//   → out, softmax, softmax_lse, seed_offset: "bshd,bthd,bthe->bshe,_,bhs,z  stdez→Replicate".
SpmdRuleFns FlashAttnRule(const std::string& op);
// flash_attn_grad (q, k, v, out, softmax_lse, seed_offset?, attn_mask?, out_grad)
//   → q_grad, k_grad, v_grad.
SpmdRuleFns FlashAttnGradRule();

// --- rules_optimizer.cc ------------------------------------------------------------------------
// sgd (param, learning_rate, grad) → param_out: "ab,1,ab->ab".
SpmdRuleFns SgdRule();
// momentum (param, grad, velocity, learning_rate) → param_out, velocity_out: "ab,ab,ab,1->ab,ab".
SpmdRuleFns MomentumRule();
// adamw (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow)
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out:
//   "ab,ab,1,ab,ab,1,1->ab,ab,ab,1,1".
SpmdRuleFns AdamWRule();
// update_loss_scaling: five scalars in, five out, all replicated (a Partial found_inf is reduced).
SpmdRuleFns UpdateLossScalingRule();

}  // namespace pdist::ir::spmd
