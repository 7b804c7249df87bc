#include "apps/rlforge/rl_transfer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace rf::apps {
namespace {

// WeightStream's header: [more (1) or done (0), dtype, rank, numel, dims x 4, name length].
constexpr int64_t kHeader = 9;

nlohmann::json response_json(const RlResponse& r) {
  return {{"group", r.group}, {"prompt", r.prompt}, {"response", r.response}, {"truncated", r.truncated},
          {"rollout_log_probs", r.rollout_log_probs}};
}

RlResponse response_from_json(const nlohmann::json& j) {
  RlResponse r;
  r.group = j.at("group").get<int64_t>();
  r.prompt = j.at("prompt").get<std::vector<int64_t>>();
  r.response = j.at("response").get<std::vector<int64_t>>();
  r.truncated = j.at("truncated").get<bool>();
  r.rollout_log_probs = j.at("rollout_log_probs").get<std::vector<float>>();
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

void broadcast_columns(RlBatch& batch, const std::vector<std::vector<float> RlResponse::*>& columns,
                       dist::ProcessGroup& world, int root) {
  if (world.size() == 1) return;
  std::vector<float> flat;
  std::vector<int64_t> lengths;
  for (const RlResponse& r : batch)
    for (const auto column : columns) {
      lengths.push_back(int64_t((r.*column).size()));
      flat.insert(flat.end(), (r.*column).begin(), (r.*column).end());
    }
  int64_t sizes[2] = {int64_t(lengths.size()), int64_t(flat.size())};
  world.broadcast(TensorView(sizes, DType::i64, {2}), root);
  lengths.resize(size_t(sizes[0]));
  flat.resize(size_t(sizes[1]));
  RF_CHECK(sizes[0] == int64_t(batch.size() * columns.size()),
           "broadcast_columns: rank {} holds {} responses, the root sent columns for {}", world.rank(), batch.size(),
           sizes[0] / int64_t(std::max<size_t>(1, columns.size())));
  if (sizes[0] > 0) world.broadcast(TensorView(lengths.data(), DType::i64, {sizes[0]}), root);
  if (sizes[1] > 0) world.broadcast(TensorView(flat.data(), DType::f32, {sizes[1]}), root);
  size_t at = 0, i = 0;
  for (RlResponse& r : batch)
    for (const auto column : columns) {
      const size_t n = size_t(lengths[i++]);
      (r.*column).assign(flat.begin() + int64_t(at), flat.begin() + int64_t(at + n));
      at += n;
    }
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

void WeightStream::send(const std::string& name, TensorView full) {
  RF_CHECK(full.rank() <= 4 && full.is_contiguous(), "WeightStream: {} must be contiguous of rank <= 4, got {}", name,
           full.describe());
  int64_t header[kHeader] = {1, int64_t(full.dtype()), full.rank(), full.numel(), 1, 1, 1, 1, int64_t(name.size())};
  for (int d = 0; d < full.rank(); ++d) header[4 + d] = full.size(d);
  world_.broadcast(TensorView(header, DType::i64, {kHeader}), root_);
  std::vector<uint8_t> name_bytes(name.begin(), name.end());
  world_.broadcast(TensorView(name_bytes.data(), DType::u8, {int64_t(name_bytes.size())}), root_);
  if (world_.rank() == root_) {
    world_.broadcast(full, root_);
  } else {  // an actor rank with the same tensor: receive into a copy, never into the engine's memory
    const Tensor copy(full.shape(), full.dtype());
    world_.broadcast(copy, root_);
  }
}

void WeightStream::finish() {
  int64_t header[kHeader] = {};
  world_.broadcast(TensorView(header, DType::i64, {kHeader}), root_);
}

void WeightStream::receive(const Sink& sink) {
  for (;;) {
    int64_t header[kHeader] = {};
    world_.broadcast(TensorView(header, DType::i64, {kHeader}), root_);
    if (header[0] == 0) return;
    std::vector<uint8_t> name_bytes(static_cast<size_t>(header[8]));
    world_.broadcast(TensorView(name_bytes.data(), DType::u8, {header[8]}), root_);
    std::vector<int64_t> dims(header + 4, header + 4 + header[2]);
    const Tensor full(Shape(dims.begin(), dims.end()), DType(header[1]));
    world_.broadcast(full, root_);
    sink(std::string(name_bytes.begin(), name_bytes.end()), full);
  }
}

}  // namespace rf::apps
