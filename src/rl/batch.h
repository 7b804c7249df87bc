// Batch: verl's DataProto over a TensorMap (DESIGN §1, spec/verl.md §3.9). B samples held as
//   tensors   named tensors whose first dim is B (token ids, masks, log-probs, advantages, ...);
//   columns   named per-sample values that are not tensors: strings (uid, data_source) and JSON
//             (reward_model, extra_info), B of them per column;
//   meta      one JSON object for the whole batch (temperature, eos_token_id, metrics, ...).
// The per-sample operations (select_samples, reorder, concat) move whole samples: every tensor row and
// column value of a sample together. Meta travels with every derived batch unchanged, except that
// concat merges it (below) and select/pop take only the meta keys asked for.
//
// The TensorMap hands out views only, so an operation that removes keys (pop) rebuilds the maps it
// keeps and copies the tensors: on the controller these are (B, T) bookkeeping tensors next to the model.
// Chunking, repeating and padding build on select_samples and live in batch_ops.h; the mini-batch
// iterator in mini_batch_iterator.h. Not here: conversion to the engine's packed micro-batches.
//
// Dimension legend: B batch (samples).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor_map.h"

namespace rf::rl {

using Json = nlohmann::json;

// The keys an operation takes, by kind. An empty list takes none of that kind.
struct BatchKeys {
  std::vector<std::string> tensors;
  std::vector<std::string> columns;
  std::vector<std::string> meta;
};

class Batch {
 public:
  Batch() = default;
  explicit Batch(int64_t num_samples) : num_samples_(num_samples) {}  // B samples, no keys yet
  Batch(Batch&&) = default;
  Batch& operator=(Batch&&) = default;
  Batch(const Batch&) = delete;  // tensors are large: copies are explicit (clone)
  Batch& operator=(const Batch&) = delete;

  // B: the first dim shared by every tensor and the length of every column. A batch without tensors
  // or columns has the size it was made with (0 by default), and its first tensor or column sets it.
  int64_t size() const { return num_samples_; }

  // Adds or replaces. The tensor needs a first dim equal to size(); the column size() values.
  void set_tensor(const std::string& name, Tensor tensor_B);
  void set_column(const std::string& name, std::vector<Json> values_B);
  bool has_tensor(const std::string& name) const { return tensors_.contains(name); }
  bool has_column(const std::string& name) const { return columns_.count(name) != 0; }
  // Throw naming the missing key and the keys present.
  TensorView tensor(const std::string& name) const;
  const std::vector<Json>& column(const std::string& name) const;
  std::vector<std::string> tensor_names() const { return tensors_.names(); }
  std::vector<std::string> column_names() const;
  const engine::TensorMap& tensors() const { return tensors_; }
  const Json& meta() const { return meta_; }
  Json& meta() { return meta_; }

  // A copy with only `keys` (verl's select with explicit key lists). Every key must exist.
  Batch select(const BatchKeys& keys) const;
  // Removes `keys` from this batch and returns them as a batch of the same size. Every key must exist.
  Batch pop(const BatchKeys& keys);
  // Adds other's keys to this batch (verl's union). Both have the same size; a key present in both
  // must hold equal values (tensors: same dtype, shape and elements; columns and meta: equal JSON,
  // NaN equal to NaN as in verl's numpy comparison), else the error names the key.
  void union_with(const Batch& other);
  // Samples `indices` in that order, repeats allowed (verl's select_idxs); meta is kept.
  Batch select_samples(std::span<const int64_t> indices) const;
  // A copy of every sample.
  Batch clone() const;
  // Puts sample indices[i] at position i; `indices` must be a permutation of 0..B-1.
  void reorder(std::span<const int64_t> indices);

  // The samples of `parts` one after another (verl's DataProto.concat). Every part has the same tensor
  // names (with equal dtypes and trailing dims) and column names. Meta: keys other than "metrics"
  // must agree between the parts that have them; each part's "metrics" (an object, or a list of
  // objects) is gathered into one object of lists, metric name -> values in part order.
  static Batch concat(std::span<const Batch> parts);

 private:
  bool has_keys() const;  // any tensor or column
  void check_keys(const char* op, const BatchKeys& keys) const;  // every key exists
  Batch copy_keys(const BatchKeys& keys) const;
  void check_sample_count(int64_t count, const char* kind, const std::string& name) const;

  int64_t num_samples_ = 0;
  engine::TensorMap tensors_;
  std::map<std::string, std::vector<Json>> columns_;
  Json meta_ = Json::object();
};

}  // namespace rf::rl
