#include "batch_test_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "rl/batch_meta.h"

namespace rf::testing {

rl::Batch make_test_batch(int64_t B, int64_t T, int64_t group_size) {
  Tensor sample_id(Shape{B}, DType::i64), input_ids(Shape{B, T}, DType::i64), mask(Shape{B, T}, DType::f32),
      score(Shape{B}, DType::bf16);
  std::vector<rl::Json> uid, extra;
  for (int64_t i = 0; i < B; ++i) {
    sample_id.at<int64_t>({i}) = i;
    for (int64_t t = 0; t < T; ++t) {
      input_ids.at<int64_t>({i, t}) = i * 1000 + t;
      mask.at<float>({i, t}) = t <= i % T ? 1.0f : 0.0f;
    }
    score.at<bf16>({i}) = to_bf16(0.25f * float(i) - 1.0f);
    uid.emplace_back("p" + std::to_string(i / group_size));
    extra.push_back({{"index", i}, {"nan", std::numeric_limits<double>::quiet_NaN()}, {"tags", {i % 3, "x"}}});
  }
  rl::Batch batch;
  batch.set_tensor("sample_id", std::move(sample_id));
  batch.set_tensor("input_ids", std::move(input_ids));
  batch.set_tensor("mask", std::move(mask));
  batch.set_tensor("score", std::move(score));
  batch.set_column("uid", std::move(uid));
  batch.set_column("extra", std::move(extra));
  batch.meta() = {{"temperature", 0.7}, {"sampling", {{"top_k", 5}, {"seed", 42}}}};
  return batch;
}

std::vector<int64_t> sample_ids(const rl::Batch& batch) {
  const TensorView ids = batch.tensor("sample_id");
  return {ids.data<int64_t>(), ids.data<int64_t>() + ids.numel()};
}

void expect_batches_equal(const rl::Batch& actual, const rl::Batch& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  ASSERT_EQ(actual.tensor_names(), expected.tensor_names());
  ASSERT_EQ(actual.column_names(), expected.column_names());
  for (const std::string& name : expected.tensor_names()) {
    // Bitwise, so that NaN payloads and -0 count too (the copies are exact).
    const TensorView a = actual.tensor(name), e = expected.tensor(name);
    ASSERT_EQ(a.dtype(), e.dtype()) << name;
    ASSERT_TRUE(a.shape() == e.shape()) << name << ": " << a.describe() << " vs " << e.describe();
    EXPECT_EQ(std::memcmp(a.raw(), e.raw(), e.nbytes()), 0) << "tensor " << name;
  }
  for (const std::string& name : expected.column_names()) {
    const std::vector<rl::Json>&a = actual.column(name), &e = expected.column(name);
    for (size_t i = 0; i < e.size(); ++i)
      EXPECT_TRUE(rl::json_equal(a[i], e[i])) << "column " << name << "[" << i << "]: " << a[i] << " vs " << e[i];
  }
  EXPECT_TRUE(rl::json_equal(actual.meta(), expected.meta())) << actual.meta() << " vs " << expected.meta();
}

}  // namespace rf::testing
