// The top of the model: final RMSNorm, the LM head projection (the embedding matrix when tied)
// and the fused softmax cross-entropy that yields per-token log-probs and entropy.
//   xf = rmsnorm(x);  logits = xf W^T;  logp, entropy = logprob(logits / temperature, targets)
// Tensor parallel: W is column-parallel over the (padded) vocabulary, so each rank computes its
// columns of the logits; the region's entry (TpCopy, or the sequence gather with SP) is tp_region.h's. The log-prob is vocab-parallel
// (kernels/logprob.h): each rank's shard statistics are all-gathered over TP and combined, so every
// rank holds the whole-vocabulary logp, entropy and lse; the backward needs no collective beyond
// TpCopy's all-reduce of dxf.
// Legend: N tokens, C hidden, V vocab (this rank's columns: V_pad / tp), R TP ranks.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"
#include "model/saved_tensors.h"

namespace rf::model {

struct LmHeadParams {
  TensorView norm_w_C, w_VC;  // w_VC is model.embed_tokens.weight when tied

  template <class Store>
  static LmHeadParams bind(const Store& store, const ModelConfig& config);
};

struct LmHeadSaved {
  Tensor xf_NC, rstd_N, logits_NV, logp_N, entropy_N, lse_N;
  Tensor stats_N4, stats_RN4;  // vocab-parallel shard statistics, this rank's and all ranks' (TP > 1)

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&xf_NC, &rstd_N, &logits_NV, &logp_N, &entropy_N, &lse_N, &stats_N4, &stats_RN4}) f(*t);
  }
};

struct LmHeadScratch {
  Tensor dlogits_NV, dxf_NC;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&dlogits_NV, &dxf_NC}) f(*t);
  }
};

class LmHead {
 public:
  // vocab_columns and vocab_start: this rank's columns of the padded vocabulary.
  LmHead(const ModelConfig& config, int64_t vocab_columns, int64_t vocab_start);

  // What forward keeps for backward (saved_tensors.h; the TP shard statistics, workspace, are not among them).
  std::vector<SavedTensorSpec<LmHeadSaved>> saved_tensors(int64_t max_tokens, DType dtype) const;
  void reserve(LmHeadSaved& saved, LmHeadScratch& scratch, int64_t max_tokens, int64_t tp_size, DType dtype,
               TensorAccount activations, TensorAccount workspace) const;

  // Fills saved.logp_N (and saved.entropy_N when asked) of all N tokens from the last hidden states
  // x_NC (this rank's rows of the residual stream).
  void forward(const LayerContext& ctx, const BatchShape& shape, const LmHeadParams& w, TensorView x_NC,
               TensorView targets_N, double temperature, bool with_entropy, LmHeadSaved& saved) const;
  // Inference: this rank's columns of the logits of the R rows x_RC (the residual stream's final
  // states of the tokens to sample from), via xf_RC and rstd_R (scratch). No sequence parallel.
  void logits(const LayerContext& ctx, const LmHeadParams& w, TensorView x_RC, TensorView xf_RC, TensorView rstd_R,
              TensorView logits_RV) const;
  // dresid_NC = dL/dx (overwritten, this rank's rows); dentropy_N may be empty. Parameter gradients
  // += into g.
  void backward(const LayerContext& ctx, const BatchShape& shape, const LmHeadParams& w, const LmHeadParams& g,
                TensorView x_NC, TensorView targets_N, double temperature, const LmHeadSaved& saved,
                LmHeadScratch& scratch, TensorView dlogp_N, TensorView dentropy_N, TensorView dresid_NC) const;

 private:
  kernels::LogprobParams logprob_params(double temperature) const {
    return {.temperature = temperature, .vocab_start = vocab_start_, .vocab_size = vocab_size_};
  }

  double eps_;
  int64_t C_, V_, vocab_start_, vocab_size_;
};

}  // namespace rf::model
