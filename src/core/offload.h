// Offload (DESIGN §9): tensors give their bytes back to their tier while their contents wait in
// host-tier copies, and come back to the same addresses, so every view, cached pointer and reference
// to them stays valid. On the CPU backend both tiers are RAM: the tracker's device tier falls by the
// tensors' bytes and its host tier rises by as much, which is what an accelerator would see, and the
// device pages really go back to the OS (Tensor::set_resident says which few do not).
// Not here: what to offload when (the engines: TrainEngine::offload, InferEngine::offload); the disk tier.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace rf {

// keep: the contents are copied to the host tier and come back. discard: nothing is copied and the
// tensors come back as zeros (gradients right after they were zeroed).
enum class OffloadContents : uint8_t { keep, discard };

// A set of tensors (kept by pointer: they must outlive the group and stay where they are) offloaded and
// onloaded together.
class OffloadGroup {
 public:
  void add(Tensor& tensor);

  // Nothing to do when offloaded already. With keep, each host copy is accounted under the tensor's
  // tracker and category on the host tier; when that tier's budget refuses one, the tracker's error
  // propagates and nothing changed.
  void offload(OffloadContents contents);
  // All or none: when the tensors' tier cannot hold them all, the tracker's error propagates and the
  // group stays offloaded, its contents intact on the host. Nothing to do when resident.
  void onload();
  bool offloaded() const { return offloaded_; }
  int64_t bytes() const;  // the tensors' bytes on their tier (what offload moves)

 private:
  struct Entry {
    Tensor* tensor;
    Tensor host;  // while offloaded with keep
  };
  std::vector<Entry> entries_;
  bool offloaded_ = false;
};

}  // namespace rf
