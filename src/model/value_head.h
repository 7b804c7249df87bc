// The top of a value or score model (model_config.h's HeadKind): final RMSNorm, then the score
// projection to one value per token, returned in the stat dtype (f32 for bf16 weights):
//   xf = rmsnorm(x);  values = xf w^T (+ b)     w: score.weight [1, C]; b: score.bias [1], value head only
// verl's critic reads the values at the response tokens, a reward model at each sequence's last token.
// The projection runs in the weights' dtype and its output is widened, as verl's Megatron value model
// does (a bf16 linear, then .float()).
// Tensor parallel: the projection is replicated (one output: nothing to split), as in verl's Megatron
// value model (LinearForLastLayer). Without sequence parallel every rank holds the whole residual stream
// and computes all N values itself: no collective forward or backward, and the same gradients on every
// rank. With SP each rank computes the values of its own n = N / tp rows and all-gathers them
// (Megatron's gather_from_sequence_parallel_region with tensor_parallel_output_grad=False); backward
// takes this rank's rows of dL/dvalues (the same on every rank) without a collective, so the score's
// and the final norm's weight gradients are partial sums that CausalLm::finish_grads adds over TP.
// One label only: a head of num_labels != 1 is a ConfigError (the model returns one value per token).
// Legend: N tokens, n this rank's rows of the residual stream (N, or N / tp with SP), C hidden.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"
#include "model/saved_tensors.h"

namespace rf::model {

struct ValueHeadParams {
  TensorView norm_w_C, w_1C, b_1;  // b_1 empty for a score head (HF's sequence classifier has no bias)

  template <class Store>
  static ValueHeadParams bind(const Store& store, const ModelConfig& config);
};

struct ValueHeadSaved {
  Tensor xf_NC, rstd_N, out_N1;  // this rank's n rows: normed states, rstd, the projection (weights' dtype)
  Tensor local_values_N, values_N;  // stat dtype: this rank's n values, then all N

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&xf_NC, &rstd_N, &out_N1, &local_values_N, &values_N}) f(*t);
  }
};

struct ValueHeadScratch {
  Tensor dout_N1, dxf_NC;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&dout_N1, &dxf_NC}) f(*t);
  }
};

class ValueHead {
 public:
  explicit ValueHead(const ModelConfig& config);

  // What forward keeps for backward (saved_tensors.h; this rank's values before the gather, workspace, are not).
  std::vector<SavedTensorSpec<ValueHeadSaved>> saved_tensors(int64_t max_tokens, DType dtype) const;
  void reserve(ValueHeadSaved& saved, ValueHeadScratch& scratch, int64_t max_tokens, DType dtype,
               TensorAccount activations, TensorAccount workspace) const;

  // Fills saved.values_N (all N tokens, on every TP rank) from the last hidden states x_NC (this
  // rank's rows of the residual stream).
  void forward(const LayerContext& ctx, const BatchShape& shape, const ValueHeadParams& w, TensorView x_NC,
               ValueHeadSaved& saved) const;
  // dresid_NC = dL/dx (overwritten, this rank's rows) from dvalues_N (all N, stat dtype). Parameter
  // gradients += into g (the score's as ctx.linear_weight_grads says).
  void backward(const LayerContext& ctx, const BatchShape& shape, const ValueHeadParams& w, const ValueHeadParams& g,
                TensorView x_NC, const ValueHeadSaved& saved, ValueHeadScratch& scratch, TensorView dvalues_N,
                TensorView dresid_NC) const;

 private:
  double eps_;
  int64_t C_;
};

}  // namespace rf::model
