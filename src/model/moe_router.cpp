#include "model/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/element_access.h"
#include "core/error.h"

namespace rf::model {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();
constexpr double kNormalizeEpsilon = 1e-20;  // DeepSeek-V3's and Megatron's guard of the renormalising sum

// Indices of the `count` largest of `values`, largest first, ties to the lower index (torch.topk on the CPU).
std::vector<int64_t> top_indices(const std::vector<double>& values, int64_t count) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return values[size_t(a)] > values[size_t(b)]; });
  order.resize(size_t(count));
  return order;
}

// Keeps the choice scores of the best group_topk groups (a group scored by the sum of its top top_k / group_topk
// choice scores); the others' become -inf, so no expert of theirs is chosen.
void limit_to_groups(const RouterConfig& c, std::vector<double>& choice) {
  const int64_t group_size = c.num_experts / c.num_groups, per_group = c.top_k / c.group_topk;
  std::vector<double> group_score(static_cast<size_t>(c.num_groups));
  for (int64_t g = 0; g < c.num_groups; ++g) {
    const std::vector<double> members(choice.begin() + g * group_size, choice.begin() + (g + 1) * group_size);
    double sum = 0;
    for (int64_t i : top_indices(members, per_group)) sum += members[size_t(i)];
    group_score[size_t(g)] = sum;
  }
  std::vector<char> kept(static_cast<size_t>(c.num_groups), 0);
  for (int64_t g : top_indices(group_score, c.group_topk)) kept[size_t(g)] = 1;
  for (int64_t e = 0; e < c.num_experts; ++e)
    if (!kept[size_t(e / group_size)]) choice[size_t(e)] = kMinusInfinity;
}

void softmax_into(const std::vector<double>& x, std::vector<double>& out) {
  const double max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += (out[i] = std::exp(x[i] - max));
  for (double& v : out) v /= sum;
}

// Element (t, e) of a [T, E] view.
double value_at(const TensorView& x, int64_t t, int64_t e) { return load_f64(x, t * x.stride(0) + e * x.stride(1)); }
void set_at(const TensorView& x, int64_t t, int64_t e, double value) {
  store_f64(x, t * x.stride(0) + e * x.stride(1), value);
}

void check_shape(TensorView x, int64_t T, int64_t E, const char* what) {
  RF_CHECK(x.rank() == 2 && x.size(0) == T && x.size(1) == E, "router: {} must be [{}, {}], got {}", what, T, E,
           x.describe());
}

}  // namespace

void RouterConfig::validate(std::string_view prefix) const {
  const std::string p(prefix);
  if (num_experts < 1) throw ConfigError(p + "num_experts", fmt::format("must be >= 1, got {}", num_experts));
  if (top_k < 1 || top_k > num_experts)
    throw ConfigError(p + "num_experts_per_tok",
                      fmt::format("{} must lie in [1, num_experts = {}]", top_k, num_experts));
  if (pre_softmax && score != RouterScore::softmax)
    throw ConfigError(p + "pre_softmax", "applies to softmax scores only");
  if (!(scaling_factor > 0))
    throw ConfigError(p + "routed_scaling_factor", fmt::format("must be positive, got {}", scaling_factor));
  if (num_groups == 0) return;
  if (num_groups < 0 || num_experts % num_groups != 0)
    throw ConfigError(p + "n_group", fmt::format("{} does not divide the {} experts", num_groups, num_experts));
  if (group_topk < 1 || group_topk > num_groups)
    throw ConfigError(p + "topk_group", fmt::format("{} must lie in [1, n_group = {}]", group_topk, num_groups));
  if (top_k % group_topk != 0 || top_k / group_topk > num_experts / num_groups)
    throw ConfigError(p + "topk_group",
                      fmt::format("{} groups cannot hold the top {} experts evenly ({} experts per group)", group_topk,
                                  top_k, num_experts / num_groups));
}

namespace {

// Both forwards: the router's own top-k choice when replayed_Tk is empty, else row t's given experts, ordered as the
// free choice orders its own (by choice score, largest first, ties to the lower index), so the weights' sums run in
// the same order and a replay of the router's own choice is bit-identical to it.
void route_rows(const RouterConfig& c, TensorView logits_TE, TensorView expert_bias_E, TensorView replayed_Tk,
                TensorView probs_TE, TensorView routing_map_TE, RouterSaved& saved) {
  const int64_t T = logits_TE.size(0), E = c.num_experts;
  check_shape(logits_TE, T, E, "logits_TE");
  check_shape(probs_TE, T, E, "probs_TE");
  check_shape(routing_map_TE, T, E, "routing_map_TE");
  RF_CHECK(expert_bias_E.empty() || (c.score == RouterScore::sigmoid && expert_bias_E.numel() == E),
           "router: an expert bias of {} needs sigmoid scores and {} entries", expert_bias_E.describe(), E);
  const bool replay = !replayed_Tk.empty();
  if (replay)
    RF_CHECK(replayed_Tk.rank() == 2 && replayed_Tk.size(0) == T && replayed_Tk.size(1) == c.top_k &&
                 (replayed_Tk.dtype() == DType::i32 || replayed_Tk.dtype() == DType::i64),
             "router: replayed experts must be i32 or i64 [{}, {}], got {}", T, c.top_k, replayed_Tk.describe());
  if (saved.scores_TE.numel() < T * E) saved.scores_TE = Tensor({T, E}, DType::f64);
  double* scores = saved.scores_TE.data<double>();
  std::vector<double> logits(static_cast<size_t>(E)), score(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  std::vector<int64_t> chosen(static_cast<size_t>(c.top_k));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) logits[size_t(e)] = value_at(logits_TE, t, e);
    if (c.score == RouterScore::sigmoid) {
      for (int64_t e = 0; e < E; ++e) score[size_t(e)] = 1.0 / (1.0 + std::exp(-logits[size_t(e)]));
      for (int64_t e = 0; e < E; ++e) {
        const double bias = expert_bias_E.empty() ? 0.0 : load_f64(expert_bias_E, e * expert_bias_E.stride(0));
        choice[size_t(e)] = score[size_t(e)] + bias;
      }
    } else if (c.pre_softmax) {
      softmax_into(logits, score);
      choice = score;
    } else {
      choice = logits;  // the weights are the softmax over the chosen logits, below
    }
    bool given = replay;
    if (replay) {  // a row of -1: no record for this token, the router chooses
      given = false;
      for (int64_t i = 0; i < c.top_k; ++i) given = given || value_at(replayed_Tk, t, i) != -1;
    }
    if (given) {
      for (int64_t i = 0; i < c.top_k; ++i) {
        const int64_t e = int64_t(value_at(replayed_Tk, t, i));
        RF_CHECK(e >= 0 && e < E, "router: replayed expert {} of token {} outside [0, {})", e, t, E);
        for (int64_t j = 0; j < i; ++j)
          RF_CHECK(chosen[size_t(j)] != e, "router: token {} replays expert {} twice", t, e);
        chosen[size_t(i)] = e;
      }
      // The group limit only masks; the free choice's experts keep their scores, so the order is the same.
      std::stable_sort(chosen.begin(), chosen.end(), [&](int64_t a, int64_t b) {
        return choice[size_t(a)] > choice[size_t(b)] || (choice[size_t(a)] == choice[size_t(b)] && a < b);
      });
    } else {
      if (c.num_groups > 0) limit_to_groups(c, choice);
      chosen = top_indices(choice, c.top_k);
    }
    std::vector<double> weight(static_cast<size_t>(c.top_k));
    if (c.score == RouterScore::softmax && !c.pre_softmax) {
      std::vector<double> chosen_logits(static_cast<size_t>(c.top_k));
      for (int64_t i = 0; i < c.top_k; ++i) chosen_logits[size_t(i)] = logits[size_t(chosen[size_t(i)])];
      softmax_into(chosen_logits, weight);
      std::fill(score.begin(), score.end(), 0.0);
      for (int64_t i = 0; i < c.top_k; ++i) score[size_t(chosen[size_t(i)])] = weight[size_t(i)];
    } else {
      double sum = 0;
      for (int64_t i = 0; i < c.top_k; ++i) sum += (weight[size_t(i)] = score[size_t(chosen[size_t(i)])]);
      if (c.normalize_topk) {
        const double denominator = c.score == RouterScore::sigmoid ? sum + kNormalizeEpsilon : sum;
        for (double& w : weight) w /= denominator;
      }
    }
    std::copy(score.begin(), score.end(), scores + t * E);
    for (int64_t e = 0; e < E; ++e) {
      set_at(probs_TE, t, e, 0.0);
      set_at(routing_map_TE, t, e, 0.0);
    }
    for (int64_t i = 0; i < c.top_k; ++i) {
      set_at(probs_TE, t, chosen[size_t(i)], weight[size_t(i)] * c.scaling_factor);
      set_at(routing_map_TE, t, chosen[size_t(i)], 1.0);
    }
  }
}

}  // namespace

void route_forward(const RouterConfig& c, TensorView logits_TE, TensorView expert_bias_E, TensorView probs_TE,
                   TensorView routing_map_TE, RouterSaved& saved) {
  route_rows(c, logits_TE, expert_bias_E, TensorView(), probs_TE, routing_map_TE, saved);
}

void route_forward_replayed(const RouterConfig& c, TensorView logits_TE, TensorView expert_bias_E,
                            TensorView experts_Tk, TensorView probs_TE, TensorView routing_map_TE, RouterSaved& saved) {
  RF_CHECK(!experts_Tk.empty(), "route_forward_replayed: no experts given");
  route_rows(c, logits_TE, expert_bias_E, experts_Tk, probs_TE, routing_map_TE, saved);
}

void routed_experts(TensorView routing_map_TE, int64_t top_k, TensorView experts_Tk) {
  const int64_t T = routing_map_TE.size(0), E = routing_map_TE.size(1);
  RF_CHECK(experts_Tk.rank() == 2 && experts_Tk.size(0) == T && experts_Tk.size(1) == top_k,
           "routed_experts: experts_Tk must be [{}, {}], got {}", T, top_k, experts_Tk.describe());
  for (int64_t t = 0; t < T; ++t) {
    int64_t i = 0;
    for (int64_t e = 0; e < E; ++e) {
      if (value_at(routing_map_TE, t, e) == 0) continue;
      RF_CHECK(i < top_k, "routed_experts: token {} routed to more than {} experts", t, top_k);
      set_at(experts_Tk, t, i++, double(e));
    }
    RF_CHECK(i == top_k, "routed_experts: token {} routed to {} experts, expected {}", t, i, top_k);
  }
}

void route_backward(const RouterConfig& c, const RouterSaved& saved, TensorView routing_map_TE, TensorView dprobs_TE,
                    TensorView dlogits_TE) {
  const int64_t T = routing_map_TE.size(0), E = c.num_experts;
  check_shape(routing_map_TE, T, E, "routing_map_TE");
  check_shape(dprobs_TE, T, E, "dprobs_TE");
  check_shape(dlogits_TE, T, E, "dlogits_TE");
  RF_CHECK(saved.scores_TE.numel() >= T * E, "router backward: {} tokens, the forward saved {}", T,
           saved.scores_TE.numel() / E);
  const double* scores = saved.scores_TE.data<double>();
  std::vector<double> g(static_cast<size_t>(E)), ds(static_cast<size_t>(E));
  std::vector<char> chosen(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const double* s = scores + t * E;
    // g: dL/d(weight before scaling) at the chosen experts, 0 elsewhere.
    for (int64_t e = 0; e < E; ++e) {
      chosen[size_t(e)] = value_at(routing_map_TE, t, e) != 0;
      g[size_t(e)] = chosen[size_t(e)] ? value_at(dprobs_TE, t, e) * c.scaling_factor : 0.0;
    }
    if (c.score == RouterScore::softmax && !c.pre_softmax) {
      // Softmax over the chosen logits (s holds it, 0 elsewhere): dl = s (g - sum s g).
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += s[e] * g[size_t(e)];
      for (int64_t e = 0; e < E; ++e) ds[size_t(e)] = s[e] * (g[size_t(e)] - dot);
    } else {
      // The weights are the scores at the chosen experts, renormalised by their sum S: w = s / S, so
      // dL/ds_j = (g_j - sum_i g_i w_i) / S at the chosen, 0 elsewhere.
      if (c.normalize_topk) {
        double sum = c.score == RouterScore::sigmoid ? kNormalizeEpsilon : 0.0, gs = 0;
        for (int64_t e = 0; e < E; ++e)
          if (chosen[size_t(e)]) sum += s[e];
        for (int64_t e = 0; e < E; ++e) gs += g[size_t(e)] * s[e];
        for (int64_t e = 0; e < E; ++e) g[size_t(e)] = chosen[size_t(e)] ? (g[size_t(e)] - gs / sum) / sum : 0.0;
      }
      if (c.score == RouterScore::sigmoid) {
        for (int64_t e = 0; e < E; ++e) ds[size_t(e)] = g[size_t(e)] * s[e] * (1.0 - s[e]);
      } else {  // softmax over all E
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += s[e] * g[size_t(e)];
        for (int64_t e = 0; e < E; ++e) ds[size_t(e)] = s[e] * (g[size_t(e)] - dot);
      }
    }
    for (int64_t e = 0; e < E; ++e) set_at(dlogits_TE, t, e, ds[size_t(e)]);
  }
}

}  // namespace rf::model
