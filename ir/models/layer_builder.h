// LayerBuilder: the named pieces (linear, norms, attention, loss) every model builder shares.
//
//   ir::Program program;
//   LayerBuilder lb(&program, ir::DataType::kFloat32);
//   ir::Value* x = lb.builder().Data("x", {{8, 64}, ir::DataType::kFloat32});
//   PDIST_ASSIGN_OR_RETURN(ir::Value* h, lb.Linear(x, 128, "mlp.fc.0", {}));
//   // parameters "mlp.fc.0.weight" f32[64,128] normal(0.02), "mlp.fc.0.bias" f32[128] zeros
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/builder.h"
#include "ir/program.h"
#include "ir/types.h"

namespace pdist::ir::models {

// The standard deviation of GPT-2's weight init, and its init string.
inline constexpr double kInitStd = 0.02;
// "normal(0.02)" for std 0.02: the executor's init grammar (executor/initializer.cc).
std::string NormalInit(double std);

struct LinearSpec {
  bool bias = true;
  double init_std = kInitStd;  // weight ~ normal(init_std); bias = zeros
};

enum class NormKind : int8_t {
  kLayerNorm,  // (x - mean) / sqrt(var + eps) * weight + bias
  kRmsNorm,    // x / sqrt(mean(x²) + eps) * weight
};

struct AttentionSpec {
  int64_t heads = 1;
  bool bias = true;            // biases on the qkv and output projections
  bool rope = false;           // rotate q and k with fused_rope (LLaMA)
  double rope_theta = 10000.0;
  double dropout = 0.0;        // attention-probability dropout inside flash_attn
  double out_init_std = kInitStd;
};

// q, k, v of one attention layer, each [batch, seq, heads, head_dim].
struct QkvHeads {
  Value* q = nullptr;
  Value* k = nullptr;
  Value* v = nullptr;
};

class LayerBuilder {
 public:
  // Parameters are created with `dtype`; activations take their dtype from their inputs.
  LayerBuilder(Program* program, DataType dtype) : builder_(program), dtype_(dtype) {}

  Builder& builder() { return builder_; }
  DataType dtype() const { return dtype_; }

  // A trainable parameter of this builder's dtype.
  Value* Param(const std::string& name, Shape shape, const std::string& init);

  // y = x·W (+ b) over x's last dim: W "<name>.weight" [in, out], b "<name>.bias" [out].
  absl::StatusOr<Value*> Linear(Value* x, int64_t out_features, const std::string& name, const LinearSpec& spec);

  // Normalises x over its last dim: "<name>.weight" (ones) and, for layer norm, "<name>.bias"
  // (zeros).
  absl::StatusOr<Value*> Norm(Value* x, NormKind kind, double epsilon, const std::string& name);

  // Causal multi-head self-attention of x [b, s, h]:
  //   qkv = Linear(x, 3h, "<name>.qkv") → SplitHeads → (fused_rope) → flash_attn(causal)
  //   → [b, s, h] → Linear(h, "<name>.proj")
  absl::StatusOr<Value*> SelfAttention(Value* x, const AttentionSpec& spec, const std::string& name);

  // Splits a fused projection qkv [b, s, 3h] into q, k, v [b, s, heads, h/heads]. The layout is
  // head-major — column j belongs to head j / (3·head_dim), and inside a head the q, k and v
  // blocks follow each other — so that a tensor-parallel Shard on the 3h columns becomes a
  // Shard on the heads dim after the reshape, and the split along head_dim needs no reshard
  // (Megatron-LM lays out its fused qkv the same way).
  absl::StatusOr<QkvHeads> SplitHeads(Value* qkv, int64_t heads);

  // x + y (residual connection).
  absl::StatusOr<Value*> Add(Value* x, Value* y);
  // dropout in training mode ("upscale_in_train"); x itself when p == 0.
  absl::StatusOr<Value*> Dropout(Value* x, double p);
  // Rows of `table` [V, h] gathered by integer ids [...] → [..., h].
  absl::StatusOr<Value*> Embedding(Value* ids, Value* table);
  // mean(cross_entropy_with_softmax(logits [..., C], labels [..., 1])) → a scalar.
  // from_logits: make no softmax whatever the dtype; the backward recomputes it from the logits
  // and writes its gradient over them (Megatron-LM's in-place loss on its f32 copy of the logits).
  absl::StatusOr<Value*> SoftmaxCrossEntropyMean(Value* logits, Value* labels, bool from_logits = false);
  // reshape without copying; `shape` as Paddle's reshape takes it.
  absl::StatusOr<Value*> Reshape(Value* x, const Shape& shape);

 private:
  Builder builder_;
  DataType dtype_;
};

// InvalidArgument "GptConfig.hidden must be positive, got 0" unless value > 0.
// Bounds of the built-in models' sizes: far above any published model (GPT-3: 96 layers, hidden
// 12288, vocab 51200), and low enough that no product of two of them wraps an int64.
inline constexpr int64_t kMaxModelLayers = int64_t{1} << 14;
inline constexpr int64_t kMaxModelDim = int64_t{1} << 24;

// InvalidArgument "GptConfig.layers must be in [1, 16384], got 0" unless 1 <= value <= max.
absl::Status RequireInRange(const std::string& config, const std::string& field, int64_t value,
                            int64_t max = kMaxModelDim);

}  // namespace pdist::ir::models
