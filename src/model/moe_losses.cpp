#include "model/moe_losses.h"

#include "core/element_access.h"

namespace rf::model {

MoeLosses::MoeLosses(const MoeLossConfig& config, RouterScore score, int64_t num_experts, int64_t top_k)
    : config_(config), score_(score), E_(num_experts), top_k_(top_k) {}

void MoeLosses::reserve(MoeLossState& state, int64_t layers, int64_t max_tokens) {
  // seq_aux_loss counts per document: at most one per token.
  const int64_t rows = config_.balancing == MoeBalancing::seq_aux_loss ? max_tokens : 1;
  state.counts_E.clear();
  for (int64_t l = 0; l < layers; ++l) state.counts_E.emplace_back(Shape{rows, E_}, DType::f64);
  state.pooled_E = Tensor({E_}, DType::f64);
  if (scores_NE_.numel() < max_tokens * E_) scores_NE_ = Tensor({max_tokens, E_}, DType::f64);
}

std::span<const int64_t> MoeLosses::offsets(std::span<const int32_t> documents) {
  offsets_.assign(documents.begin(), documents.end());
  return offsets_;
}

TensorView MoeLosses::layer_counts(int64_t layer, const MoeLossState& state, int64_t documents) const {
  const TensorView all = state.counts_E[size_t(layer)];
  return config_.balancing == MoeBalancing::seq_aux_loss ? all.slice(0, 0, documents) : all.select(0, 0);
}

void MoeLosses::count(int64_t layer, TensorView logits_NE, std::span<const int32_t> documents, TensorView valid_N,
                      dist::ProcessGroup& group, MoeLossState& state) {
  const int64_t N = logits_NE.size(0), S = int64_t(documents.size()) - 1;
  double valid = double(N);
  if (!valid_N.empty()) {
    valid = 0;
    for (int64_t n = 0; n < N; ++n) valid += valid_N.data<uint8_t>()[n] != 0;
  }
  state.valid_tokens = group.size() > 1 ? group.all_reduce_scalar(valid, dist::ReduceOp::sum) : valid;
  if (config_.balancing == MoeBalancing::none || config_.aux_coeff == 0) return;
  const TensorView scores = scores_NE_.view().slice(0, 0, N);
  aux_loss_scores(score_, logits_NE, scores);
  const TensorView counts = layer_counts(layer, state, S);
  fill_zero(counts);
  if (config_.balancing == MoeBalancing::seq_aux_loss)
    add_aux_topk_counts_per_sequence(scores, top_k_, offsets(documents), valid_N, counts);
  else
    add_aux_topk_counts(scores, top_k_, valid_N, counts);
  if (group.size() > 1) group.all_reduce(counts, dist::ReduceOp::sum);
}

void MoeLosses::pool(MoeLossState& state) const {
  state.aux_loss = state.z_loss = 0;
  if (config_.balancing != MoeBalancing::hf_pooled) return;
  fill_zero(state.pooled_E);
  for (const Tensor& counts : state.counts_E)
    for (int64_t e = 0; e < E_; ++e) state.pooled_E.data<double>()[e] += counts.data<double>()[e];
}

void MoeLosses::backward(int64_t layer, TensorView logits_NE, std::span<const int32_t> documents, TensorView valid_N,
                         double scale, MoeLossState& state, TensorView dlogits_NE) {
  fill_zero(dlogits_NE);
  const int64_t N = logits_NE.size(0), S = int64_t(documents.size()) - 1;
  if (config_.balancing != MoeBalancing::none && config_.aux_coeff > 0) {
    const AuxLossParams params{.coeff = config_.aux_coeff,
                               .top_k = top_k_,
                               .fraction = config_.balancing == MoeBalancing::hf_pooled ? LoadFraction::of_tokens
                                                                                        : LoadFraction::of_choices};
    const TensorView scores = scores_NE_.view().slice(0, 0, N);
    aux_loss_scores(score_, logits_NE, scores);
    if (config_.balancing == MoeBalancing::seq_aux_loss) {
      const TensorView counts = layer_counts(layer, state, S);
      state.aux_loss += seq_aux_loss_forward(params, scores, offsets(documents), valid_N, counts);
      seq_aux_loss_backward(params, score_, logits_NE, offsets(documents), valid_N, counts, scale, dlogits_NE);
    } else {
      const TensorView counts =
          config_.balancing == MoeBalancing::hf_pooled ? state.pooled_E.view() : layer_counts(layer, state, S);
      state.aux_loss += aux_loss_forward(params, scores, valid_N, counts);
      aux_loss_backward(params, score_, logits_NE, valid_N, counts, scale, dlogits_NE);
    }
  }
  if (config_.z_coeff > 0) {
    // Each rank of the group adds its rows' sum over all the group's real tokens: the shares sum to one mean.
    double local = double(N);
    if (!valid_N.empty()) {
      local = 0;
      for (int64_t n = 0; n < N; ++n) local += valid_N.data<uint8_t>()[n] != 0;
    }
    if (local == 0) return;
    const ZLossParams params{.coeff = config_.z_coeff, .divisor = state.valid_tokens / local};
    state.z_loss += z_loss_forward(params, logits_NE, valid_N);
    z_loss_backward(params, logits_NE, valid_N, scale, dlogits_NE);
  }
}

}  // namespace rf::model
