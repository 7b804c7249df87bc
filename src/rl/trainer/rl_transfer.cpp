#include "rl/trainer/rl_transfer.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace rf::rl {
namespace {

nlohmann::json response_json(const RlResponse& r) {
  return {{"group", r.group}, {"prompt", r.prompt}, {"response", r.response}, {"truncated", r.truncated},
          {"rollout_log_probs", r.rollout_log_probs}, {"rollout_experts", r.rollout_experts}};
}

RlResponse response_from_json(const nlohmann::json& j) {
  RlResponse r;
  r.group = j.at("group").get<int64_t>();
  r.prompt = j.at("prompt").get<std::vector<int64_t>>();
  r.response = j.at("response").get<std::vector<int64_t>>();
  r.truncated = j.at("truncated").get<bool>();
  r.rollout_log_probs = j.at("rollout_log_probs").get<std::vector<float>>();
  r.rollout_experts = j.at("rollout_experts").get<std::vector<int32_t>>();
  return r;
}

// `bytes` on `root` sent to every rank of `world` (resized there).
void broadcast_bytes(std::vector<uint8_t>& bytes, dist::ProcessGroup& world, int root) {
  int64_t size = int64_t(bytes.size());
  world.broadcast(TensorView(&size, DType::i64, {1}), root);
  bytes.resize(size_t(size));
  if (size > 0) world.broadcast(TensorView(bytes.data(), DType::u8, {size}), root);
}

}  // namespace

RlBatch gather_responses(RlBatch mine, dist::ProcessGroup& world) {
  if (world.size() == 1) return mine;
  nlohmann::json doc = nlohmann::json::array();
  for (const RlResponse& r : mine) doc.push_back(response_json(r));
  std::vector<uint8_t> bytes = mine.empty() ? std::vector<uint8_t>() : nlohmann::json::to_cbor(doc);
  int64_t size = int64_t(bytes.size());
  std::vector<int64_t> counts(size_t(world.size()));
  world.all_gather(TensorView(&size, DType::i64, {1}), TensorView(counts.data(), DType::i64, {world.size()}));
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  std::vector<uint8_t> all(static_cast<size_t>(total));
  world.all_gather_v(TensorView(bytes.data(), DType::u8, {size}), TensorView(all.data(), DType::u8, {total}), counts);
  RlBatch batch;
  int64_t at = 0;
  for (const int64_t c : counts) {
    if (c > 0)
      for (const nlohmann::json& j : nlohmann::json::from_cbor(all.begin() + at, all.begin() + at + c))
        batch.push_back(response_from_json(j));
    at += c;
  }
  std::stable_sort(batch.begin(), batch.end(), [](const RlResponse& a, const RlResponse& b) { return a.group < b.group; });
  return batch;
}

namespace {

// Every rank's `mine` entries brought to every rank: per entry its index and value count (`heads`), and
// the values, all-gathered; `write` stores each entry; each index must come exactly once.
void gather_entries(size_t num_entries, std::span<const int64_t> mine,
                    const std::function<std::vector<float>(int64_t)>& read,
                    const std::function<void(int64_t, std::span<const float>)>& write, dist::ProcessGroup& world) {
  std::vector<int64_t> heads;
  std::vector<float> values;
  for (const int64_t i : mine) {
    const std::vector<float> v = read(i);
    heads.push_back(i);
    heads.push_back(int64_t(v.size()));
    values.insert(values.end(), v.begin(), v.end());
  }
  const int64_t W = world.size();
  int64_t sizes[2] = {int64_t(heads.size()), int64_t(values.size())};
  std::vector<int64_t> all_sizes(size_t(2 * W));
  world.all_gather(TensorView(sizes, DType::i64, {2}), TensorView(all_sizes.data(), DType::i64, {2 * W}));
  std::vector<int64_t> head_counts, value_counts;
  int64_t total_heads = 0, total_values = 0;
  for (int64_t r = 0; r < W; ++r) {
    head_counts.push_back(all_sizes[size_t(2 * r)]);
    value_counts.push_back(all_sizes[size_t(2 * r + 1)]);
    total_heads += head_counts.back();
    total_values += value_counts.back();
  }
  std::vector<int64_t> all_heads(static_cast<size_t>(total_heads));
  std::vector<float> all_values(static_cast<size_t>(total_values));
  world.all_gather_v(TensorView(heads.data(), DType::i64, {sizes[0]}),
                     TensorView(all_heads.data(), DType::i64, {total_heads}), head_counts);
  world.all_gather_v(TensorView(values.data(), DType::f32, {sizes[1]}),
                     TensorView(all_values.data(), DType::f32, {total_values}), value_counts);
  std::vector<bool> seen(num_entries, false);
  size_t at = 0;
  for (size_t h = 0; h < all_heads.size(); h += 2) {
    const int64_t i = all_heads[h], n = all_heads[h + 1];
    RF_CHECK(i >= 0 && size_t(i) < num_entries && !seen[size_t(i)], "gather: response {} sent twice or out of range", i);
    seen[size_t(i)] = true;
    write(i, std::span<const float>(all_values).subspan(at, size_t(n)));
    at += size_t(n);
  }
  RF_CHECK(std::all_of(seen.begin(), seen.end(), [](bool s) { return s; }), "gather: a response was computed by no rank");
}

}  // namespace

void gather_columns(RlBatch& batch, std::span<const int64_t> mine,
                    const std::vector<std::vector<float> RlResponse::*>& columns, dist::ProcessGroup& world) {
  if (world.size() == 1) return;
  gather_entries(
      batch.size(), mine,
      [&](int64_t i) {
        std::vector<float> v;
        for (const auto column : columns) v.insert(v.end(), (batch[size_t(i)].*column).begin(), (batch[size_t(i)].*column).end());
        return v;
      },
      [&](int64_t i, std::span<const float> v) {
        // Every column of a response has one value per response token.
        RlResponse& r = batch[size_t(i)];
        const size_t T = r.response.size();
        RF_CHECK(v.size() == T * columns.size(), "gather_columns: response {}: {} values for {} columns of {} tokens", i,
                 v.size(), columns.size(), T);
        for (size_t c = 0; c < columns.size(); ++c) (r.*columns[c]).assign(v.begin() + c * T, v.begin() + (c + 1) * T);
      },
      world);
}

void gather_scores(RlBatch& batch, std::span<const int64_t> mine, dist::ProcessGroup& world) {
  if (world.size() == 1) return;
  gather_entries(
      batch.size(), mine, [&](int64_t i) { return std::vector<float>{float(batch[size_t(i)].score)}; },
      [&](int64_t i, std::span<const float> v) {
        batch[size_t(i)].score = v[0];
        batch[size_t(i)].reward_extra.clear();
      },
      world);
}

void broadcast_metrics(Metrics& metrics, dist::ProcessGroup& world, int root) {
  if (world.size() == 1) return;
  std::vector<uint8_t> bytes;
  if (world.rank() == root) bytes = nlohmann::json::to_cbor(nlohmann::json(metrics));
  broadcast_bytes(bytes, world, root);
  metrics = nlohmann::json::from_cbor(bytes).get<Metrics>();
}

void broadcast_scores(RlBatch& batch, const std::optional<std::string>& error, dist::ProcessGroup& world, int root) {
  if (world.size() == 1) {
    if (error) throw Error(*error);
    return;
  }
  std::vector<uint8_t> bytes;
  if (world.rank() == root) {
    nlohmann::json doc = {{"error", error ? nlohmann::json(*error) : nlohmann::json()}, {"scores", nlohmann::json::array()}};
    for (const RlResponse& r : batch) doc["scores"].push_back({{"score", r.score}, {"extra", r.reward_extra}});
    bytes = nlohmann::json::to_cbor(doc);
  }
  broadcast_bytes(bytes, world, root);
  const nlohmann::json doc = nlohmann::json::from_cbor(bytes);
  if (!doc.at("error").is_null()) throw Error(doc.at("error").get<std::string>());
  const nlohmann::json& scores = doc.at("scores");
  RF_CHECK(scores.size() == batch.size(), "broadcast_scores: {} scores for {} responses", scores.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].score = scores[i].at("score").get<double>();
    batch[i].reward_extra = scores[i].at("extra").get<std::map<std::string, double>>();
  }
}

}  // namespace rf::rl
