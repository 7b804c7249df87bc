// The MLP half of a decoder layer, with its pre-norm and residual:
//   xn = rmsnorm(h);  a = silu(xn Wg^T) * (xn Wu^T);  y = h + a Wd^T
// Tensor parallel: gate/up column-parallel (F is F/tp here), down row-parallel; the region's entry
// and exit, with or without sequence parallel, are tp_region.h's.
// Legend: N tokens, C hidden, F FFN width.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"

namespace rf::model {

struct MlpParams {
  TensorView norm_w_C, wg_FC, wu_FC, wd_CF;

  template <class Store>
  static MlpParams bind(const Store& store, int64_t layer);
};

struct MlpSaved {
  Tensor xn_NC, rstd_N, gate_NF, up_NF, act_NF;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&xn_NC, &rstd_N, &gate_NF, &up_NF, &act_NF}) f(*t);
  }
};

struct MlpScratch {
  Tensor dxn_NC, dgate_NF, dup_NF, dact_NF;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&dxn_NC, &dgate_NF, &dup_NF, &dact_NF}) f(*t);
  }
};

class MlpBlock {
 public:
  MlpBlock(const ModelConfig& config, int64_t tp_size);

  void reserve(MlpSaved& saved, int64_t max_tokens, DType dtype, TensorAccount account) const;
  void reserve(MlpScratch& scratch, int64_t max_tokens, DType dtype, TensorAccount account) const;

  // y_NC = h_NC + mlp(h_NC), both this rank's rows of the residual stream (tp_region.h).
  void forward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, TensorView h_NC, TensorView y_NC,
               MlpSaved& saved) const;
  // dresid_NC: dL/dy on entry, dL/dh on return; parameter gradients += into g.
  void backward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, const MlpParams& g,
                TensorView h_NC, const MlpSaved& saved, MlpScratch& scratch, TensorView dresid_NC) const;

 private:
  double eps_;
  int64_t C_, F_;  // F per TP rank
};

}  // namespace rf::model
