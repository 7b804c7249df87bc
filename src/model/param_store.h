// ParamStore and GradBuffer: one contiguous tensor each, laid out by a ParamLayout and addressed by
// Hugging Face name. Weights are in the compute dtype (f32, bf16; f64 for the oracle); gradients
// accumulate in f32 (f64 for f64 weights), whatever the compute dtype.
#pragma once

#include "core/tensor.h"
#include "model/param_layout.h"

namespace rf::model {

class ParamStore {
 public:
  ParamStore(ParamLayout layout, DType dtype, TensorAccount account = {});
  const ParamLayout& layout() const { return layout_; }
  DType dtype() const { return flat_.dtype(); }
  TensorView get(const std::string& name) const;
  TensorView flat() const { return flat_; }
  Tensor& storage() { return flat_; }  // for offload (core/offload.h): the buffer keeps its address

 private:
  ParamLayout layout_;
  Tensor flat_;
};

class GradBuffer {
 public:
  GradBuffer(ParamLayout layout, DType dtype, TensorAccount account = {});
  const ParamLayout& layout() const { return layout_; }
  DType dtype() const { return flat_.dtype(); }
  TensorView get(const std::string& name) const;
  TensorView flat() const { return flat_; }
  Tensor& storage() { return flat_; }  // for offload (core/offload.h): the buffer keeps its address
  void zero();

 private:
  ParamLayout layout_;
  Tensor flat_;
};

// The gradient dtype for a compute dtype: f64 for f64, else f32.
DType grad_dtype_for(DType compute_dtype);
// The dtype of saved statistics (rstd, lse, log-probs): f64 for f64, else f32.
DType stat_dtype_for(DType compute_dtype);

}  // namespace rf::model
