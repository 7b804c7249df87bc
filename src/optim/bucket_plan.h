// BucketPlan: how data parallelism cuts one rank's flat gradient buffer (laid out by a ParamLayout)
// into buckets, and which part of each bucket this DP rank owns with the distributed optimizer
// (megatron.md §4.1, §4.4). A pure function of the layout, the readiness boundaries, the bucket size
// and the shard count: no MPI here (grad_reducer.h and shard_gatherer.h run the collectives).
//
// Buckets run in reverse layer order, the order backward completes gradients: bucket 0 ends at the end
// of the buffer (lm_head, final norm, the last layer), the last one starts at offset 0 (the embedding).
// `boundaries` are the offsets at which backward completes a group of gradients (a layer): from the top,
// a bucket is closed at the first boundary once it holds >= bucket_size elements, so it is complete as
// soon as backward has passed that boundary.
//
// Sharding over `num_shards` DP ranks (the distributed optimizer): every bucket's size is a multiple of
// num_shards (its boundaries are rounded up to one, which moves a few elements of a completed layer into
// the next bucket; when num_shards does not divide the buffer, its last < num_shards elements get a
// bucket of their own, padded to num_shards), and shard rank r owns the r-th of its equal chunks. This
// rank's shard is its chunks in buffer order, one after the other: the r-th contiguous 1/DP of the buffer
// when there is one bucket, and per bucket otherwise (Megatron's layout: each bucket's reduce-scatter
// can start on its own). With one shard a rank owns everything and its shard is the buffer itself, so
// the optimizer state of a plain run is laid out like the ParamStore.
#pragma once

#include <vector>

#include "model/param_layout.h"

namespace rf::optim {

struct GradBucket {
  int64_t start = 0, numel = 0;  // [start, start + numel) of the flat buffer
  int64_t padded_numel = 0;      // numel rounded up to a multiple of the shard count (only the tail differs)
  // This rank's chunk [chunk_start, chunk_start + chunk_numel) (padded_numel / shards elements; in the
  // padded tail bucket it may run past the buffer's end), and where the chunk sits in the shard.
  int64_t chunk_start = 0, chunk_numel = 0, shard_offset = 0;

  // The chunk's elements that lie inside the buffer (all of them except in the padded tail bucket).
  int64_t chunk_numel_in_buffer() const;
  bool padded() const { return padded_numel != numel; }
};

// The part of one parameter that sits in this rank's shard.
struct ShardFragment {
  size_t entry = 0;  // index into ParamLayout::entries()
  int64_t flat_offset = 0, shard_offset = 0, numel = 0;
};

class BucketPlan {
 public:
  // boundaries: ascending, starting at 0, each < layout.total_numel(). bucket_size in elements (>= 1).
  BucketPlan(const model::ParamLayout& layout, const std::vector<int64_t>& boundaries, int64_t bucket_size,
             int num_shards, int shard_rank);

  const std::vector<GradBucket>& buckets() const { return buckets_; }  // bucket 0 is the last in the buffer
  const std::vector<ShardFragment>& fragments() const { return fragments_; }  // in buffer order
  int64_t shard_numel() const { return shard_numel_; }  // elements of optimizer state per rank
  int num_shards() const { return num_shards_; }
  int shard_rank() const { return shard_rank_; }
  bool sharded() const { return num_shards_ > 1; }

 private:
  int num_shards_, shard_rank_;
  std::vector<GradBucket> buckets_;
  std::vector<ShardFragment> fragments_;
  int64_t shard_numel_ = 0;
};

// Megatron's default bucket size: max(40M, 1M x DP) elements.
int64_t default_bucket_size(int64_t dp_size);

}  // namespace rf::optim
