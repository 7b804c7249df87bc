// Batches for the Batch, dispatch and micro-batch tests: every kind of key, with each sample's values
// derived from its index, so a test can tell which samples a batch holds and in which order.
//
// Dimension legend: B batch (samples), T tokens.
#pragma once

#include <vector>

#include "rl/batch.h"

namespace rf::testing {

// B samples: tensors sample_id i64 [B] (= the index), input_ids i64 [B, T] (index·1000 + t), mask
// f32 [B, T] (ragged 0/1 rows), score bf16 [B]; columns uid (string "p<index / group_size>") and extra
// (JSON object holding the index, a NaN and a list); meta with a temperature and a nested object.
rl::Batch make_test_batch(int64_t B, int64_t T = 5, int64_t group_size = 2);

// The sample_id tensor as a vector.
std::vector<int64_t> sample_ids(const rl::Batch& batch);

// Same keys, sizes, tensor dtypes and contents (tensors bit-compared row by row), columns and meta
// (json_equal). Reports the first difference.
void expect_batches_equal(const rl::Batch& actual, const rl::Batch& expected);

}  // namespace rf::testing
