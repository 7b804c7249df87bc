// WeightSync: the actor's weights into the rollout after each update (verl's checkpoint engine, backend
// naive, `rollout.checkpoint_engine.update_weights_bucket_megabytes`).
//   colocated  every rollout rank is an actor rank (the hybrid engine's default): each rank feeds its own
//              rollout from its actor's export; nothing crosses ranks.
//   streamed   otherwise: the actor's first rank sends the exported tensors in buckets of at most
//              bucket_bytes (a tensor larger than that is a bucket of its own) over a group of itself and
//              the rollout's ranks only: a rank without a rollout never receives a byte. Each bucket is one
//              broadcast of its table (names, dtypes, shapes; CBOR) and one of its bytes. Actor ranks in the
//              group hold the same tensors (the export is collective over the actor's TP group), feed their
//              rollout from them and receive the buckets into scratch, so every member follows one stream.
// Every sync ends with a checksum: FNV-1a 64 over each tensor's name, dtype, shape and bytes in export
// order. Streamed, the sender broadcasts its own and every receiver compares it with what it received;
// colocated, the actor ranks compare theirs. A mismatch is an Error naming both, never a rollout that
// silently samples from other weights than the actor trained.
// When the rollout reads the actor's weights in place (same ranks, TP and dtype: rl_roles.cpp), its sink
// loads nothing and the colocated sync only checksums the export.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor_view.h"
#include "dist/process_group.h"

namespace rf::rl {

class WeightSync {
 public:
  using Sink = std::function<void(const std::string& name, TensorView full)>;
  // Calls its sink once per whole tensor, in the same order on every actor rank (TrainEngine::export_weights).
  using Export = std::function<void(const Sink& sink)>;

  struct Report {
    int64_t bytes_received = 0;  // this rank's, over the network (0 colocated and on the sender)
    int64_t buckets = 0;         // broadcasts of tensor bytes
    uint64_t checksum = 0;       // of what this rank's rollout loaded (or, on a sender, sent)
  };

  // Collective over `world` (streamed, it splits off the group). Ranks as world ranks, ascending; empty: all.
  WeightSync(dist::ProcessGroup& world, const std::vector<int>& actor_ranks, const std::vector<int>& rollout_ranks,
             int64_t bucket_bytes);
  ~WeightSync();

  // Collective over the world. `actor_export` on the actor's ranks, `rollout_sink` on the rollout's (null
  // elsewhere).
  Report sync(const Export* actor_export, const Sink* rollout_sink);

  bool colocated() const { return colocated_; }

 private:
  Report sync_colocated(const Export* actor_export, const Sink* rollout_sink);
  Report sync_streamed(const Export* actor_export, const Sink* rollout_sink);

  dist::ProcessGroup& world_;
  bool colocated_;
  int64_t bucket_bytes_;
  std::unique_ptr<dist::ProcessGroup> group_;  // streamed: the sender (its rank 0) and the rollout's ranks
};

// FNV-1a 64 of a tensor's name, dtype, shape and bytes, continued from `hash` (start: kFnvOffset).
inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;
uint64_t weight_checksum(uint64_t hash, const std::string& name, TensorView full);

}  // namespace rf::rl
