#include "engine/rollout/naive_rollout.h"

#include <algorithm>
#include <numeric>

namespace rf::engine::rollout {

NaiveRollout::NaiveRollout(const model::ModelConfig& config, const model::ParamStore& weights,
                           const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                           int64_t max_model_len)
    : config_(config), max_model_len_(max_model_len) {
  model_ = std::make_unique<model::CausalLm>(config, weights, nullptr, kernels, parallel);
  model_->reserve_paged(max_model_len, 1);
  const int64_t kv_heads = config.num_key_value_heads / parallel.tp().size();
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    keys_.emplace_back(Shape{1, max_model_len, kv_heads, config.head_dim}, weights.dtype());
    values_.emplace_back(Shape{1, max_model_len, kv_heads, config.head_dim}, weights.dtype());
  }
}

std::vector<RolloutSample> NaiveRollout::generate(const std::vector<RolloutRequest>& requests,
                                                  const RolloutSamplingParams& params,
                                                  std::span<const int64_t> eos_ids, int64_t num_candidates) {
  params.validate();
  std::vector<int64_t> stop_ids = params.stop_token_ids;
  if (!params.ignore_eos) stop_ids.insert(stop_ids.end(), eos_ids.begin(), eos_ids.end());
  std::vector<model::PagedLayerCache> cache;
  for (size_t l = 0; l < keys_.size(); ++l) cache.push_back({keys_[l], values_[l]});
  Tensor table({1, 1}, DType::i32);
  table.data<int32_t>()[0] = 0;

  std::vector<RolloutSample> out;
  for (const RolloutRequest& request : requests) {
    const int64_t max_tokens = request.max_tokens > 0 ? request.max_tokens : params.max_tokens;
    for (int64_t sample = 0; sample < params.n; ++sample) {
      RolloutSample result{request.request_id, sample, {}, {}, FinishReason::length};
      std::vector<int64_t> tokens = request.prompt;
      while (int64_t(result.token_ids.size()) < max_tokens && int64_t(tokens.size()) < max_model_len_) {
        // The whole sequence again, positions 0.. in the one block: nothing kept from the last step.
        const int64_t T = int64_t(tokens.size());
        Tensor tokens_N({T}, DType::i64), positions_N({T}, DType::i64);
        std::copy(tokens.begin(), tokens.end(), tokens_N.data<int64_t>());
        std::iota(positions_N.data<int64_t>(), positions_N.data<int64_t>() + T, int64_t(0));
        const std::vector<int32_t> query_start = {0, int32_t(T)}, context_len = {int32_t(T)};
        const model::PagedBatch batch{tokens_N, positions_N, positions_N, query_start, context_len, table};
        const std::vector<int64_t> last = {T - 1};
        const TensorView logits = model_->forward_paged(batch, cache, last);
        const auto [token, logprob] = draw_rollout_token(logits.select(0, 0), params, request.request_id, sample,
                                                         int64_t(result.token_ids.size()), num_candidates);
        tokens.push_back(token);
        result.token_ids.push_back(token);
        result.logprobs.push_back(logprob);
        if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
          result.finish_reason = FinishReason::stop;
          break;
        }
      }
      out.push_back(std::move(result));
    }
  }
  return out;
}

}  // namespace rf::engine::rollout
