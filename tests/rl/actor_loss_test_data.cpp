#include "actor_loss_test_data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "core/element_access.h"
#include "rl_test_data.h"

namespace rf::testing {
namespace {

constexpr double kKinkMargin = 0.01;

// Uniform in [-0.6, 0.6], redrawn while within kKinkMargin of a kink.
double draw_away_from(Draws& draws, const std::vector<double>& kinks) {
  while (true) {
    const double x = draws.uniform(-0.6, 0.6);
    bool near = false;
    for (double kink : kinks) near = near || std::abs(x - kink) < kKinkMargin;
    if (!near) return x;
  }
}

double* f64(const Tensor& t) { return t.data<double>(); }

}  // namespace

ResponseRows random_response_rows(const ResponseRowsSpec& spec) {
  const int64_t B = spec.B, T = spec.T;
  Draws draws(spec.seed);
  ResponseRows rows{Tensor({B, T}, DType::f64),
                    Tensor({B, T}, DType::f64),
                    Tensor({B, T}, DType::f64),
                    random_response_mask(B, T, spec.seed + 1),
                    Tensor({B, T}, DType::f64),
                    Tensor({B, T}, DType::f64),
                    spec.with_weights ? Tensor({B, T}, DType::f64) : Tensor()};
  rows.mask.at<float>({0, 0}) = 1.0f;  // at least one loss token
  const bool per_row = !spec.row_kinks.empty();
  for (int64_t b = 0; b < B; ++b) {
    const double row_advantage = draws.uniform(0.1, 1.5) * (draws.uniform() < 0.5 ? -1.0 : 1.0);
    const double row_weight = draws.uniform(0.5, 1.5);
    std::vector<double> delta(static_cast<size_t>(T));
    double delta_sum = 0, length = 0;
    for (int64_t t = 0; t < T; ++t) {
      delta[size_t(t)] = draw_away_from(draws, spec.kinks);
      if (rows.mask.at<float>({b, t}) != 0.0f) {
        delta_sum += delta[size_t(t)];
        length += 1;
      }
    }
    // Shift the row so that its masked mean is a draw away from the sequence-level kinks.
    const double shift = per_row && length > 0 ? draw_away_from(draws, spec.row_kinks) - delta_sum / length : 0.0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      f64(rows.log_prob)[i] = draws.uniform(-3.0, -0.05);
      f64(rows.old_log_prob)[i] = f64(rows.log_prob)[i] - (delta[size_t(t)] + shift);
      f64(rows.advantages)[i] =
          per_row ? row_advantage : draws.uniform(0.1, 1.5) * (draws.uniform() < 0.5 ? -1.0 : 1.0);
      // |log_prob - ref| >= 0.05: away from abs's kink at 0 (k3's clamps bind beyond 2.5 and -11).
      f64(rows.ref_log_prob)[i] =
          f64(rows.log_prob)[i] + draws.uniform(0.05, 1.5) * (draws.uniform() < 0.5 ? -1.0 : 1.0);
      f64(rows.entropy)[i] = draws.uniform(0.1, 3.0);
      if (spec.with_weights) f64(rows.rollout_is_weights)[i] = per_row ? row_weight : draws.uniform(0.5, 1.5);
    }
  }
  return rows;
}

int64_t num_loss_tokens(const Tensor& mask_BT) {
  int64_t count = 0;
  for (int64_t i = 0; i < mask_BT.numel(); ++i) count += load_f64(mask_BT, i) != 0.0;
  return count;
}

rl::PolicyLossConfig fd_policy_config() {
  return {.clip_ratio_low = 0.2, .clip_ratio_high = 0.28, .clip_ratio_c = 1.7, .ppo_kl_coef = 0.1};
}

FdMode fd_mode(std::string_view loss_mode, const rl::PolicyLossConfig& c) {
  const std::vector<double> ratio_bounds{std::log(1 - c.low()), std::log(1 + c.high())};
  if (loss_mode == "vanilla") return {{ratio_bounds[0], ratio_bounds[1], std::log(c.clip_ratio_c)}, {}};
  if (loss_mode == "gspo") return {{}, ratio_bounds};
  if (loss_mode == "cispo") return {{}, {}, FdDirection::log_prob_and_old};
  if (loss_mode == "geo_mean") return {{-c.low(), c.high()}, {}};
  if (loss_mode == "kl_cov") return {{0.0}, {}};
  return {};  // sapo, gpg: smooth
}

double stable_kl_cov_ratio(const ResponseRows& rows) {
  std::vector<double> advantages, log_probs;
  for (int64_t i = 0; i < rows.mask.numel(); ++i) {
    if (rows.mask.data<float>()[i] == 0.0f) continue;
    advantages.push_back(f64(rows.advantages)[i]);
    log_probs.push_back(f64(rows.log_prob)[i]);
  }
  const double n = double(advantages.size());
  double mean_advantage = 0, mean_log_prob = 0;
  for (size_t k = 0; k < advantages.size(); ++k) {
    mean_advantage += advantages[k] / n;
    mean_log_prob += log_probs[k] / n;
  }
  std::vector<double> covariance;
  for (size_t k = 0; k < advantages.size(); ++k)
    covariance.push_back((advantages[k] - mean_advantage) * (log_probs[k] - mean_log_prob));
  std::sort(covariance.rbegin(), covariance.rend());
  size_t count = 1;
  for (size_t k = 1; k < covariance.size(); ++k)
    if (covariance[k - 1] - covariance[k] > covariance[count - 1] - covariance[count]) count = k;
  RF_CHECK(covariance.size() >= 2 && covariance[count - 1] - covariance[count] > 0.02,
           "stable_kl_cov_ratio: no clear gap between the covariances; draw other rows");
  return (double(count) + 0.5) / n;
}

model::ModelOutputs PackedRows::outputs() const { return {log_prob_N, entropy_N, TensorView(), 0}; }

PackedRows pack_response_rows(const ResponseRows& rows, int64_t first_row, int64_t num_rows) {
  const int64_t T = rows.log_prob.size(1);
  auto prompt_length = [](int64_t b) { return 1 + (3 * b) % 4; };
  std::vector<int32_t> cu{0};
  PackedRows packed;
  for (int64_t b = first_row; b < first_row + num_rows; ++b) {
    packed.response_start.push_back(cu.back() + prompt_length(b) - 1);
    cu.push_back(int32_t(cu.back() + prompt_length(b) + T));
  }
  const int64_t N = cu.back();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Draws draws(uint64_t(1000 + first_row));
  Tensor input_ids({N}, DType::i64), loss_mask({N}, DType::f32), cu_seqlens({int64_t(cu.size())}, DType::i32);
  Tensor old_log_probs({N}, DType::f64), advantages({N}, DType::f64), ref_log_prob({N}, DType::f64);
  Tensor weights = rows.rollout_is_weights.empty() ? Tensor() : Tensor({N}, DType::f64);
  packed.log_prob_N = Tensor({N}, DType::f64);
  packed.entropy_N = Tensor({N}, DType::f64);
  for (int64_t n = 0; n < N; ++n) {
    f64(old_log_probs)[n] = f64(advantages)[n] = f64(ref_log_prob)[n] = nan;
    if (!weights.empty()) f64(weights)[n] = nan;
    f64(packed.log_prob_N)[n] = draws.uniform(-4.0, -0.1);
    f64(packed.entropy_N)[n] = draws.uniform(0.1, 3.0);
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = packed.response_start[size_t(r)] + t, i = (first_row + r) * T + t;
      loss_mask.data<float>()[n] = rows.mask.data<float>()[i];
      f64(old_log_probs)[n] = f64(rows.old_log_prob)[i];
      f64(advantages)[n] = f64(rows.advantages)[i];
      f64(ref_log_prob)[n] = f64(rows.ref_log_prob)[i];
      if (!weights.empty()) f64(weights)[n] = f64(rows.rollout_is_weights)[i];
      f64(packed.log_prob_N)[n] = f64(rows.log_prob)[i];
      f64(packed.entropy_N)[n] = f64(rows.entropy)[i];
    }
  }
  std::copy(cu.begin(), cu.end(), cu_seqlens.data<int32_t>());
  packed.micro_batch.set("input_ids", std::move(input_ids));
  packed.micro_batch.set("loss_mask", std::move(loss_mask));
  packed.micro_batch.set("cu_seqlens", std::move(cu_seqlens));
  packed.micro_batch.set("old_log_probs", std::move(old_log_probs));
  packed.micro_batch.set("advantages", std::move(advantages));
  packed.micro_batch.set("ref_log_prob", std::move(ref_log_prob));
  if (!weights.empty()) packed.micro_batch.set("rollout_is_weights", std::move(weights));
  return packed;
}

engine::LossContext step_context(std::span<const PackedRows> micro_batches) {
  engine::LossContext context;
  context.num_microbatches = int64_t(micro_batches.size());
  for (const PackedRows& packed : micro_batches) {
    const TensorView mask = packed.micro_batch.get("loss_mask");
    for (int64_t n = 0; n < mask.numel(); ++n) context.global_num_tokens += load_f64(mask, n) != 0.0;
    context.global_num_seqs += int64_t(packed.micro_batch.cu_seqlens().size()) - 1;
  }
  return context;
}

const nlohmann::json& torch_grad_reference() {
  static const nlohmann::json reference = [] {
    const std::string path = std::string(RF_RL_TEST_DIR) + "/torch_grad_reference.json";
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open (regenerate it with tests/rl/torch_grad_reference.py)");
    return nlohmann::json::parse(in);
  }();
  return reference;
}

Tensor json_tensor(const nlohmann::json& nested) {
  std::vector<double> values;
  Shape shape;
  if (nested.is_array() && !nested.empty() && nested[0].is_array()) {
    shape = Shape{int64_t(nested.size()), int64_t(nested[0].size())};
    for (const auto& row : nested) {
      RF_CHECK(int64_t(row.size()) == shape[1], "json_tensor: ragged rows");
      for (const auto& x : row) values.push_back(x.get<double>());
    }
  } else {
    shape = Shape{int64_t(nested.size())};
    for (const auto& x : nested) values.push_back(x.get<double>());
  }
  Tensor t(shape, DType::f64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

}  // namespace rf::testing
