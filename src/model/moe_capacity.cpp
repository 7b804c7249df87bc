#include "model/moe_capacity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/element_access.h"
#include "core/error.h"

namespace rf::model {
namespace {

int64_t offset_of(const TensorView& x, int64_t t, int64_t e) { return t * x.stride(0) + e * x.stride(1); }

void check_rows(TensorView x, int64_t T, int64_t E, const char* what) {
  RF_CHECK(x.rank() == 2 && x.size(0) == T && x.size(1) == E, "moe capacity: {} must be [{}, {}], got {}", what, T, E,
           x.describe());
}

}  // namespace

void CapacityConfig::validate(std::string_view prefix) const {
  const std::string p(prefix);
  if (!(std::isfinite(capacity_factor) && capacity_factor >= 0))
    throw ConfigError(p + "moe_expert_capacity_factor",
                      fmt::format("must be a finite number >= 0 (0: dropless), got {}", capacity_factor));
  if (pad_to_capacity && dropless())
    throw ConfigError(p + "moe_pad_expert_input_to_capacity",
                      "pads to the expert capacity, which needs moe_expert_capacity_factor > 0");
}

int64_t expert_capacity(int64_t num_tokens, int64_t top_k, int64_t num_experts, double capacity_factor) {
  RF_CHECK(num_tokens >= 0 && top_k >= 1 && num_experts >= 1 && capacity_factor > 0,
           "expert_capacity: {} tokens, top {}, {} experts, factor {}", num_tokens, top_k, num_experts,
           capacity_factor);
  return int64_t(std::ceil(double(num_tokens * top_k) / double(num_experts) * capacity_factor));
}

int64_t apply_capacity(const CapacityConfig& c, int64_t top_k, TensorView probs_TE, TensorView routing_map_TE,
                       TensorView kept_probs_TE, TensorView kept_map_TE) {
  RF_CHECK(probs_TE.rank() == 2, "moe capacity: probs_TE must be [T, E], got {}", probs_TE.describe());
  const int64_t T = probs_TE.size(0), E = probs_TE.size(1);
  check_rows(routing_map_TE, T, E, "routing_map_TE");
  check_rows(kept_probs_TE, T, E, "kept_probs_TE");
  check_rows(kept_map_TE, T, E, "kept_map_TE");
  check_dtype(kept_probs_TE, probs_TE.dtype(), "kept_probs_TE");
  check_dtype(routing_map_TE, DType::u8, "routing_map_TE");
  check_dtype(kept_map_TE, DType::u8, "kept_map_TE");
  const int64_t capacity = c.dropless() ? T : std::min(expert_capacity(T, top_k, E, c.capacity_factor), T);
  std::vector<double> prob(static_cast<size_t>(T)), key(static_cast<size_t>(T));
  std::vector<char> routed(static_cast<size_t>(T)), selected(static_cast<size_t>(T));
  std::vector<int64_t> order(static_cast<size_t>(T));
  int64_t dropped = 0;
  // One expert (column) at a time, read whole before it is written: the outputs may alias the inputs.
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t t = 0; t < T; ++t) {
      prob[size_t(t)] = load_f64(probs_TE, offset_of(probs_TE, t, e));
      routed[size_t(t)] = load_f64(routing_map_TE, offset_of(routing_map_TE, t, e)) != 0;
      key[size_t(t)] = c.drop_policy == TokenDropPolicy::probs ? prob[size_t(t)] : double(routed[size_t(t)]);
    }
    // Megatron's capacity mask: the top `capacity` tokens by key (over all tokens, routed or not), ties to the
    // lower token index as torch.topk's on the CPU; every token when the capacity holds them all.
    std::fill(selected.begin(), selected.end(), capacity == T);
    if (capacity < T) {
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + capacity, order.end(), [&](int64_t a, int64_t b) {
        return key[size_t(a)] > key[size_t(b)] || (key[size_t(a)] == key[size_t(b)] && a < b);
      });
      for (int64_t i = 0; i < capacity; ++i) selected[size_t(order[size_t(i)])] = 1;
    }
    for (int64_t t = 0; t < T; ++t) {
      const bool kept = c.pad_to_capacity ? selected[size_t(t)] : routed[size_t(t)] && selected[size_t(t)];
      dropped += routed[size_t(t)] && !selected[size_t(t)];
      store_f64(kept_probs_TE, offset_of(kept_probs_TE, t, e), kept ? prob[size_t(t)] : 0.0);
      store_f64(kept_map_TE, offset_of(kept_map_TE, t, e), kept ? 1.0 : 0.0);
    }
  }
  return dropped;
}

void mask_dropped_gradients(TensorView kept_map_TE, TensorView dprobs_TE) {
  RF_CHECK(kept_map_TE.rank() == 2, "moe capacity: kept_map_TE must be [T, E], got {}", kept_map_TE.describe());
  const int64_t T = kept_map_TE.size(0), E = kept_map_TE.size(1);
  check_rows(dprobs_TE, T, E, "dprobs_TE");
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e)
      if (load_f64(kept_map_TE, offset_of(kept_map_TE, t, e)) == 0)
        store_f64(dprobs_TE, offset_of(dprobs_TE, t, e), 0.0);
}

}  // namespace rf::model
