#include "rl/batch_exchange.h"

#include <algorithm>
#include <cstring>

#include "rl/batch_codec.h"
#include "rl/batch_dispatch.h"

namespace rf::rl {
namespace {

void check_plan_fits(const DispatchPlan& plan, const dist::ProcessGroup& group, int root, const char* op) {
  RF_CHECK(int64_t(plan.chunk_of_rank.size()) == group.size(),
           "{} {}: the plan is for {} ranks, the group '{}' has {}", op, dispatch_mode_name(plan.mode),
           plan.chunk_of_rank.size(), group.name(), group.size());
  RF_CHECK(root >= 0 && root < group.size(), "{}: root {} is not a rank of the group '{}' ({} ranks)", op, root,
           group.name(), group.size());
}

// The byte strings one after another in a u8 tensor (never a null buffer, even when empty).
Tensor pack(const std::vector<const std::vector<uint8_t>*>& pieces) {
  int64_t total = 0;
  for (const auto* piece : pieces) total += int64_t(piece->size());
  Tensor out(Shape{total}, DType::u8);
  auto* at = out.data<uint8_t>();
  for (const auto* piece : pieces) at = std::copy(piece->begin(), piece->end(), at);
  return out;
}

std::span<const uint8_t> bytes_of(const Tensor& buffer, int64_t offset, int64_t count) {
  return {buffer.data<uint8_t>() + offset, size_t(count)};
}

}  // namespace

ReceivedChunk scatter_batch(const Batch& global, const DispatchPlan& plan, dist::ProcessGroup& group, int root) {
  check_plan_fits(plan, group, root, "scatter_batch");
  const int world = group.size();
  const bool is_root = group.rank() == root;
  // header: the byte count each rank receives, then the padding.
  Tensor header(Shape{world + 1}, DType::i64);
  std::vector<std::vector<uint8_t>> encoded_chunks;
  std::vector<const std::vector<uint8_t>*> outgoing;
  if (is_root) {
    const DispatchedBatch dispatched = dispatch_batch(global, plan);
    for (const Batch& chunk : dispatched.chunks) encoded_chunks.push_back(encode_batch(chunk));
    for (int r = 0; r < world; ++r) {
      outgoing.push_back(&encoded_chunks[size_t(plan.chunk_of_rank[size_t(r)])]);
      header.data<int64_t>()[r] = int64_t(outgoing.back()->size());
    }
    header.data<int64_t>()[world] = dispatched.pad_size;
  }
  group.broadcast(header, root);

  const int64_t* counts = header.data<int64_t>();
  std::vector<int64_t> send_counts(size_t(world), 0), recv_counts(size_t(world), 0);
  if (is_root) send_counts.assign(counts, counts + world);
  recv_counts[size_t(root)] = counts[group.rank()];
  const Tensor send = pack(outgoing);
  Tensor received(Shape{counts[group.rank()]}, DType::u8);
  group.all_to_all_v(send, send_counts, received, recv_counts);
  return {decode_batch(bytes_of(received, 0, received.numel())), counts[world]};
}

std::optional<Batch> gather_batch(const Batch& output, const DispatchPlan& plan, int64_t pad_size,
                                  dist::ProcessGroup& group, int root) {
  check_plan_fits(plan, group, root, "gather_batch");
  const int world = group.size();
  const bool is_root = group.rank() == root;
  const auto& collectors = plan.collect_rank_of_chunk;
  const bool collects = std::find(collectors.begin(), collectors.end(), group.rank()) != collectors.end();
  const std::vector<uint8_t> encoded = collects ? encode_batch(output) : std::vector<uint8_t>{};

  Tensor mine(Shape{1}, DType::i64), sizes(Shape{world}, DType::i64);
  mine.data<int64_t>()[0] = int64_t(encoded.size());
  group.all_gather(mine, sizes);

  const int64_t* size_of = sizes.data<int64_t>();
  std::vector<int64_t> send_counts(size_t(world), 0), recv_counts(size_t(world), 0);
  send_counts[size_t(root)] = int64_t(encoded.size());
  if (is_root) recv_counts.assign(size_of, size_of + world);
  int64_t total = 0;
  for (int64_t count : recv_counts) total += count;
  Tensor received(Shape{total}, DType::u8);
  group.all_to_all_v(pack({&encoded}), send_counts, received, recv_counts);
  if (!is_root) return std::nullopt;

  std::vector<Batch> outputs_by_rank(static_cast<size_t>(world));
  int64_t offset = 0;
  for (int r = 0; r < world; ++r) {
    if (std::find(collectors.begin(), collectors.end(), r) != collectors.end())
      outputs_by_rank[size_t(r)] = decode_batch(bytes_of(received, offset, size_of[r]));
    offset += size_of[r];
  }
  return collect_batch(std::move(outputs_by_rank), plan, pad_size);
}

}  // namespace rf::rl
