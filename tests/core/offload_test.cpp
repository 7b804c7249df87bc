// Tensor residency and OffloadGroup: the tracker releases exactly a tensor's bytes while it is not
// resident, its whole pages really go back to the OS, its address never changes, and a group's host
// copies bring the contents back bit for bit, all or none.
#include "core/offload.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/test_support.h"

namespace rf {
namespace {

// A tracked tensor of random values.
Tensor tracked_random(int64_t numel, DType dtype, MemoryTracker& tracker, MemoryCategory category, uint64_t seed) {
  Tensor t({numel}, dtype, {&tracker, MemoryTier::device, category});
  copy_convert(rf::testing::random_tensor({numel}, dtype, seed), t);
  return t;
}

bool same_bits(TensorView a, TensorView b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool all_zero_bytes(TensorView x) {
  const auto* bytes = static_cast<const unsigned char*>(x.raw());
  for (size_t i = 0; i < x.nbytes(); ++i)
    if (bytes[i] != 0) return false;
  return true;
}

// How many of the whole pages inside `x`'s buffer are in RAM (mincore), and how many there are.
std::pair<int64_t, int64_t> whole_pages_in_ram(TensorView x) {
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(x.raw());
  const uintptr_t first = (begin + page - 1) / page * page, end = (begin + x.nbytes()) / page * page;
  const size_t num_pages = end > first ? (end - first) / page : 0;
  std::vector<unsigned char> in_ram(num_pages);
  if (num_pages > 0) {
    EXPECT_EQ(mincore(reinterpret_cast<void*>(first), end - first, in_ram.data()), 0);
  }
  int64_t count = 0;
  for (unsigned char flags : in_ram) count += flags & 1;
  return {count, int64_t(num_pages)};
}

TEST(Offload, NonResidentTensorReleasesItsBytesAndItsPages) {
  MemoryTracker tracker;
  {
    Tensor x = tracked_random(300'000, DType::f32, tracker, MemoryCategory::params, 1);  // ~1.1 MiB
    const int64_t bytes = int64_t(x.allocated_bytes());
    EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::params), bytes);
    void* address = x.view().raw();
    const auto [resident_pages, num_pages] = whole_pages_in_ram(x);
    ASSERT_GT(num_pages, 200);
    EXPECT_EQ(resident_pages, num_pages);  // written by the copy

    x.set_resident(false);
    EXPECT_FALSE(x.resident());
    EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::params), 0);
    EXPECT_EQ(x.view().raw(), address);
    EXPECT_EQ(whole_pages_in_ram(x).first, 0);  // every whole page went back to the OS
    EXPECT_TRUE(all_zero_bytes(x));             // and the edges were zeroed
    x.set_resident(false);                      // a no-op
    EXPECT_EQ(tracker.current(MemoryTier::device), 0);

    // A budget that cannot take the bytes back: the tracker's error, and nothing changes.
    tracker.set_budget(MemoryTier::device, bytes - 1);
    rf::testing::expect_error_containing([&] { x.set_resident(true); }, "out of device memory");
    EXPECT_FALSE(x.resident());
    EXPECT_EQ(tracker.current(MemoryTier::device), 0);
    tracker.set_budget(MemoryTier::device, bytes);
    x.set_resident(true);
    EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::params), bytes);
    EXPECT_EQ(tracker.peak(MemoryTier::device), bytes);
    EXPECT_EQ(x.view().raw(), address);

    // A move carries the state; destroying a non-resident tensor releases nothing twice.
    x.set_resident(false);
    Tensor moved = std::move(x);
    EXPECT_FALSE(moved.resident());
  }
  EXPECT_EQ(tracker.current(MemoryTier::device), 0);
  // A tensor smaller than a page has no whole page: it is zeroed in place.
  Tensor small = tracked_random(10, DType::f32, tracker, MemoryCategory::grads, 2);
  small.set_resident(false);
  EXPECT_TRUE(all_zero_bytes(small));
  EXPECT_EQ(tracker.current(MemoryTier::device), 0);
}

TEST(Offload, GroupKeepsOrDiscardsAndOnloadsAllOrNone) {
  MemoryTracker tracker;
  Tensor a = tracked_random(3001, DType::f32, tracker, MemoryCategory::optimizer, 3);
  Tensor b = tracked_random(5003, DType::bf16, tracker, MemoryCategory::optimizer, 4);
  const Tensor a_before = clone(a, DType::f32), b_before = clone(b, DType::bf16);
  const int64_t a_bytes = int64_t(a.allocated_bytes()), total = a_bytes + int64_t(b.allocated_bytes());
  OffloadGroup group;
  group.add(a);
  group.add(b);
  EXPECT_EQ(group.bytes(), total);

  group.offload(OffloadContents::keep);
  EXPECT_TRUE(group.offloaded());
  EXPECT_EQ(tracker.current(MemoryTier::device), 0);
  EXPECT_EQ(tracker.current(MemoryTier::host, MemoryCategory::optimizer), total);
  group.onload();
  EXPECT_FALSE(group.offloaded());
  EXPECT_TRUE(same_bits(a, a_before) && same_bits(b, b_before));
  EXPECT_EQ(tracker.current(MemoryTier::device), total);
  EXPECT_EQ(tracker.current(MemoryTier::host), 0);

  // Room for `a` but not `b`: neither comes back, and the host copies are intact.
  group.offload(OffloadContents::keep);
  tracker.set_budget(MemoryTier::device, a_bytes + 64);
  rf::testing::expect_error_containing([&] { group.onload(); }, "out of device memory");
  EXPECT_TRUE(group.offloaded());
  EXPECT_FALSE(a.resident());
  EXPECT_EQ(tracker.current(MemoryTier::device), 0);
  EXPECT_EQ(tracker.current(MemoryTier::host), total);
  tracker.set_budget(MemoryTier::device, MemoryTracker::kNoBudget);
  group.onload();
  EXPECT_TRUE(same_bits(a, a_before) && same_bits(b, b_before));

  // A host tier that cannot hold the copies: the offload fails before anything lets go.
  tracker.set_budget(MemoryTier::host, a_bytes);
  rf::testing::expect_error_containing([&] { group.offload(OffloadContents::keep); }, "out of host memory");
  EXPECT_FALSE(group.offloaded());
  EXPECT_TRUE(a.resident() && b.resident());
  EXPECT_EQ(tracker.current(MemoryTier::host), 0);
  EXPECT_TRUE(same_bits(a, a_before) && same_bits(b, b_before));

  // discard: no host bytes, and the tensors come back as zeros.
  group.offload(OffloadContents::discard);
  EXPECT_EQ(tracker.current(MemoryTier::host), 0);
  EXPECT_EQ(tracker.current(MemoryTier::device), 0);
  group.onload();
  EXPECT_TRUE(all_zero_bytes(a) && all_zero_bytes(b));
  EXPECT_EQ(tracker.current(MemoryTier::device), total);
}

}  // namespace
}  // namespace rf
