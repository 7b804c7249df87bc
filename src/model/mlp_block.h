// The MLP half of a decoder layer, with its pre-norm and residual:
//   xn = rmsnorm(h);  a = silu(xn Wg^T) * (xn Wu^T);  y = h + a Wd^T
// Tensor parallel: gate/up column-parallel (F is F/tp here), down row-parallel; the region's entry
// and exit, with or without sequence parallel, are tp_region.h's.
// Legend: N tokens, C hidden, F FFN width.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"
#include "model/recompute_policy.h"
#include "model/saved_tensors.h"

namespace rf::model {

struct MlpParams {
  TensorView norm_w_C, wg_FC, wu_FC, wd_CF;

  template <class Store>
  static MlpParams bind(const Store& store, int64_t layer);
};

// With selective recompute the discarded tensors are empty here and live in the chunk's shared MlpSaved.
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

  // What forward keeps for backward of up to max_tokens tokens, those `discard` recomputes marked discarded
  // (layernorm: the pre-norm's output and rstd; activation: the SwiGLU product; mlp: all of them).
  std::vector<SavedTensorSpec<MlpSaved>> saved_tensors(int64_t max_tokens, DType dtype,
                                                       const SelectiveRecompute& discard) const;
  // Allocates `part` of saved_tensors: a micro-batch's kept tensors, or the discarded ones of the shared scratch.
  void reserve(MlpSaved& saved, int64_t max_tokens, DType dtype, TensorAccount account,
               const SelectiveRecompute& discard = {}, SavedPart part = SavedPart::kept) const;
  void reserve(MlpScratch& scratch, int64_t max_tokens, DType dtype, TensorAccount account) const;

  // y_NC = h_NC + mlp(h_NC), both this rank's rows of the residual stream (tp_region.h). What `saved` has no room
  // for goes to `discarded` (the chunk's shared scratch).
  void forward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, TensorView h_NC, TensorView y_NC,
               MlpSaved& saved, MlpSaved& discarded) const;
  // dresid_NC: dL/dy on entry, dL/dh on return; parameter gradients += into g. The tensors `saved` lacks are
  // recomputed into `discarded` first, by the forward's kernels from the same inputs: the same bits.
  void backward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, const MlpParams& g,
                TensorView h_NC, const MlpSaved& saved, MlpSaved& discarded, MlpScratch& scratch,
                TensorView dresid_NC) const;

 private:
  // The forward from the norm to the SwiGLU product, each step into `s` or, where `s` has no room, `d`; with
  // `only_discarded`, the steps whose outputs `s` keeps are skipped (their inputs are kept too).
  void forward_to_product(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, TensorView h_NC,
                          const MlpSaved& s, MlpSaved& d, bool only_discarded) const;

  double eps_;
  int64_t C_, F_;  // F per TP rank
};

}  // namespace rf::model
