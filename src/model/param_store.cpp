#include "model/param_store.h"

namespace rf::model {
namespace {

TensorView entry_view(const ParamLayout& layout, const Tensor& flat, const std::string& name) {
  const ParamEntry& e = layout.entry(name);
  return flat.view().slice(0, e.offset, e.shape.numel()).reshape(e.shape);
}

}  // namespace

ParamStore::ParamStore(ParamLayout layout, DType dtype, TensorAccount account)
    : layout_(std::move(layout)), flat_(Shape{layout_.total_numel()}, dtype, account) {}

TensorView ParamStore::get(const std::string& name) const { return entry_view(layout_, flat_, name); }

GradBuffer::GradBuffer(ParamLayout layout, DType dtype, TensorAccount account)
    : layout_(std::move(layout)), flat_(Shape{layout_.total_numel()}, dtype, account) {}

TensorView GradBuffer::get(const std::string& name) const { return entry_view(layout_, flat_, name); }

void GradBuffer::zero() { fill_zero(flat_); }

DType grad_dtype_for(DType compute_dtype) { return compute_dtype == DType::f64 ? DType::f64 : DType::f32; }
DType stat_dtype_for(DType compute_dtype) { return compute_dtype == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace rf::model
