#include "engine/checkpoint_shards.h"

#include "checkpoint/flat_range_boxes.h"

namespace rf::engine {
namespace {

// The elements [begin, begin + memory.numel()) of entry e's shard (flat, row-major), which `memory`
// holds contiguously, as boxes of the global tensor; vocab padding rows are left out.
void add_entry_range(const model::ParamEntry& e, int64_t begin, TensorView memory, const std::string& prefix,
                     std::vector<checkpoint::ShardedTensor>& out) {
  const int split_dim = e.split == model::TpSplit::columns ? 1 : 0;
  const int64_t real_end = e.real_extent();  // along split_dim
  for (const checkpoint::Box& box : checkpoint::flat_range_boxes(e.shape, begin, begin + memory.numel())) {
    TensorView view =
        memory.slice(0, checkpoint::flat_index(e.shape, box.offset) - begin, box.numel()).reshape(box.extent);
    Shape global_offset = box.offset;
    if (e.split != model::TpSplit::replicated) {
      const int64_t first = box.offset[split_dim];
      if (first >= real_end) continue;
      view = view.slice(split_dim, 0, std::min(box.extent[split_dim], real_end - first));
      global_offset[split_dim] += e.shard_start;
    }
    out.push_back(checkpoint::ShardedTensor{prefix + e.name, view, e.hf_shape, global_offset});
  }
}

bool skipped(const model::ParamEntry& e, Held held) {
  if (held == Held::all) return false;
  return e.pipeline_copy || (held == Held::saved_by_other_tp_rank && e.split == model::TpSplit::replicated);
}

}  // namespace

std::vector<checkpoint::ShardedTensor> param_shards(const model::ParamLayout& layout, TensorView flat,
                                                    const std::string& prefix, Held held) {
  std::vector<checkpoint::ShardedTensor> shards;
  for (const model::ParamEntry& e : layout.entries())
    if (!skipped(e, held)) add_entry_range(e, 0, flat.slice(0, e.offset, e.shape.numel()), prefix, shards);
  return shards;
}

std::vector<checkpoint::ShardedTensor> optimizer_shards(const model::ParamLayout& layout,
                                                        const optim::BucketPlan& plan, TensorView shard_state,
                                                        const std::string& prefix, Held held) {
  std::vector<checkpoint::ShardedTensor> shards;
  for (const optim::ShardFragment& f : plan.fragments()) {
    const model::ParamEntry& e = layout.entries()[f.entry];
    if (!skipped(e, held))
      add_entry_range(e, f.flat_offset - e.offset, shard_state.slice(0, f.shard_offset, f.numel), prefix, shards);
  }
  return shards;
}

}  // namespace rf::engine
