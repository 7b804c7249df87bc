// TensorMap: a micro-batch as named tensors (DESIGN §4). The training engine reads the model's inputs
// from it and hands the whole map to the loss function, which may read any per-token column (the RL
// layer adds old log-probs, advantages, reference log-probs, values, returns).
// Keys the engine reads (N tokens, packed):
//   input_ids i64 [N], position_ids i64 [N], labels i64 [N] (next-token ids, -100 = none),
//   loss_mask f32 [N] (1 where the token's loss counts), cu_seqlens i32 [D+1] (document boundaries).
// Optional, MoE models (model_inputs.h; a whole model, no CP; any TP and SP): replay_experts i32 [N, L_moe, k], the
// experts each token's routers use (router replay); record_experts i32 [N, L_moe, k], written by the forward with
// the experts each token was routed to.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace rf::engine {

class TensorMap {
 public:
  void set(const std::string& name, Tensor tensor);
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws naming the missing key and the keys present.
  TensorView get(const std::string& name) const;
  std::vector<std::string> names() const;
  int64_t num_tokens() const { return get("input_ids").numel(); }
  std::span<const int32_t> cu_seqlens() const;

 private:
  std::map<std::string, Tensor> tensors_;
};

}  // namespace rf::engine
