// ParamLayout: every parameter of a model by its Hugging Face name, with its shape and its offset
// in one flat buffer. ParamStore (weights) and GradBuffer (gradients) share a layout, so a
// parameter and its gradient sit at the same offset, and DP can reduce the whole buffer (or
// buckets of it) in one call.
// Order: embedding, then per layer input_layernorm, q/k/v (+ biases, q_norm/k_norm), o_proj,
// post_attention_layernorm, gate/up (adjacent: a fused [2F, C] GEMM can view them as one), down; an MoE layer
// (moe_config.h) has instead the router mlp.gate.weight [E, C], then every expert's gate_proj, every expert's
// up_proj and every expert's down_proj, each run packed into one [E, F, C] or [E, C, F] tensor (the grouped
// GEMM's weights), then the shared expert's gate/up/down and its gate [1, C] when the model has them;
// then the final norm and the head: lm_head (absent when tied), or for a value or score model (HeadKind)
// score.weight [num_labels, C] (and score.bias [num_labels] for a value head). Offsets are padded to 64 bytes.
// Tensor parallel (Megatron §2.2-2.4, 2.7, 2.8): a layout is one TP rank's. Column-parallel weights
// (q/k/v and their biases, gate/up, the embedding and lm_head: vocab rows) hold a contiguous block
// of rows, row-parallel ones (o_proj, down) a block of columns; norms and the score head (num_labels
// rows: not worth splitting) are replicated. Query heads and kv heads split evenly (whole heads, so each
// rank keeps whole GQA groups). An MoE layer's router and norm are replicated, its shared expert split as the dense
// MLP; its experts (expert tensor parallelism, Megatron §6.7) split each expert as the dense MLP, packed per
// projection ([E, F / TP, C], [E, C, F / TP]), when the layout's split_experts (expert_tensor_parallel_size = TP,
// Megatron's default), and are whole on every TP rank otherwise (expert_tensor_parallel_size = 1). With TP > 1 the
// vocabulary is padded to a multiple of vocab_multiple x
// TP (make_vocab_size_divisible_by): the padding rows are zeros that are never trained, not part of any
// checkpoint or export.
// Pipeline parallel (Megatron §3.1-3.2): a layout is also one pipeline rank's (StageParts): the real layers
// of its chunks (by HF index), the embedding on the first stage, the final norm and head on the last; with
// tied embeddings the last stage holds its own copy of model.embed_tokens.weight (Megatron's shared
// embedding), kept equal to the first stage's by summing their gradients over the embedding group.
// Each entry keeps its index in the whole model's layout (`stream`), so weights drawn from a seed are the
// same whatever the layout.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/shape.h"
#include "model/model_config.h"

namespace rf::model {

// Which dim of a parameter the TP ranks split: none, its rows (dim 0) or its columns (dim 1).
enum class TpSplit : uint8_t { replicated, rows, columns };

struct TensorParallelShard {
  int64_t rank = 0, size = 1;
  int64_t vocab_multiple = 128;  // make_vocab_size_divisible_by (applies when size > 1)
  // MoE experts split over these TP ranks (expert_tensor_parallel_size = TP) or whole on each (= 1).
  bool split_experts = true;
  // The TP size the experts are split over: the expert-TP size.
  int64_t expert_size() const { return split_experts ? size : 1; }
};

struct ParamEntry {
  std::string name;  // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;       // this rank's shard, with padding rows (vocab) if any
  int64_t offset = 0;  // in elements
  Shape hf_shape;      // the whole tensor as Hugging Face stores it
  TpSplit split = TpSplit::replicated;
  int64_t shard_start = 0;  // the shard's first row (rows) or column (columns) in hf_shape
  int64_t stream = 0;       // its index in the whole model's layout (param_init.h draws stream `stream`)
  // The last pipeline stage's copy of the tied embedding: equal to the first stage's, so checkpoints, exports
  // and the grad norm take the first stage's and skip this one.
  bool pipeline_copy = false;

  // How many of the shard's rows (or columns) lie inside hf_shape: the rest is vocab padding.
  int64_t real_extent() const;
  // The part of an hf_shape tensor this shard holds, and the same part of the shard itself.
  TensorView hf_part(const TensorView& hf_tensor) const;
  TensorView local_part(const TensorView& shard) const;
};

// The parts of the model one pipeline rank holds. whole() is the model of one stage.
struct StageParts {
  std::vector<int64_t> hf_layers;  // ascending HF layer indices
  bool embedding = true;           // the first stage (pre_process)
  bool head = true;                // the last stage (post_process): final norm and lm_head or score
  static StageParts whole(const ModelConfig& config);
};

class ParamLayout {
 public:
  // Checks that the TP size divides the heads, kv heads and FFN (check_tp_divides).
  static ParamLayout for_model(const ModelConfig& config, const TensorParallelShard& tp = {});
  static ParamLayout for_stage(const ModelConfig& config, const TensorParallelShard& tp, const StageParts& stage);

  // A parameter split `split` over the layout's TP ranks (hf_shape's split dim padded to
  // padded_extent when given, for the vocabulary). A packed one starts right where the previous one ends, without
  // alignment padding: a run of packed parameters of one shape is one tensor (an MoE layer's experts, [E, F, C]).
  void add(std::string name, Shape hf_shape, TpSplit split = TpSplit::replicated, int64_t padded_extent = 0,
           bool packed = false);
  // Whole-model layouts hold every parameter; a pipeline stage's only its parts.
  bool holds_embedding() const { return contains("model.embed_tokens.weight"); }
  // A parameter of the whole model, which this layout may hold only a pipeline stage's part of (loaders skip
  // the other stages' tensors).
  bool in_model(const std::string& name) const { return model_names_.count(name) != 0; }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry& entry(const std::string& name) const;  // throws naming the parameter
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  int64_t total_numel() const { return total_numel_; }   // including alignment padding
  int64_t num_parameters() const;                         // excluding padding
  const TensorParallelShard& tp() const { return tp_; }
  int64_t padded_vocab_size() const { return padded_vocab_; }

 private:
  TensorParallelShard tp_;
  int64_t padded_vocab_ = 0;
  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::unordered_set<std::string> model_names_;
  int64_t total_numel_ = 0;
};

// The vocabulary rows of a TP layout: V itself at TP 1, else V rounded up to a multiple of
// vocab_multiple x TP (Megatron's _vocab_size_with_padding).
int64_t padded_vocab_size(int64_t vocab_size, const TensorParallelShard& tp);

// ConfigError keyed tensor_model_parallel_size unless `tp_size` divides the query heads, the kv heads
// (so each rank keeps whole GQA groups) and the FFN widths (dense, shared expert, and with split_experts each
// expert's): what a TP layout splits evenly. for_model
// checks it; a run checks it earlier, from its config alone, so that it fails before any work.
void check_tp_divides(const ModelConfig& config, const TensorParallelShard& tp);

// HF names of one decoder layer's parameters.
std::string layer_param_name(int64_t layer, const char* suffix);
// HF name of expert e's `proj` (gate_proj, up_proj, down_proj) weight in an MoE layer.
std::string expert_param_name(int64_t layer, int64_t expert, const char* proj);

}  // namespace rf::model
