// rl::Batch: keys and their size rule, select / pop / union (every conflict an error naming the key),
// sample selection and reorder, concat with its meta rules, and the byte codec the dispatcher sends.
//
// Dimension legend: B batch (samples), T tokens.
#include "rl/batch.h"

#include <gtest/gtest.h>

#include <limits>

#include "batch_test_data.h"
#include "rl/batch_codec.h"
#include "rl/batch_meta.h"
#include "rl/tensor_rows.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

using rl::Batch;
using rl::Json;

TEST(Batch, KeysShareTheBatchSizeAndMissingKeysAreNamed) {
  Batch batch = make_test_batch(4);
  EXPECT_EQ(batch.size(), 4);
  EXPECT_EQ(batch.tensor_names(), (std::vector<std::string>{"input_ids", "mask", "sample_id", "score"}));
  EXPECT_EQ(batch.column_names(), (std::vector<std::string>{"extra", "uid"}));
  // The tensors are the TensorMap the engine reads, not a copy of it.
  EXPECT_EQ(batch.tensors().names(), batch.tensor_names());
  EXPECT_EQ(batch.tensors().get("mask").raw(), batch.tensor("mask").raw());
  expect_error_containing([&] { batch.set_tensor("values", Tensor(Shape{3, 5}, DType::f32)); },
                          "tensor 'values': expected 4 samples");
  expect_error_containing([&] { batch.set_tensor("scalar", Tensor(Shape{}, DType::f32)); }, "tensor 'scalar'");
  expect_error_containing([&] { batch.set_column("data_source", std::vector<Json>(5, "x")); },
                          "column 'data_source': expected 4 samples");
  expect_error_containing([&] { (void)batch.tensor("advantages"); }, "no tensor 'advantages'");
  expect_error_containing([&] { (void)batch.column("reward_model"); }, "no column 'reward_model'");
  // A batch with no keys takes the size of its first one.
  Batch fresh(7);
  EXPECT_EQ(fresh.size(), 7);
  fresh.set_column("uid", std::vector<Json>(3, "u"));
  EXPECT_EQ(fresh.size(), 3);
}

TEST(Batch, SelectCopiesTheKeysAskedFor) {
  const Batch batch = make_test_batch(5);
  const Batch picked = batch.select({.tensors = {"mask"}, .columns = {"uid"}, .meta = {"temperature"}});
  EXPECT_EQ(picked.size(), 5);
  EXPECT_EQ(picked.tensor_names(), std::vector<std::string>{"mask"});
  EXPECT_EQ(picked.column_names(), std::vector<std::string>{"uid"});
  EXPECT_EQ(picked.meta(), (Json{{"temperature", 0.7}}));
  EXPECT_TRUE(rl::tensors_equal(picked.tensor("mask"), batch.tensor("mask")));
  EXPECT_NE(picked.tensor("mask").raw(), batch.tensor("mask").raw());  // a copy, not an alias
  // No keys of a kind: none of that kind, and the size stays.
  EXPECT_EQ(batch.select({}).size(), 5);
  expect_error_containing([&] { (void)batch.select({.tensors = {"values"}}); }, "select: no tensor 'values'");
  expect_error_containing([&] { (void)batch.select({.columns = {"values"}}); }, "select: no column 'values'");
  expect_error_containing([&] { (void)batch.select({.meta = {"eos"}}); }, "select: no meta key 'eos'");
}

TEST(Batch, PopMovesKeysOutAndUnionPutsThemBack) {
  const Batch original = make_test_batch(6);
  Batch batch = original.clone();
  const rl::BatchKeys keys{.tensors = {"input_ids", "score"}, .columns = {"extra"}, .meta = {"sampling"}};
  Batch popped = batch.pop(keys);
  EXPECT_EQ(popped.tensor_names(), (std::vector<std::string>{"input_ids", "score"}));
  EXPECT_EQ(popped.column_names(), std::vector<std::string>{"extra"});
  EXPECT_EQ(batch.tensor_names(), (std::vector<std::string>{"mask", "sample_id"}));
  EXPECT_EQ(batch.column_names(), std::vector<std::string>{"uid"});
  EXPECT_FALSE(batch.meta().contains("sampling"));
  expect_error_containing([&] { (void)batch.pop(keys); }, "pop: no tensor 'input_ids'");
  batch.union_with(popped);
  expect_batches_equal(batch, original);
  // Shared keys with equal values are fine, NaNs in columns included.
  batch.union_with(original);
  expect_batches_equal(batch, original);
}

TEST(Batch, UnionConflictsAreErrorsNamingTheKey) {
  const Batch base = make_test_batch(4);
  {
    Batch other = make_test_batch(4);
    other.set_tensor("mask", Tensor(Shape{4, 5}, DType::f32));
    Batch mine = base.clone();
    expect_error_containing([&] { mine.union_with(other); }, "union: tensor 'mask' differs");
  }
  {
    Batch other = make_test_batch(4);
    other.set_tensor("score", clone(base.tensor("score"), DType::f32));  // same values, another dtype
    Batch mine = base.clone();
    expect_error_containing([&] { mine.union_with(other); }, "union: tensor 'score' differs");
  }
  {
    Batch other = make_test_batch(4, 5, /*group_size=*/1);  // other uids
    Batch mine = base.clone();
    expect_error_containing([&] { mine.union_with(other); }, "union: column 'uid' differs");
  }
  {
    Batch other = make_test_batch(4);
    other.meta()["temperature"] = 1.0;
    Batch mine = base.clone();
    expect_error_containing([&] { mine.union_with(other); }, "union: meta key 'temperature' differs");
  }
  {
    Batch mine = base.clone();
    expect_error_containing([&] { mine.union_with(make_test_batch(5)); }, "union: the batches have 4 and 5 samples");
  }
}

TEST(Batch, SelectSamplesAndReorderMoveWholeSamples) {
  const Batch batch = make_test_batch(6);
  const std::vector<int64_t> picks{4, 1, 1, 5};
  const Batch picked = batch.select_samples(picks);
  EXPECT_EQ(sample_ids(picked), picks);
  for (int64_t k = 0; k < 4; ++k) {
    const int64_t i = picks[size_t(k)];
    EXPECT_EQ(picked.tensor("input_ids").at<int64_t>({k, 3}), i * 1000 + 3);
    EXPECT_EQ(picked.tensor("mask").at<float>({k, 2}), batch.tensor("mask").at<float>({i, 2}));
    EXPECT_EQ(picked.column("uid")[size_t(k)], batch.column("uid")[size_t(i)]);
    EXPECT_EQ(picked.column("extra")[size_t(k)]["index"], i);
  }
  EXPECT_EQ(picked.meta(), batch.meta());
  expect_error_containing([&] { (void)batch.select_samples(std::vector<int64_t>{6}); }, "sample index 6");

  Batch reordered = batch.clone();
  const std::vector<int64_t> order{2, 0, 5, 1, 4, 3};
  reordered.reorder(order);
  EXPECT_EQ(sample_ids(reordered), order);
  expect_error_containing([&] { reordered.reorder(std::vector<int64_t>{0, 1, 1, 2, 3, 4}); },
                          "reorder: indices: expected a permutation");
  expect_error_containing([&] { reordered.reorder(std::vector<int64_t>{0, 1}); }, "reorder: indices: expected 6");
}

TEST(Batch, ConcatJoinsSamplesAndMergesMeta) {
  const Batch batch = make_test_batch(7);
  std::vector<Batch> parts;
  parts.push_back(batch.select_samples(std::vector<int64_t>{0, 1, 2}));
  parts.push_back(batch.select_samples(std::vector<int64_t>{}));
  parts.push_back(batch.select_samples(std::vector<int64_t>{3, 4, 5, 6}));
  expect_batches_equal(Batch::concat(parts), batch);

  // Metrics from each part gather into lists; other meta keys must agree.
  parts[0].meta()["metrics"] = {{"loss", 1.0}, {"lr", 0.1}};
  parts[2].meta()["metrics"] = Json::array({{{"loss", 2.0}}, {{"loss", 3.0}}});
  const Batch joined = Batch::concat(parts);
  EXPECT_EQ(joined.meta()["metrics"], (Json{{"loss", {1.0, 2.0, 3.0}}, {"lr", {0.1}}}));
  EXPECT_EQ(joined.meta()["temperature"], 0.7);
  parts[2].meta()["temperature"] = 1.0;
  expect_error_containing([&] { (void)Batch::concat(parts); }, "concat: meta key 'temperature' of part 2");
  parts[2].meta()["temperature"] = 0.7;

  Batch other_keys = parts[1].clone();
  (void)other_keys.pop({.tensors = {"score"}});
  parts[1] = std::move(other_keys);
  expect_error_containing([&] { (void)Batch::concat(parts); }, "concat: part 1 has tensors");
  expect_error_containing([&] { (void)Batch::concat({}); }, "concat: parts");
}

TEST(Batch, ConcatNamesATensorWhoseRowsDoNotMatch) {
  std::vector<Batch> parts(2);
  parts[0].set_tensor("input_ids", Tensor(Shape{2, 5}, DType::i64));
  parts[1].set_tensor("input_ids", Tensor(Shape{2, 6}, DType::i64));
  expect_error_containing([&] { (void)Batch::concat(parts); }, "tensor 'input_ids': part 1 is i64 [*, 6]");
}

TEST(BatchMeta, JsonEqualityIsNanAwareAndExactOnIntegers) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(rl::json_equal(Json{{"a", {1, nan}}}, Json{{"a", {1.0, nan}}}));
  EXPECT_FALSE(rl::json_equal(Json(nan), Json(0.0)));
  EXPECT_FALSE(rl::json_equal(Json((int64_t(1) << 62) + 1), Json(int64_t(1) << 62)));
  EXPECT_FALSE(rl::json_equal(Json{{"a", 1}}, Json{{"b", 1}}));
  EXPECT_FALSE(rl::json_equal(Json{1, 2}, Json{1, 2, 3}));
  EXPECT_FALSE(rl::json_equal(Json("1"), Json(1)));
}

TEST(BatchCodec, RoundTripsEveryKindOfKeyExactly) {
  Batch batch = make_test_batch(5);
  batch.tensor("score").at<bf16>({2}) = to_bf16(std::numeric_limits<float>::quiet_NaN());
  batch.tensor("input_ids").at<int64_t>({1, 1}) = (int64_t(1) << 62) + 1;  // beyond f64's exact integers
  batch.meta()["metrics"] = {{"nan", std::numeric_limits<double>::quiet_NaN()}};
  expect_batches_equal(rl::decode_batch(rl::encode_batch(batch)), batch);
  // Size survives without keys; an empty batch with keys keeps its tensors' trailing dims.
  EXPECT_EQ(rl::decode_batch(rl::encode_batch(Batch(3))).size(), 3);
  const Batch empty = batch.select_samples(std::vector<int64_t>{});
  expect_batches_equal(rl::decode_batch(rl::encode_batch(empty)), empty);

  std::vector<uint8_t> bytes = rl::encode_batch(batch);
  bytes.resize(bytes.size() / 2);
  expect_error_containing([&] { (void)rl::decode_batch(bytes); }, "are not an encoded batch");
}

}  // namespace
}  // namespace rf::testing
