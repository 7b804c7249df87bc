// What a block keeps from a micro-batch's forward for its backward, as a list of descriptions (name, shape,
// dtype, and whether selective recompute discards it), so that one list both allocates the tensors (reserve) and
// is counted without allocating anything (activation_plan.h).
// Legend: S a block's saved struct (AttentionSaved, MlpSaved).
#pragma once

#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_allocation.h"

namespace rf::model {

template <class S>
struct SavedTensorSpec {
  std::string_view name;
  Tensor S::*member;
  Shape shape;
  DType dtype;
  bool discarded = false;  // selective recompute: in the chunk's shared scratch, recomputed in backward
};

// Which of a list's tensors to allocate: those each micro-batch keeps, or those the shared scratch holds.
enum class SavedPart : uint8_t { kept, discarded };

template <class S>
void allocate(const std::vector<SavedTensorSpec<S>>& specs, SavedPart part, S& saved, TensorAccount account) {
  for (const SavedTensorSpec<S>& spec : specs)
    if (spec.discarded == (part == SavedPart::discarded)) saved.*spec.member = Tensor(spec.shape, spec.dtype, account);
}

template <class S>
int64_t allocation_bytes(const std::vector<SavedTensorSpec<S>>& specs, SavedPart part) {
  int64_t bytes = 0;
  for (const SavedTensorSpec<S>& spec : specs)
    if (spec.discarded == (part == SavedPart::discarded)) bytes += int64_t(tensor_allocation_bytes(spec.shape, spec.dtype));
  return bytes;
}

// The tensor forward wrote and backward reads: the micro-batch's own, or the shared scratch's when discarded.
inline const Tensor& held(const Tensor& kept, const Tensor& discarded) { return kept.empty() ? discarded : kept; }

}  // namespace rf::model
