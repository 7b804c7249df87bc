#include "rl/batch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "rl/batch_meta.h"
#include "rl/tensor_rows.h"

namespace rf::rl {
namespace {

// Every key of `keys` must be in `present`; the error names the kind, the key and what there is.
void check_keys_exist(const char* op, const char* kind, const std::vector<std::string>& keys,
                      const std::vector<std::string>& present) {
  for (const std::string& key : keys)
    RF_CHECK(std::find(present.begin(), present.end(), key) != present.end(), "{}: no {} '{}' (the batch has: {})",
             op, kind, key, fmt::join(present, ", "));
}

std::vector<std::string> meta_keys(const Json& meta) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : meta.items()) keys.push_back(key);
  return keys;
}

bool contains(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

}  // namespace

bool Batch::has_keys() const { return !tensors_.names().empty() || !columns_.empty(); }

void Batch::check_sample_count(int64_t count, const char* kind, const std::string& name) const {
  if (!has_keys()) return;  // the first key sets the size
  RF_CHECK(count == num_samples_, "{} '{}': expected {} samples (the batch's size), got {}", kind, name, num_samples_,
           count);
}

void Batch::set_tensor(const std::string& name, Tensor tensor_B) {
  RF_CHECK(tensor_B.view().rank() >= 1, "tensor '{}': expected a batch dim first, got {}", name,
           tensor_B.view().describe());
  check_sample_count(tensor_B.size(0), "tensor", name);
  num_samples_ = tensor_B.size(0);
  tensors_.set(name, std::move(tensor_B));
}

void Batch::set_column(const std::string& name, std::vector<Json> values_B) {
  check_sample_count(int64_t(values_B.size()), "column", name);
  num_samples_ = int64_t(values_B.size());
  columns_[name] = std::move(values_B);
}

TensorView Batch::tensor(const std::string& name) const {
  RF_CHECK(has_tensor(name), "batch has no tensor '{}' (it has: {})", name, fmt::join(tensor_names(), ", "));
  return tensors_.get(name);
}

const std::vector<Json>& Batch::column(const std::string& name) const {
  const auto it = columns_.find(name);
  RF_CHECK(it != columns_.end(), "batch has no column '{}' (it has: {})", name, fmt::join(column_names(), ", "));
  return it->second;
}

std::vector<std::string> Batch::column_names() const {
  std::vector<std::string> names;
  for (const auto& [name, values] : columns_) names.push_back(name);
  return names;
}

void Batch::check_keys(const char* op, const BatchKeys& keys) const {
  check_keys_exist(op, "tensor", keys.tensors, tensor_names());
  check_keys_exist(op, "column", keys.columns, column_names());
  check_keys_exist(op, "meta key", keys.meta, meta_keys(meta_));
}

Batch Batch::copy_keys(const BatchKeys& keys) const {
  Batch out(num_samples_);
  for (const std::string& name : keys.tensors) out.tensors_.set(name, rf::clone(tensor(name), tensor(name).dtype()));
  for (const std::string& name : keys.columns) out.columns_[name] = column(name);
  for (const std::string& key : keys.meta) out.meta_[key] = meta_[key];
  return out;
}

Batch Batch::select(const BatchKeys& keys) const {
  check_keys("select", keys);
  return copy_keys(keys);
}

Batch Batch::pop(const BatchKeys& keys) {
  check_keys("pop", keys);
  BatchKeys kept;
  for (const std::string& name : tensor_names())
    if (!contains(keys.tensors, name)) kept.tensors.push_back(name);
  for (const std::string& name : column_names())
    if (!contains(keys.columns, name)) kept.columns.push_back(name);
  for (const std::string& key : meta_keys(meta_))
    if (!contains(keys.meta, key)) kept.meta.push_back(key);
  Batch popped = copy_keys(keys);
  *this = copy_keys(kept);
  return popped;
}

void Batch::union_with(const Batch& other) {
  RF_CHECK(!has_keys() || !other.has_keys() || num_samples_ == other.num_samples_,
           "union: the batches have {} and {} samples", num_samples_, other.num_samples_);
  for (const std::string& name : other.tensor_names()) {
    const TensorView theirs = other.tensor(name);
    if (has_tensor(name)) {
      RF_CHECK(tensors_equal(tensor(name), theirs), "union: tensor '{}' differs between the two batches ({} vs {})",
               name, tensor(name).describe(), theirs.describe());
    } else {
      set_tensor(name, rf::clone(theirs, theirs.dtype()));
    }
  }
  for (const auto& [name, values] : other.columns_) {
    if (has_column(name)) {
      const std::vector<Json>& mine = column(name);
      const bool equal = std::equal(mine.begin(), mine.end(), values.begin(), values.end(),
                                    [](const Json& a, const Json& b) { return json_equal(a, b); });
      RF_CHECK(equal, "union: column '{}' differs between the two batches", name);
    } else {
      set_column(name, values);
    }
  }
  union_meta(meta_, other.meta_);
}

Batch Batch::select_samples(std::span<const int64_t> indices) const {
  for (int64_t i : indices)
    RF_CHECK(i >= 0 && i < num_samples_, "select_samples: sample index {} is outside [0, {})", i, num_samples_);
  Batch out(int64_t(indices.size()));
  for (const std::string& name : tensor_names())
    out.tensors_.set(name, gather_rows(tensor(name), indices, "tensor '" + name + "'"));
  for (const auto& [name, values] : columns_) {
    std::vector<Json>& picked = out.columns_[name];
    picked.reserve(indices.size());
    for (int64_t i : indices) picked.push_back(values[size_t(i)]);
  }
  out.meta_ = meta_;
  return out;
}

Batch Batch::clone() const {
  std::vector<int64_t> every_sample(static_cast<size_t>(num_samples_));
  std::iota(every_sample.begin(), every_sample.end(), 0);
  return select_samples(every_sample);
}

void Batch::reorder(std::span<const int64_t> indices) {
  RF_CHECK(int64_t(indices.size()) == num_samples_, "reorder: indices: expected {} (one per sample), got {}",
           num_samples_, indices.size());
  std::vector<bool> seen(size_t(num_samples_), false);
  for (int64_t i : indices) {
    RF_CHECK(i >= 0 && i < num_samples_ && !seen[size_t(i)],
             "reorder: indices: expected a permutation of 0..{}, got {} twice or out of range", num_samples_ - 1, i);
    seen[size_t(i)] = true;
  }
  *this = select_samples(indices);
}

Batch Batch::concat(std::span<const Batch> parts) {
  RF_CHECK(!parts.empty(), "concat: parts: expected at least one batch, got none");
  const std::vector<std::string> tensors = parts[0].tensor_names();
  const std::vector<std::string> columns = parts[0].column_names();
  int64_t num_samples = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    RF_CHECK(parts[p].tensor_names() == tensors, "concat: part {} has tensors [{}], part 0 has [{}]", p,
             fmt::join(parts[p].tensor_names(), ", "), fmt::join(tensors, ", "));
    RF_CHECK(parts[p].column_names() == columns, "concat: part {} has columns [{}], part 0 has [{}]", p,
             fmt::join(parts[p].column_names(), ", "), fmt::join(columns, ", "));
    num_samples += parts[p].size();
  }
  Batch out(num_samples);
  for (const std::string& name : tensors) {
    std::vector<TensorView> views;
    for (const Batch& part : parts) views.push_back(part.tensor(name));
    out.tensors_.set(name, concat_rows(views, "concat: tensor '" + name + "'"));
  }
  for (const std::string& name : columns) {
    std::vector<Json>& joined = out.columns_[name];
    for (const Batch& part : parts) joined.insert(joined.end(), part.column(name).begin(), part.column(name).end());
  }
  out.meta_ = concat_meta(parts);
  return out;
}

}  // namespace rf::rl
