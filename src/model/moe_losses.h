// The load-balancing losses of a model's MoE layers in training (moe_aux_loss.h has the formulas), as Megatron
// attaches them (megatron.md §6.3): computed from each MoE layer's router logits, their gradient injected into the
// logits during backward, scaled like the main loss (AuxLossAutoScaler), never part of the outputs' gradients.
//   aux_loss       Megatron's, per layer and micro-batch: coeff * E / (k T^2) * sum_e f_e P_e
//   seq_aux_loss   the same per packed document, averaged over documents (DeepSeek-V2/V3)
//   hf_pooled      Hugging Face's load_balancing_loss_func (Qwen2-MoE / Qwen3-MoE with output_router_logits): the
//                  router logits of every MoE layer concatenated, coeff * E * sum_e (count_e / LN) (P_e sum / LN)
//   z_loss         ST-MoE's, per layer, alongside any of the above (coeff 0: off)
// The counts f_e come from the forward (any recompute leaves them alone: they are kept per micro-batch); with
// context parallelism they are summed over the CP group (each rank's share of the loss uses its own rows), and the
// CP split's padding rows (`valid_N` 0) count for nothing, so the losses are the unsplit micro-batch's.
// Legend: N tokens, E experts, L MoE layers, S documents.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <span>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "model/moe_aux_loss.h"

namespace rf::model {

enum class MoeBalancing : uint8_t { none, aux_loss, seq_aux_loss, hf_pooled };

struct MoeLossConfig {
  MoeBalancing balancing = MoeBalancing::none;
  double aux_coeff = 0.0;  // moe_aux_loss_coeff, or HF's router_aux_loss_coef
  double z_coeff = 0.0;    // moe_z_loss_coeff
  bool any() const { return (balancing != MoeBalancing::none && aux_coeff > 0) || z_coeff > 0; }
};

// Megatron's moe_router_load_balancing_type names (hf_pooled has none: it comes from the HF config).
constexpr std::array<std::pair<MoeBalancing, std::string_view>, 3> enum_names(MoeBalancing) {
  return {{{MoeBalancing::none, "none"}, {MoeBalancing::aux_loss, "aux_loss"},
           {MoeBalancing::seq_aux_loss, "seq_aux_loss"}}};
}

// One micro-batch's counts (kept from its forward to its backward) and the loss values its backward found.
struct MoeLossState {
  std::vector<Tensor> counts_E;  // per MoE layer of the chunk, f64 [E] (seq_aux_loss: [S, E])
  Tensor pooled_E;               // hf_pooled: the sum over layers
  double aux_loss = 0, z_loss = 0;  // summed over the chunk's MoE layers in the last backward (coefficients applied)
  double valid_tokens = 0;          // the micro-batch's real tokens, over the group
};

class MoeLosses {
 public:
  MoeLosses(const MoeLossConfig& config, RouterScore score, int64_t num_experts, int64_t top_k);
  const MoeLossConfig& config() const { return config_; }

  // Sized for `layers` MoE layers of up to max_tokens tokens (and as many documents); also the workspace's.
  void reserve(MoeLossState& state, int64_t layers, int64_t max_tokens);
  // Forward of MoE layer `layer` (its index among the chunk's MoE layers): its counts from its router logits,
  // summed over `group` (the CP group; a group of one sums nothing). documents: cu_seqlens of the micro-batch;
  // valid_N: u8, 0 at padding rows (empty: every row is real).
  void count(int64_t layer, TensorView logits_NE, std::span<const int32_t> documents, TensorView valid_N,
             dist::ProcessGroup& group, MoeLossState& state);
  // Once all layers have counted, before the backward (hf_pooled sums them).
  void pool(MoeLossState& state) const;
  // Backward of MoE layer `layer`: dlogits_NE (overwritten, the logits' dtype) = scale * d(its losses)/dlogits;
  // its loss values are added to the state's.
  void backward(int64_t layer, TensorView logits_NE, std::span<const int32_t> documents, TensorView valid_N,
                double scale, MoeLossState& state, TensorView dlogits_NE);

 private:
  std::span<const int64_t> offsets(std::span<const int32_t> documents);
  TensorView layer_counts(int64_t layer, const MoeLossState& state, int64_t documents) const;

  MoeLossConfig config_;
  RouterScore score_;
  int64_t E_, top_k_;
  Tensor scores_NE_;              // f64 workspace
  std::vector<int64_t> offsets_;  // the documents' row offsets in int64 (capacity kept between calls)
};

}  // namespace rf::model
