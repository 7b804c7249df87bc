#include "dist/process_group.h"

#include "core/tensor.h"

namespace rf::dist {

void SingleProcessGroup::all_gather(TensorView in, TensorView out) {
  RF_CHECK(in.numel() == out.numel(), "{} all_gather: {} elements into {}", name_, in.numel(), out.numel());
  copy_convert(in, out.reshape(in.shape()));
}

void SingleProcessGroup::reduce_scatter(TensorView in, TensorView out) {
  RF_CHECK(in.numel() == out.numel(), "{} reduce_scatter: {} elements into {}", name_, in.numel(), out.numel());
  copy_convert(in, out.reshape(in.shape()));
}

void SingleProcessGroup::broadcast(TensorView, int root) {
  RF_CHECK(root == 0, "{} broadcast from rank {} in a group of one", name_, root);
}

}  // namespace rf::dist
