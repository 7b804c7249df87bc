#include "core/offload.h"

namespace rf {

void OffloadGroup::add(Tensor& tensor) {
  RF_CHECK(!offloaded_, "OffloadGroup::add: the group is offloaded");
  RF_CHECK(!tensor.empty(), "OffloadGroup::add: no tensor");
  entries_.push_back({&tensor, Tensor()});
}

void OffloadGroup::offload(OffloadContents contents) {
  if (offloaded_) return;
  if (contents == OffloadContents::keep) {
    // Every copy before any tensor lets go: a refused host budget then leaves nothing half moved.
    try {
      for (Entry& e : entries_) {
        const TensorAccount& account = e.tensor->account();
        e.host = clone(*e.tensor, e.tensor->dtype(), {account.tracker, MemoryTier::host, account.category});
      }
    } catch (...) {
      for (Entry& e : entries_) e.host = Tensor();
      throw;
    }
  }
  for (Entry& e : entries_) e.tensor->set_resident(false);
  offloaded_ = true;
}

void OffloadGroup::onload() {
  if (!offloaded_) return;
  // Accounting first (cheap, and the only step that can fail), copies after.
  size_t accounted = 0;
  try {
    for (; accounted < entries_.size(); ++accounted) entries_[accounted].tensor->set_resident(true);
  } catch (...) {
    for (size_t i = 0; i < accounted; ++i) entries_[i].tensor->set_resident(false);
    throw;
  }
  for (Entry& e : entries_) {
    if (!e.host.empty()) copy_convert(e.host, *e.tensor);  // discarded contents are zeros already
    e.host = Tensor();
  }
  offloaded_ = false;
}

int64_t OffloadGroup::bytes() const {
  int64_t total = 0;
  for (const Entry& e : entries_) total += int64_t(e.tensor->allocated_bytes());
  return total;
}

}  // namespace rf
