// Tensor (zero fill, alignment, move semantics), MemoryTracker accounting (current and peak by
// tier and category, budgets, summary), and copy_convert / fill_zero / clone across dtypes and
// strides.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/element_access.h"

namespace rf {
namespace {

constexpr auto kDevice = MemoryTier::device;
constexpr auto kHost = MemoryTier::host;

// The accounted size of a tensor: its bytes rounded up to the 64-byte alignment, at least 64.
int64_t padded(int64_t bytes) { return std::max<int64_t>(64, (bytes + 63) / 64 * 64); }

TEST(Tensor, ZeroFilledAligned) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i64, DType::u8}) {
    const Tensor t(Shape{7, 13}, dtype);
    EXPECT_EQ(t.numel(), 91);
    EXPECT_EQ(t.nbytes(), size_t(91) * dtype_size(dtype));
    EXPECT_TRUE(t.view().is_contiguous());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.view().raw()) % 64, 0u);
    const auto* bytes = static_cast<const unsigned char*>(t.view().raw());
    size_t nonzero = 0;
    for (size_t i = 0; i < t.nbytes(); ++i) nonzero += bytes[i] != 0;
    EXPECT_EQ(nonzero, 0u) << dtype_name(dtype);
  }
  const Tensor empty_shape(Shape{0, 5}, DType::f32);
  EXPECT_FALSE(empty_shape.empty());  // a zero-element tensor is still a tensor
  EXPECT_EQ(empty_shape.numel(), 0);
  EXPECT_TRUE(Tensor().empty());
  EXPECT_THROW(Tensor(Shape{2, -1}, DType::f32), Error);
}

TEST(Tensor, MoveTransfersOwnershipAndAccounting) {
  MemoryTracker tracker;
  const TensorAccount account{&tracker, kDevice, MemoryCategory::params};
  Tensor a(Shape{100}, DType::f32, account);
  a.at<float>({3}) = 42.0f;
  void* data = a.view().raw();
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), padded(400));

  Tensor b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.view().raw(), data);
  EXPECT_EQ(b.at<float>({3}), 42.0f);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), padded(400));

  // Move assignment releases the target's old buffer (and its accounted bytes).
  Tensor c(Shape{1000}, DType::f64, account);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), padded(400) + padded(8000));
  c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.view().raw(), data);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), padded(400));

  Tensor& self = c;
  c = std::move(self);  // self-move keeps the tensor
  EXPECT_EQ(c.at<float>({3}), 42.0f);

  c = Tensor();
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), 0);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::params), padded(400) + padded(8000));
}

TEST(MemoryTracker, CurrentAndPeakByTierAndCategory) {
  MemoryTracker tracker;
  {
    const Tensor params(Shape{256}, DType::f32, {&tracker, kDevice, MemoryCategory::params});  // 1 KiB
    {
      const Tensor grads(Shape{512}, DType::f32, {&tracker, kDevice, MemoryCategory::grads});  // 2 KiB
      const Tensor optim(Shape{1024}, DType::f32, {&tracker, kHost, MemoryCategory::optimizer});  // 4 KiB
      EXPECT_EQ(tracker.current(kDevice), 3072);
      EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), 1024);
      EXPECT_EQ(tracker.current(kDevice, MemoryCategory::grads), 2048);
      EXPECT_EQ(tracker.current(kHost), 4096);
      EXPECT_EQ(tracker.current(kHost, MemoryCategory::optimizer), 4096);
      EXPECT_EQ(tracker.current(kDevice, MemoryCategory::optimizer), 0);
      EXPECT_EQ(tracker.current(MemoryTier::disk), 0);
    }
    EXPECT_EQ(tracker.current(kDevice), 1024);
    EXPECT_EQ(tracker.current(kHost), 0);
    const Tensor acts(Shape{256}, DType::f32, {&tracker, kDevice, MemoryCategory::activations});
    // The tier's peak is the peak of the sum (3 KiB), not the sum of category peaks (4 KiB).
    EXPECT_EQ(tracker.peak(kDevice), 3072);
    EXPECT_EQ(tracker.current(kDevice), 2048);
  }
  EXPECT_EQ(tracker.current(kDevice), 0);
  for (int c = 0; c < kNumMemoryCategories; ++c)
    EXPECT_EQ(tracker.current(kDevice, MemoryCategory(c)), 0) << memory_category_name(MemoryCategory(c));
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::grads), 2048);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::activations), 1024);
  EXPECT_EQ(tracker.peak(kHost), 4096);

  tracker.on_allocate(kDevice, MemoryCategory::kv_cache, 500);
  tracker.reset_peaks();
  EXPECT_EQ(tracker.peak(kDevice), 500);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::kv_cache), 500);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::grads), 0);
  EXPECT_EQ(tracker.peak(kHost), 0);
  tracker.on_release(kDevice, MemoryCategory::kv_cache, 500);
}

TEST(MemoryTracker, BudgetExceededThrowsAndLeavesCountersUnchanged) {
  MemoryTracker tracker;
  EXPECT_EQ(tracker.budget(kDevice), MemoryTracker::kNoBudget);
  tracker.set_budget(kDevice, 4096);
  const Tensor params(Shape{512}, DType::f32, {&tracker, kDevice, MemoryCategory::params});  // 2 KiB
  try {
    const Tensor too_big(Shape{1024}, DType::f32, {&tracker, kDevice, MemoryCategory::activations});
    ADD_FAILURE() << "allocation over budget did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of device memory"), std::string::npos) << what;
    EXPECT_NE(what.find("activations"), std::string::npos) << what;
    EXPECT_NE(what.find("of the 4.0 KiB device budget"), std::string::npos) << what;
  }
  EXPECT_EQ(tracker.current(kDevice), 2048);
  EXPECT_EQ(tracker.peak(kDevice), 2048);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::activations), 0);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::activations), 0);
  // Exactly filling the budget is allowed; other tiers are not limited by it.
  const Tensor rest(Shape{512}, DType::f32, {&tracker, kDevice, MemoryCategory::activations});
  EXPECT_EQ(tracker.current(kDevice), 4096);
  const Tensor host(Shape{1 << 16}, DType::f32, {&tracker, kHost, MemoryCategory::optimizer});
  EXPECT_EQ(tracker.current(kHost), 1 << 18);
  EXPECT_THROW(tracker.on_allocate(kDevice, MemoryCategory::workspace, 1), Error);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::workspace), 0);
}

TEST(MemoryTracker, SummaryListsNonEmptyTiers) {
  MemoryTracker tracker;
  EXPECT_EQ(tracker.summary(), "");
  tracker.on_allocate(kDevice, MemoryCategory::params, 3 << 20);
  tracker.on_allocate(kDevice, MemoryCategory::grads, 1 << 20);
  tracker.on_release(kDevice, MemoryCategory::grads, 1 << 20);
  tracker.on_allocate(MemoryTier::disk, MemoryCategory::optimizer, 1536);
  EXPECT_EQ(tracker.summary(),
            "device: 3.0 MiB (peak 4.0 MiB), params 3.0 MiB (peak 3.0 MiB), grads 0 B (peak 1.0 MiB)\n"
            "disk: 1.5 KiB (peak 1.5 KiB), optimizer 1.5 KiB (peak 1.5 KiB)");
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(int64_t(3) << 29), "1.5 GiB");
  EXPECT_EQ(memory_tier_name(kHost), "host");
  EXPECT_EQ(memory_category_name(MemoryCategory::kv_cache), "kv_cache");
}

TEST(Tensor, CopyConvertAcrossDtypesAndStrides) {
  // src: f64 [3, 5] with values that are not representable in bf16 / f16.
  Tensor src(Shape{3, 5}, DType::f64);
  for (int64_t i = 0; i < 15; ++i) src.data<double>()[i] = 1.0 + double(i) / 7.0 - (i % 2 ? 300.0 : 0.0);

  // Into a transposed bf16 view: dst_t(j, i) = src(i, j) after transposing back.
  Tensor dst(Shape{5, 3}, DType::bf16);
  copy_convert(src, dst.view().transpose(0, 1));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(dst.at<bf16>({j, i}).bits, to_bf16(float(src.at<double>({i, j}))).bits) << i << "," << j;

  // f64 -> f16 into every other column of a wider buffer; the gaps stay untouched.
  Tensor wide(Shape{3, 10}, DType::f16);
  const TensorView every_other(wide.view().raw(), DType::f16, Shape{3, 5}, Shape{10, 2});
  copy_convert(src, every_other);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(wide.at<f16>({i, 2 * j}).bits, to_f16(float(src.at<double>({i, j}))).bits);
      EXPECT_EQ(wide.at<f16>({i, 2 * j + 1}).bits, 0);
    }

  // Integers to float and back (ints convert exactly; floats truncate toward zero).
  Tensor ids(Shape{4}, DType::i32);
  for (int32_t i = 0; i < 4; ++i) ids.data<int32_t>()[i] = i * 1000 - 1500;
  Tensor as_f32(Shape{4}, DType::f32);
  copy_convert(ids, as_f32);
  EXPECT_EQ(as_f32.at<float>({0}), -1500.0f);
  EXPECT_EQ(as_f32.at<float>({3}), 1500.0f);
  as_f32.at<float>({1}) = -2.75f;
  copy_convert(as_f32, ids);
  EXPECT_EQ(ids.at<int32_t>({1}), -2);

  // Same dtype copies are exact, even where f64 cannot hold the value.
  Tensor big(Shape{2}, DType::i64);
  big.data<int64_t>()[0] = (int64_t(1) << 62) + 1;
  big.data<int64_t>()[1] = -(int64_t(1) << 60) - 3;
  Tensor big_copy(Shape{2}, DType::i64);
  copy_convert(big, big_copy);
  EXPECT_EQ(big_copy.at<int64_t>({0}), (int64_t(1) << 62) + 1);
  EXPECT_EQ(big_copy.at<int64_t>({1}), -(int64_t(1) << 60) - 3);
  // The same into a strided view (column 1 of [2, 2]), which is copied element by element.
  Tensor big_pairs(Shape{2, 2}, DType::i64);
  copy_convert(big, big_pairs.view().select(1, 1));
  EXPECT_EQ(big_pairs.at<int64_t>({0, 1}), (int64_t(1) << 62) + 1);
  EXPECT_EQ(big_pairs.at<int64_t>({1, 1}), -(int64_t(1) << 60) - 3);
  EXPECT_EQ(big_pairs.at<int64_t>({0, 0}), 0);
  EXPECT_EQ(big_pairs.at<int64_t>({1, 0}), 0);

  EXPECT_THROW(copy_convert(src, dst), Error);  // [3, 5] into [5, 3]
}

TEST(Tensor, FillZeroTouchesOnlyTheView) {
  Tensor t(Shape{4, 6}, DType::f32);
  for (int64_t i = 0; i < 24; ++i) t.data<float>()[i] = float(i + 1);
  fill_zero(t.view().slice(1, 1, 3));
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c)
      EXPECT_EQ(t.at<float>({r, c}), c >= 1 && c < 4 ? 0.0f : float(r * 6 + c + 1)) << r << "," << c;
  fill_zero(t.view().slice(0, 2, 2));  // contiguous rows
  EXPECT_EQ(t.at<float>({2, 0}), 0.0f);
  EXPECT_EQ(t.at<float>({3, 5}), 0.0f);
  EXPECT_EQ(t.at<float>({1, 5}), 12.0f);
}

TEST(Tensor, CloneIsAnIndependentContiguousCopy) {
  MemoryTracker tracker;
  Tensor src(Shape{3, 4}, DType::f32);
  for (int64_t i = 0; i < 12; ++i) src.data<float>()[i] = float(i) + 0.1f;
  const TensorView transposed = src.view().transpose(0, 1);  // [4, 3]
  const Tensor copy = clone(transposed, DType::f64, {&tracker, kHost, MemoryCategory::workspace});
  EXPECT_EQ(copy.shape(), (Shape{4, 3}));
  EXPECT_EQ(copy.dtype(), DType::f64);
  EXPECT_TRUE(copy.view().is_contiguous());
  EXPECT_EQ(tracker.current(kHost, MemoryCategory::workspace), padded(12 * 8));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(copy.at<double>({i, j}), double(src.at<float>({j, i})));
  src.at<float>({0, 0}) = 99.0f;
  EXPECT_EQ(copy.at<double>({0, 0}), double(0.1f));
  const Tensor same = clone(src, DType::f32);
  EXPECT_NE(same.view().raw(), src.view().raw());
  EXPECT_EQ(std::memcmp(same.view().raw(), src.view().raw(), src.nbytes()), 0);
}

TEST(ElementAccess, StoreRoundsAndLoadReadsEveryDtype) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    Tensor t(Shape{1}, dtype);
    store_f64(t, 0, 1.0 / 3.0);
    const double expected = dtype == DType::f64    ? 1.0 / 3.0
                            : dtype == DType::f32  ? double(float(1.0 / 3.0))
                            : dtype == DType::bf16 ? double(to_f32(to_bf16(float(1.0 / 3.0))))
                                                   : double(to_f32(to_f16(float(1.0 / 3.0))));
    EXPECT_EQ(load_f64(t, 0), expected) << dtype_name(dtype);
  }
  Tensor flag(Shape{1}, DType::boolean);
  store_f64(flag, 0, 0.5);
  EXPECT_EQ(load_f64(flag, 0), 1.0);
  Tensor byte(Shape{1}, DType::u8);
  store_f64(byte, 0, 200.0);
  EXPECT_EQ(load_f64(byte, 0), 200.0);
}

}  // namespace
}  // namespace rf
