#include "rl/trainer/rl_batch.h"

#include "engine/local_micro_batch.h"

#include <algorithm>

#include "core/element_access.h"
#include "core/error.h"

#include "rl/dynamic_micro_batches.h"
#include "rl/seqlen_balancing.h"

namespace rf::rl {
namespace {

Tensor f32_column(int64_t N) {
  Tensor t({N}, DType::f32);
  std::fill_n(t.data<float>(), N, 0.0f);
  return t;
}

}  // namespace

int64_t num_tokens(const RlResponse& r) { return int64_t(r.prompt.size() + r.response.size()); }

int64_t longest_response(const RlBatch& batch) {
  int64_t T = 0;
  for (const RlResponse& r : batch) T = std::max(T, int64_t(r.response.size()));
  return T;
}

engine::TensorMap make_micro_batch(const RlBatch& batch, const std::vector<int64_t>& indices, LossColumns columns,
                                   bool with_ref) {
  int64_t N = 0;
  for (int64_t i : indices) N += num_tokens(batch[size_t(i)]);
  Tensor input_ids({N}, DType::i64), position_ids({N}, DType::i64), labels({N}, DType::i64);
  Tensor loss_mask = f32_column(N);
  const bool actor = columns == LossColumns::actor, critic = columns == LossColumns::critic;
  Tensor old_log_probs = f32_column(actor ? N : 0), advantages = f32_column(actor ? N : 0),
         ref_log_prob = f32_column(actor && with_ref ? N : 0);
  Tensor values = f32_column(critic ? N : 0), returns = f32_column(critic ? N : 0);
  Tensor cu({int64_t(indices.size()) + 1}, DType::i32);
  int64_t n = 0;
  cu.data<int32_t>()[0] = 0;
  for (size_t d = 0; d < indices.size(); ++d) {
    const RlResponse& r = batch[size_t(indices[d])];
    const int64_t P = int64_t(r.prompt.size()), L = num_tokens(r);
    RF_CHECK(P > 0 && !r.response.empty(), "response {}: {} prompt and {} response tokens", indices[d], P,
             r.response.size());
    for (int64_t t = 0; t < L; ++t) {
      const int64_t token = t < P ? r.prompt[size_t(t)] : r.response[size_t(t - P)];
      input_ids.data<int64_t>()[n + t] = token;
      position_ids.data<int64_t>()[n + t] = t;
      labels.data<int64_t>()[n + t] = -100;
      if (t > 0) labels.data<int64_t>()[n + t - 1] = token;
    }
    // Response token t is predicted at position P + t - 1.
    for (size_t t = 0; t < r.response.size(); ++t) {
      const int64_t at = n + P - 1 + int64_t(t);
      loss_mask.data<float>()[at] = 1.0f;
      if (critic) {
        values.data<float>()[at] = r.values.at(t);
        returns.data<float>()[at] = r.returns.at(t);
      }
      if (!actor) continue;
      old_log_probs.data<float>()[at] = r.old_log_probs.at(t);
      advantages.data<float>()[at] = r.advantages.at(t);
      if (with_ref) ref_log_prob.data<float>()[at] = r.ref_log_prob.at(t);
    }
    n += L;
    cu.data<int32_t>()[d + 1] = int32_t(n);
  }
  engine::TensorMap mb;
  mb.set("input_ids", std::move(input_ids));
  mb.set("position_ids", std::move(position_ids));
  mb.set("labels", std::move(labels));
  mb.set("loss_mask", std::move(loss_mask));
  mb.set("cu_seqlens", std::move(cu));
  if (actor) {
    mb.set("old_log_probs", std::move(old_log_probs));
    mb.set("advantages", std::move(advantages));
    if (with_ref) mb.set("ref_log_prob", std::move(ref_log_prob));
  }
  if (critic) {
    mb.set("values", std::move(values));
    mb.set("returns", std::move(returns));
  }
  return mb;
}

void add_replay_experts(engine::TensorMap& mb, const RlBatch& batch, const std::vector<int64_t>& indices,
                        std::vector<int32_t> RlResponse::*column, int64_t num_moe_layers, int64_t top_k) {
  const int64_t width = num_moe_layers * top_k;
  Tensor experts({mb.num_tokens(), num_moe_layers, top_k}, DType::i32);
  int32_t* out = experts.data<int32_t>();
  for (const int64_t i : indices) {
    const RlResponse& r = batch[size_t(i)];
    const std::vector<int32_t>& rows = r.*column;
    RF_CHECK(int64_t(rows.size()) == num_tokens(r) * width,
             "router replay: response {} has {} routing entries for {} tokens of {} experts each", i, rows.size(),
             num_tokens(r), width);
    out = std::copy(rows.begin(), rows.end(), out);
  }
  RF_CHECK(out == experts.data<int32_t>() + experts.numel(),
           "router replay: the responses do not fill the micro-batch");
  mb.set("replay_experts", std::move(experts));
}

void add_record_experts(engine::TensorMap& mb, int64_t num_moe_layers, int64_t top_k) {
  Tensor experts({mb.num_tokens(), num_moe_layers, top_k}, DType::i32);
  std::fill_n(experts.data<int32_t>(), experts.numel(), -1);
  mb.set("record_experts", std::move(experts));
}

void read_recorded_experts(RlBatch& batch, const std::vector<int64_t>& indices, const engine::TensorMap& mb,
                           std::vector<int32_t> RlResponse::*column) {
  const TensorView experts = mb.get("record_experts");
  const int64_t width = experts.numel() / experts.size(0);
  const int32_t* in = static_cast<const int32_t*>(experts.raw());
  for (const int64_t i : indices) {
    RlResponse& r = batch[size_t(i)];
    const int64_t count = num_tokens(r) * width;
    (r.*column).assign(in, in + count);
    in += count;
  }
}

std::vector<std::vector<int64_t>> split_micro_batches(const RlBatch& batch, const std::vector<int64_t>& indices,
                                                      int64_t responses_per_micro_batch, int64_t max_tokens,
                                                      int64_t cp_size, dist::ProcessGroup& dp) {
  std::vector<std::vector<int64_t>> micro_batches;
  if (max_tokens > 0) {
    std::vector<int64_t> seqlens;
    for (const int64_t i : indices)
      seqlens.push_back(engine::context_parallel_length(num_tokens(batch[size_t(i)]), cp_size));
    for (const std::vector<int64_t>& positions :
         rl::make_dynamic_micro_batches(seqlens, max_tokens * cp_size, dp)) {
      micro_batches.emplace_back();
      for (const int64_t k : positions) micro_batches.back().push_back(indices[size_t(k)]);
    }
    return micro_batches;
  }
  for (size_t first = 0; first < indices.size(); first += size_t(responses_per_micro_batch))
    micro_batches.emplace_back(indices.begin() + int64_t(first),
                               indices.begin() + int64_t(std::min(indices.size(), first + size_t(responses_per_micro_batch))));
  return micro_batches;
}

void read_token_column(RlBatch& batch, const std::vector<int64_t>& indices, TensorView values_N,
                       std::vector<float> RlResponse::*column) {
  int64_t n = 0;
  for (int64_t i : indices) {
    RlResponse& r = batch[size_t(i)];
    const int64_t P = int64_t(r.prompt.size());
    std::vector<float>& out = r.*column;
    out.resize(r.response.size());
    for (size_t t = 0; t < r.response.size(); ++t)
      out[t] = float(load_f64(values_N, (n + P - 1 + int64_t(t)) * values_N.stride(0)));
    n += num_tokens(r);
  }
  RF_CHECK(n == values_N.numel(), "read_token_column: {} tokens of responses, {} outputs", n, values_N.numel());
}

Tensor column_matrix(const RlBatch& batch, std::vector<float> RlResponse::*column) {
  const int64_t B = int64_t(batch.size()), T = longest_response(batch);
  Tensor m({B, T}, DType::f32);
  std::fill_n(m.data<float>(), m.numel(), 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float>& values = batch[size_t(b)].*column;
    std::copy(values.begin(), values.end(), m.data<float>() + b * T);
  }
  return m;
}

Tensor response_mask_matrix(const RlBatch& batch) {
  const int64_t B = int64_t(batch.size()), T = longest_response(batch);
  Tensor m({B, T}, DType::f32);
  std::fill_n(m.data<float>(), m.numel(), 0.0f);
  for (int64_t b = 0; b < B; ++b) std::fill_n(m.data<float>() + b * T, batch[size_t(b)].response.size(), 1.0f);
  return m;
}

void store_column(RlBatch& batch, TensorView values_BT, std::vector<float> RlResponse::*column) {
  for (int64_t b = 0; b < int64_t(batch.size()); ++b) {
    RlResponse& r = batch[size_t(b)];
    std::vector<float>& out = r.*column;
    out.resize(r.response.size());
    for (size_t t = 0; t < out.size(); ++t)
      out[t] = float(load_f64(values_BT, b * values_BT.stride(0) + int64_t(t) * values_BT.stride(1)));
  }
}

std::vector<std::vector<int64_t>> dp_shares(const RlBatch& batch, std::span<const int64_t> indices, int64_t dp_size,
                                            bool balance) {
  const int64_t n = int64_t(indices.size());
  std::vector<std::vector<int64_t>> shares(static_cast<size_t>(dp_size));
  if (balance && dp_size > 1 && n % dp_size == 0) {
    std::vector<int64_t> workloads;
    workloads.reserve(indices.size());
    for (const int64_t i : indices) workloads.push_back(rl::sequence_workload(num_tokens(batch[size_t(i)])));
    const std::vector<std::vector<int64_t>> parts = rl::balanced_partitions(workloads, dp_size, rl::PartSizes::equal);
    for (size_t r = 0; r < parts.size(); ++r)
      for (const int64_t k : parts[r]) shares[r].push_back(indices[size_t(k)]);
    return shares;
  }
  for (int64_t r = 0; r < dp_size; ++r) {
    const ContiguousShare share = contiguous_share(n, dp_size, r);
    shares[size_t(r)].assign(indices.begin() + share.first, indices.begin() + share.first + share.count);
  }
  return shares;
}

ContiguousShare contiguous_share(int64_t n, int64_t parts, int64_t part) {
  const int64_t base = n / parts, extra = n % parts;
  return {part * base + std::min(part, extra), base + (part < extra ? 1 : 0)};
}

}  // namespace rf::rl
