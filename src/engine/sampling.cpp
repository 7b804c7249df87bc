#include "engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/element_access.h"
#include "core/error.h"
#include "core/philox.h"
#include "engine/sequence_padding.h"

namespace rf::engine {
namespace {

void check_candidates(TensorView logits_V, int64_t num_candidates) {
  RF_CHECK(logits_V.rank() == 1, "logits_V: expected one row, got {}", logits_V.shape().to_string());
  RF_CHECK(num_candidates > 0 && num_candidates <= logits_V.size(0), "num_candidates {} outside [1, {}]",
           num_candidates, logits_V.size(0));
}

int64_t argmax(TensorView logits_V, int64_t num_candidates) {
  int64_t best = 0;
  double best_logit = load_f64(logits_V, 0);
  for (int64_t v = 1; v < num_candidates; ++v) {
    const double logit = load_f64(logits_V, v * logits_V.stride(0));
    if (logit > best_logit) {  // the first maximum wins, as torch.argmax
      best_logit = logit;
      best = v;
    }
  }
  return best;
}

// The kept ids, most likely first, and their renormalised probabilities.
struct Kept {
  std::vector<int64_t> ids;
  std::vector<double> probs;
};

Kept kept_distribution(TensorView logits_V, int64_t num_candidates, const SamplingParams& p) {
  std::vector<double> z(static_cast<size_t>(num_candidates));
  for (int64_t v = 0; v < num_candidates; ++v) z[size_t(v)] = load_f64(logits_V, v * logits_V.stride(0)) / p.temperature;
  std::vector<int64_t> order(static_cast<size_t>(num_candidates));
  std::iota(order.begin(), order.end(), int64_t(0));
  const auto before = [&](int64_t a, int64_t b) { return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b); };
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, num_candidates) : num_candidates;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  order.resize(size_t(k));

  // Softmax over the top-k, then the top-p prefix: the smallest one whose mass reaches top_p.
  const double z_max = z[size_t(order.front())];
  std::vector<double> probs(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) total += probs[i] = std::exp(z[size_t(order[i])] - z_max);
  size_t keep = order.size();
  if (p.top_p < 1.0) {
    double mass = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      mass += probs[i] / total;
      if (mass >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  order.resize(keep);
  probs.resize(keep);
  const double kept_total = std::accumulate(probs.begin(), probs.end(), 0.0);
  for (double& q : probs) q /= kept_total;
  return {std::move(order), std::move(probs)};
}

}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw ConfigError("temperature", fmt::format("must be >= 0 (0: greedy), got {}", temperature));
  if (!(top_p > 0 && top_p <= 1)) throw ConfigError("top_p", fmt::format("must be in (0, 1], got {}", top_p));
}

int64_t sample_token(TensorView logits_V, int64_t num_candidates, const SamplingParams& params, double u) {
  check_candidates(logits_V, num_candidates);
  if (params.temperature == 0) return argmax(logits_V, num_candidates);
  const Kept kept = kept_distribution(logits_V, num_candidates, params);
  double cumulative = 0;
  for (size_t i = 0; i < kept.ids.size(); ++i) {
    cumulative += kept.probs[i];
    if (u < cumulative) return kept.ids[i];
  }
  return kept.ids.back();  // u within rounding of 1
}

std::vector<double> sampling_distribution(TensorView logits_V, int64_t num_candidates, const SamplingParams& params) {
  check_candidates(logits_V, num_candidates);
  std::vector<double> dist(static_cast<size_t>(logits_V.size(0)), 0.0);
  if (params.temperature == 0) {
    dist[size_t(argmax(logits_V, num_candidates))] = 1.0;
    return dist;
  }
  const Kept kept = kept_distribution(logits_V, num_candidates, params);
  for (size_t i = 0; i < kept.ids.size(); ++i) dist[size_t(kept.ids[i])] = kept.probs[i];
  return dist;
}

double token_logprob(TensorView logits_V, int64_t token, double temperature) {
  RF_CHECK(logits_V.rank() == 1 && token >= 0 && token < logits_V.size(0), "token_logprob: token {} of a row of {}",
           token, logits_V.shape().to_string());
  RF_CHECK(temperature > 0, "token_logprob: temperature must be positive, got {}", temperature);
  const int64_t V = logits_V.size(0);
  double z_max = -INFINITY;
  for (int64_t v = 0; v < V; ++v) z_max = std::max(z_max, load_f64(logits_V, v * logits_V.stride(0)) / temperature);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(load_f64(logits_V, v * logits_V.stride(0)) / temperature - z_max);
  return load_f64(logits_V, token * logits_V.stride(0)) / temperature - z_max - std::log(sum);
}

std::vector<SampledSequence> sample_decode(model::CausalLm& model, const std::vector<SampleRequest>& requests,
                                           int64_t max_new_tokens, std::span<const int64_t> eos_ids,
                                           int64_t num_candidates, const SamplingParams& params) {
  params.validate();
  RF_CHECK(max_new_tokens >= 0, "max_new_tokens must be >= 0, got {}", max_new_tokens);
  std::vector<SampledSequence> out(requests.size());
  std::vector<std::vector<int64_t>> sequences;
  for (const SampleRequest& r : requests) {
    RF_CHECK(!r.prompt.empty(), "request {} sample {}: empty prompt", r.request, r.sample);
    sequences.push_back(r.prompt);
  }
  std::vector<bool> done(requests.size(), max_new_tokens == 0);
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    std::vector<std::vector<int64_t>> active;
    std::vector<size_t> which;
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (done[i]) continue;
      active.push_back(sequences[i]);
      which.push_back(i);
    }
    if (active.empty()) break;
    model::PackedSequences packed = model::pack_sequences(active);
    // Sequence parallel splits the tokens evenly over TP: a padding document after the real ones.
    if (packed.tokens_N.numel() % model.token_multiple() != 0)
      packed = pad_to_multiple(packed.inputs(), model.token_multiple());
    model.forward(packed.inputs(), model::EntropyOutput::skip);
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = which[a];
      const TensorView row = model.vocab_logits(packed.cu_seqlens[a + 1] - 1);
      const double u = Philox(params.seed, requests[i].request << 32 | requests[i].sample).uniform(uint64_t(step));
      const int64_t token = sample_token(row, num_candidates, params, u);
      sequences[i].push_back(token);
      out[i].ids.push_back(token);
      if (std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) {
        out[i].finish_reason = FinishReason::stop;
        done[i] = true;
      }
    }
  }
  return out;
}

std::string finish_reason_name(FinishReason reason) { return reason == FinishReason::stop ? "stop" : "length"; }

}  // namespace rf::engine
