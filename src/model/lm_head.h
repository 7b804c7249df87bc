// The top of the model: final RMSNorm, the LM head projection (the embedding matrix when tied)
// and the fused softmax cross-entropy that yields per-token log-probs and entropy.
//   xf = rmsnorm(x);  logits = xf W^T;  logp, entropy = logprob(logits / temperature, targets)
// Legend: N tokens, C hidden, V vocab.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"

namespace rf::model {

struct LmHeadParams {
  TensorView norm_w_C, w_VC;  // w_VC is model.embed_tokens.weight when tied

  template <class Store>
  static LmHeadParams bind(const Store& store, const ModelConfig& config);
};

struct LmHeadSaved {
  Tensor xf_NC, rstd_N, logits_NV, logp_N, entropy_N, lse_N;
};

struct LmHeadScratch {
  Tensor dlogits_NV, dxf_NC;
};

class LmHead {
 public:
  explicit LmHead(const ModelConfig& config);

  void reserve(LmHeadSaved& saved, LmHeadScratch& scratch, int64_t max_tokens, DType dtype,
               TensorAccount activations, TensorAccount workspace) const;

  // Fills saved.logp_N (and saved.entropy_N when asked) from the last hidden states x_NC.
  void forward(const LayerContext& ctx, int64_t num_tokens, const LmHeadParams& w, TensorView x_NC,
               TensorView targets_N, double temperature, bool with_entropy, LmHeadSaved& saved) const;
  // dresid_NC = dL/dx (overwritten); dentropy_N may be empty. Parameter gradients += into g.
  void backward(const LayerContext& ctx, int64_t num_tokens, const LmHeadParams& w, const LmHeadParams& g,
                TensorView x_NC, TensorView targets_N, double temperature, const LmHeadSaved& saved,
                LmHeadScratch& scratch, TensorView dlogp_N, TensorView dentropy_N, TensorView dresid_NC) const;

 private:
  double eps_;
  int64_t C_, V_;
};

}  // namespace rf::model
