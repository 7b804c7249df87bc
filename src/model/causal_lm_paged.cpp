// CausalLm's inference forward over a paged KV cache (causal_lm.h: forward_paged), the rollout
// engine's model step. The same weights and layer code as training, with a paged attention and only
// the sampled rows through the head.
#include "core/element_access.h"
#include "dist/tp_comm.h"
#include "model/causal_lm.h"

namespace rf::model {

void CausalLm::reserve_paged(int64_t N, int64_t R) {
  RF_CHECK(N > 0 && R > 0, "reserve_paged: max_tokens {} and max_logit_rows {} must be positive", N, R);
  RF_CHECK(config_.head == HeadKind::lm, "reserve_paged: the rollout samples from an LM head, not a {} head",
           head_name(config_.head));
  RF_CHECK(span_.is_whole(config_), "reserve_paged: the rollout runs the whole model, not a pipeline chunk");
  const DType dtype = params_.dtype();
  const int64_t C = config_.hidden_size, tp = parallel_.tp().size();
  PagedScratch& s = paged_;
  s.x_NC = Tensor({N, C}, dtype, activations_account_);
  s.h_NC = Tensor({N, C}, dtype, activations_account_);
  attention_.reserve(s.attention, N, dtype, activations_account_);
  mlp_.reserve(s.mlp, N, dtype, activations_account_);
  if (moe_) {
    moe_->reserve(s.moe, N, dtype, activations_account_);
    moe_->reserve(s.moe_scratch, N, dtype, workspace_account_);
  }
  s.x_RC = Tensor({R, C}, dtype, workspace_account_);
  s.xf_RC = Tensor({R, C}, dtype, workspace_account_);
  s.rstd_R = Tensor({R}, stat_dtype_for(dtype), workspace_account_);
  s.logits_RV = Tensor({R, tp * vocab_rows_}, dtype, workspace_account_);
  if (tp > 1) {
    s.local_logits_RV = Tensor({R, vocab_rows_}, dtype, workspace_account_);
    s.gathered_logits = Tensor({tp * R * vocab_rows_}, dtype, workspace_account_);
  }
  s.max_tokens = N;
  s.max_logit_rows = R;
}

TensorView CausalLm::forward_paged(const PagedBatch& batch, std::span<const PagedLayerCache> cache,
                                   std::span<const int64_t> logit_rows) {
  PagedScratch& s = paged_;
  const int64_t N = batch.num_tokens(), R = int64_t(logit_rows.size());
  RF_CHECK(N > 0 && N <= s.max_tokens, "forward_paged: {} tokens, {} reserved (reserve_paged)", N, s.max_tokens);
  RF_CHECK(R <= s.max_logit_rows, "forward_paged: {} logit rows, {} reserved (reserve_paged)", R, s.max_logit_rows);
  RF_CHECK(int64_t(cache.size()) == config_.num_hidden_layers, "forward_paged: {} cache layers for a {}-layer model",
           cache.size(), config_.num_hidden_layers);
  RF_CHECK(!parallel_.sequence_parallel(), "forward_paged: the rollout runs without sequence parallel");
  check_token_ids(batch.tokens_N, config_.vocab_size, 0, "tokens_N");
  if (!batch.record_experts_NLk.empty()) {
    RF_CHECK(moe_.has_value(), "record_experts_NLk: a dense model has no router");
    check_experts(batch.record_experts_NLk, N, "record_experts_NLk");
  }
  const LayerContext ctx = context();

  TensorView x_NC = rows(s.x_NC, N), h_NC = rows(s.h_NC, N);
  kernels_.embedding_forward({vocab_start_}, batch.tokens_N, embed_w_VC_, x_NC);
  dist::TpReduce::forward(parallel_.tp(), x_NC);
  const BatchShape shape{1, N, N, batch.positions_N, {}};
  for (size_t l = 0; l < layer_weights_.size(); ++l) {
    attention_.forward_paged(ctx, batch, layer_weights_[l].attention, x_NC, h_NC, s.attention, cache[l]);
    if (is_moe(l)) {  // x = h + moe(h), the experts' weights resident like every other
      moe_->forward(ctx, shape, layer_weights_[l].moe, h_NC, x_NC, s.moe, s.moe_scratch);
      if (const TensorView record = layer_experts(batch.record_experts_NLk, l); !record.empty())
        routed_experts(rows(s.moe.routing_map_NE, N), moe_->config().router.top_k, record);
    } else {
      mlp_.forward(ctx, shape, layer_weights_[l].mlp, h_NC, x_NC, s.mlp, s.mlp);  // x = h + mlp(h)
    }
  }
  if (R == 0) return TensorView();

  const TensorView x_RC = rows(s.x_RC, R);
  for (int64_t r = 0; r < R; ++r) {
    RF_CHECK(logit_rows[size_t(r)] >= 0 && logit_rows[size_t(r)] < N, "forward_paged: logit row {} of {} tokens",
             logit_rows[size_t(r)], N);
    copy_convert(x_NC.select(0, logit_rows[size_t(r)]), x_RC.select(0, r));
  }
  dist::ProcessGroup& tp = parallel_.tp();
  const int64_t V_local = vocab_rows_;
  TensorView logits_RV = rows(s.logits_RV, R);
  if (tp.size() == 1) {
    head_.logits(ctx, head_weights_, x_RC, rows(s.xf_RC, R), rows(s.rstd_R, R), logits_RV);
    return logits_RV.slice(1, 0, config_.vocab_size);
  }
  // Each rank's columns, then every rank's side by side: [R, tp x V_local] holds the padded vocabulary.
  const TensorView local_RV = rows(s.local_logits_RV, R);
  head_.logits(ctx, head_weights_, x_RC, rows(s.xf_RC, R), rows(s.rstd_R, R), local_RV);
  const TensorView gathered = s.gathered_logits.view().slice(0, 0, tp.size() * R * V_local);
  tp.all_gather(local_RV, gathered);
  const TensorView blocks = gathered.reshape({tp.size(), R, V_local});
  for (int64_t t = 0; t < tp.size(); ++t)
    copy_convert(blocks.select(0, t), logits_RV.slice(1, t * V_local, V_local));
  return logits_RV.slice(1, 0, config_.vocab_size);
}

}  // namespace rf::model
