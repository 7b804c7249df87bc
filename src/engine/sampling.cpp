#include "engine/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>

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

// One thread's scratch for the draws, kept from one draw to the next: the rollout engine draws once
// per generated token, and six fresh vectors of V elements per draw cost more in page faults (glibc
// hands them back to the OS at every free) than the draw itself. No result depends on what it held.
struct DrawScratch {
  std::vector<double> z, e, probs;  // probs: the kept weights
  std::vector<uint64_t> word, next;
  std::vector<int64_t> order;
};

DrawScratch& draw_scratch() {
  thread_local DrawScratch scratch;
  return scratch;
}

// z[v] = logits_V[v] / temperature in f64 for v < n, exactly what load_f64(logits_V, v) / temperature
// gives (a unit-stride f32 or bf16 row is read directly). Returns whether every z is finite.
bool scaled_logits(TensorView logits_V, int64_t n, double temperature, std::vector<double>& z) {
  z.resize(size_t(n));
  if (logits_V.stride(0) == 1 && logits_V.dtype() == DType::f32) {
    const float* x = logits_V.data<float>();
    if (temperature == 1.0) {  // x / 1 is x: skip the division
      for (int64_t v = 0; v < n; ++v) z[size_t(v)] = double(x[v]);
    } else {
      for (int64_t v = 0; v < n; ++v) z[size_t(v)] = double(x[v]) / temperature;
    }
  } else if (logits_V.stride(0) == 1 && logits_V.dtype() == DType::bf16) {
    const bf16* x = logits_V.data<bf16>();
    for (int64_t v = 0; v < n; ++v) z[size_t(v)] = double(to_f32(x[v])) / temperature;
  } else {
    for (int64_t v = 0; v < n; ++v) z[size_t(v)] = load_f64(logits_V, v * logits_V.stride(0)) / temperature;
  }
  constexpr uint64_t kExponent = uint64_t(0x7ff) << 52;  // all ones: inf or NaN
  uint64_t non_finite = 0;
  for (double x : z) non_finite |= uint64_t((std::bit_cast<uint64_t>(x) & kExponent) == kExponent);
  return non_finite == 0;
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

// The sampler's order: z descending, ties by ascending id.
struct MoreLikely {
  const std::vector<double>& z;
  bool operator()(int64_t a, int64_t b) const {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  }
};

// Every id in the sampler's order, for finite z, into `order`: what sorting with MoreLikely gives, at
// a fraction of its cost. An LSD radix sort, 2 passes of 10 bits, of the words (key << 32 | id) with
// key = kKeyMax - (z - min z) * kKeyMax / (max z - min z) as an integer: a non-increasing function of
// z, so equal z have equal keys, and the sort is stable, so equal keys keep the ascending ids they
// start in. A key shared by different z (closer than the range / 2^20) is put right afterwards by
// sorting its run with MoreLikely; such runs are rare and short. Each pass scatters 4 quarters of the
// words through their own offsets: 4 independent chains of increments, where a single one would stall
// on store-to-load forwarding whenever neighbouring words share a digit.
void radix_order(const std::vector<double>& z, DrawScratch& s) {
  constexpr int kDigitBits = 10, kPasses = 2;
  constexpr size_t kStreams = 4, kDigits = size_t(1) << kDigitBits;
  constexpr uint32_t kKeyMax = (uint32_t(1) << (kDigitBits * kPasses)) - 1;
  const size_t n = z.size(), quarter = (n + kStreams - 1) / kStreams, padded = quarter * kStreams;
  // Min and max in 4 independent chains (no branch to mispredict, as minmax_element has).
  double lo[4] = {z[0], z[0], z[0], z[0]}, hi[4] = {z[0], z[0], z[0], z[0]};
  for (size_t v = 0; v < n; ++v) {
    lo[v % 4] = std::min(lo[v % 4], z[v]);
    hi[v % 4] = std::max(hi[v % 4], z[v]);
  }
  const double z_min = std::min(std::min(lo[0], lo[1]), std::min(lo[2], lo[3]));
  const double z_max = std::max(std::max(hi[0], hi[1]), std::max(hi[2], hi[3]));
  const double range_scale = double(kKeyMax) / (z_max - z_min);
  const double scale = std::isfinite(range_scale) ? range_scale : 0.0;  // all equal, or a subnormal range
  s.word.resize(padded);
  s.next.resize(padded);
  uint64_t* word = s.word.data();
  uint64_t* next = s.next.data();
  for (size_t v = 0; v < n; ++v) {
    const uint32_t q = uint32_t(std::min((z[v] - z_min) * scale, double(kKeyMax)));
    word[v] = uint64_t(kKeyMax - q) << 32 | v;
  }
  // Padding: the largest key and the largest ids, last in the last quarter, so it sorts last.
  for (size_t v = n; v < padded; ++v) word[v] = uint64_t(kKeyMax) << 32 | v;
  for (int pass = 0; pass < kPasses; ++pass) {
    const int shift = 32 + pass * kDigitBits;
    const auto digit = [shift](uint64_t w) { return size_t(w >> shift) & (kDigits - 1); };
    uint32_t offset[kStreams][kDigits] = {};  // counts, then where each quarter's next word of a digit goes
    for (size_t i = 0; i < quarter; ++i)
      for (size_t q = 0; q < kStreams; ++q) ++offset[q][digit(word[q * quarter + i])];
    uint32_t at = 0;
    for (size_t d = 0; d < kDigits; ++d)
      for (size_t q = 0; q < kStreams; ++q) at += std::exchange(offset[q][d], at);
    for (size_t i = 0; i < quarter; ++i) {
      for (size_t q = 0; q < kStreams; ++q) {
        const uint64_t w = word[q * quarter + i];
        next[offset[q][digit(w)]++] = w;
      }
    }
    std::swap(word, next);
  }
  s.order.resize(n);
  int64_t* order = s.order.data();
  for (size_t i = 0; i < n; ++i) order[i] = int64_t(word[i] & 0xffffffffu);
  for (size_t i = 1; i < n; ++i) {
    if (word[i] >> 32 != word[i - 1] >> 32) continue;  // the common case: a key of its own
    size_t end = i + 1;
    while (end < n && word[end] >> 32 == word[i] >> 32) ++end;
    std::sort(order + i - 1, order + end, MoreLikely{z});
    i = end;
  }
}

// The top k ids in the sampler's order, into s.order: a partial sort when k is small or some z is not
// finite (NaN does not order), else the radix sort, which gives the same ids.
void top_k_order(const std::vector<double>& z, int64_t k, bool finite, DrawScratch& s) {
  const int64_t n = int64_t(z.size());
  if (!finite || k * 16 < n) {
    s.order.resize(size_t(n));
    std::iota(s.order.begin(), s.order.end(), int64_t(0));
    std::partial_sort(s.order.begin(), s.order.begin() + k, s.order.end(), MoreLikely{z});
  } else {
    radix_order(z, s);
  }
  s.order.resize(size_t(k));
}

// The kept ids, most likely first, and their probabilities before renormalising (views of the
// scratch): a kept id's probability is weight / total, computed where it is used, so a draw divides
// only up to the id it draws.
struct Kept {
  std::span<const int64_t> ids;
  std::span<const double> weights;
  double total = 0;
};

// From z over the candidates: keep the top-k, softmax over them, keep the top-p prefix, renormalise.
// `e`, when given, holds exp(z[v] - max z) for every candidate (the same values computed here).
Kept kept_distribution(const std::vector<double>& z, bool finite, const SamplingParams& p, DrawScratch& s,
                       const std::vector<double>* e = nullptr) {
  const int64_t num_candidates = int64_t(z.size());
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, num_candidates) : num_candidates;
  top_k_order(z, k, finite, s);
  const std::vector<int64_t>& order = s.order;

  // Softmax over the top-k, then the top-p prefix: the smallest one whose mass reaches top_p.
  const double z_max = z[size_t(order.front())];
  std::vector<double>& weights = s.probs;
  weights.resize(order.size());
  double total = 0;
  if (e) {
    for (size_t i = 0; i < order.size(); ++i) total += weights[i] = (*e)[size_t(order[i])];
  } else {
    for (size_t i = 0; i < order.size(); ++i) total += weights[i] = std::exp(z[size_t(order[i])] - z_max);
  }
  size_t keep = order.size();
  if (p.top_p < 1.0) {
    double mass = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      mass += weights[i] / total;
      if (mass >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  // Keeping all of them, the renormalising sum is `total`: the same additions in the same order.
  const double kept_total =
      keep == order.size() ? total : std::accumulate(weights.begin(), weights.begin() + int64_t(keep), 0.0);
  return {std::span<const int64_t>(order).first(keep), std::span<const double>(weights).first(keep), kept_total};
}

// The inverse CDF of the kept distribution, most likely first, at u.
int64_t draw_kept(const Kept& kept, double u) {
  double cumulative = 0;
  for (size_t i = 0; i < kept.ids.size(); ++i) {
    cumulative += kept.weights[i] / kept.total;
    if (u < cumulative) return kept.ids[i];
  }
  return kept.ids.back();  // u within rounding of 1
}

void check_logprob_args(TensorView logits_V, int64_t token, double temperature) {
  RF_CHECK(logits_V.rank() == 1 && token >= 0 && token < logits_V.size(0), "token_logprob: token {} of a row of {}",
           token, logits_V.shape().to_string());
  RF_CHECK(temperature > 0, "token_logprob: temperature must be positive, got {}", temperature);
}

// max z as `z_max = std::max(z_max, z[v])` over v in order from -inf gives it, the sign of a zero
// included: in 4 independent chains, which find the same value; a zero maximum, whose sign depends on
// the order, is found again in order.
double max_of(const std::vector<double>& z) {
  double part[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (size_t v = 0; v < z.size(); ++v) part[v % 4] = std::max(part[v % 4], z[v]);
  double z_max = std::max(std::max(part[0], part[1]), std::max(part[2], part[3]));
  if (z_max == 0.0 || z_max != z_max) {
    z_max = -INFINITY;
    for (double x : z) z_max = std::max(z_max, x);
  }
  return z_max;
}

}  // namespace

void SamplingParams::validate() const {
  if (!std::isfinite(temperature))
    throw ConfigError("temperature", fmt::format("must be a finite number >= 0 (0: greedy), got {}", temperature));
  if (!(temperature >= 0))
    throw ConfigError("temperature", fmt::format("must be >= 0 (0: greedy), got {}", temperature));
  if (!(top_p > 0 && top_p <= 1)) throw ConfigError("top_p", fmt::format("must be in (0, 1], got {}", top_p));
}

int64_t sample_token(TensorView logits_V, int64_t num_candidates, const SamplingParams& params, double u) {
  check_candidates(logits_V, num_candidates);
  if (params.temperature == 0) return argmax(logits_V, num_candidates);
  DrawScratch& s = draw_scratch();
  const bool finite = scaled_logits(logits_V, num_candidates, params.temperature, s.z);
  return draw_kept(kept_distribution(s.z, finite, params, s), u);
}

std::vector<double> sampling_distribution(TensorView logits_V, int64_t num_candidates, const SamplingParams& params) {
  check_candidates(logits_V, num_candidates);
  std::vector<double> dist(static_cast<size_t>(logits_V.size(0)), 0.0);
  if (params.temperature == 0) {
    dist[size_t(argmax(logits_V, num_candidates))] = 1.0;
    return dist;
  }
  DrawScratch& s = draw_scratch();
  const bool finite = scaled_logits(logits_V, num_candidates, params.temperature, s.z);
  const Kept kept = kept_distribution(s.z, finite, params, s);
  for (size_t i = 0; i < kept.ids.size(); ++i) dist[size_t(kept.ids[i])] = kept.weights[i] / kept.total;
  return dist;
}

double token_logprob(TensorView logits_V, int64_t token, double temperature) {
  check_logprob_args(logits_V, token, temperature);
  std::vector<double>& z = draw_scratch().z;
  scaled_logits(logits_V, logits_V.size(0), temperature, z);
  const double z_max = max_of(z);
  double sum = 0;
  for (double x : z) sum += std::exp(x - z_max);
  return z[size_t(token)] - z_max - std::log(sum);
}

std::pair<int64_t, double> sample_token_with_logprob(TensorView logits_V, int64_t num_candidates,
                                                     const SamplingParams& params, double u,
                                                     double logprob_temperature) {
  check_candidates(logits_V, num_candidates);
  const bool shared = params.temperature > 0 && params.temperature == logprob_temperature &&
                      num_candidates == logits_V.size(0);
  DrawScratch& s = draw_scratch();
  if (!shared || !scaled_logits(logits_V, num_candidates, params.temperature, s.z)) {
    const int64_t token = sample_token(logits_V, num_candidates, params, u);
    return {token, token_logprob(logits_V, token, logprob_temperature)};
  }
  // One exp per id serves both: the sampler's softmax takes exp(z - max z) in its order, the
  // log-prob's normaliser the same values in id order. (Its max and the sampler's are the same
  // number; they could differ only in the sign of a zero, which no exp(z - max) sees.)
  const std::vector<double>& z = s.z;
  const double z_max = max_of(z);
  s.e.resize(z.size());
  double sum = 0;
  for (size_t v = 0; v < z.size(); ++v) sum += s.e[v] = std::exp(z[v] - z_max);
  const int64_t token = draw_kept(kept_distribution(z, true, params, s, &s.e), u);
  check_logprob_args(logits_V, token, logprob_temperature);
  return {token, z[size_t(token)] - z_max - std::log(sum)};
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
