#include "data/data_cursor.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/philox.h"
#include "data/index_permutation.h"

namespace rf::data {
namespace {

constexpr uint64_t kShuffleStream = 0x73687566666c65;  // "shuffle": the Philox stream of epoch keys

uint64_t read_count(const nlohmann::json& json, const std::string& source, const char* key) {
  if (!json.is_object() || !json.contains(key)) throw IoError(source, fmt::format("data cursor: missing \"{}\"", key));
  const nlohmann::json& value = json.at(key);
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
    throw IoError(source, fmt::format("data cursor: \"{}\" must be a non-negative integer, got {}", key, value.dump()));
  return value.get<uint64_t>();
}

}  // namespace

nlohmann::json DataCursor::to_json() const {
  return {{"seed", seed}, {"epoch", epoch}, {"next_index", next_index}};
}

DataCursor DataCursor::from_json(const nlohmann::json& json, const std::string& source) {
  return {.seed = read_count(json, source, "seed"),
          .epoch = read_count(json, source, "epoch"),
          .next_index = read_count(json, source, "next_index")};
}

Example take_example(const Task& task, DataCursor& cursor) {
  return task.example(Split::train, cursor.next_index++);
}

Example take_example(const JsonlDataset& dataset, DataCursor& cursor) {
  const uint64_t num_rows = dataset.size();
  RF_CHECK(cursor.next_index < num_rows, "data cursor at row {} of epoch {}, but {} has {} rows: did the file change?",
           cursor.next_index, cursor.epoch, dataset.path(), num_rows);
  const auto words = Philox(cursor.seed, kShuffleStream).block_at(cursor.epoch);
  const IndexPermutation order(num_rows, uint64_t(words[0]) << 32 | words[1]);
  const Example& example = dataset.example(order.forward(cursor.next_index));
  if (++cursor.next_index == num_rows) {
    ++cursor.epoch;
    cursor.next_index = 0;
  }
  return example;
}

}  // namespace rf::data
