#include "rl/agg_loss.h"

#include <array>

#include "rl/masked_stats.h"
#include "rl/named_choice.h"

namespace rf::rl {
namespace {


// numerator / denominator, or 0 when there is nothing to normalise (see the header).
double ratio_or_zero(double numerator, double denominator) {
  return denominator == 0.0 ? 0.0 : numerator / denominator;
}

}  // namespace

AggMode parse_agg_mode(std::string_view name) { return find_enum_name<AggMode>(name, "loss_agg_mode"); }

std::string_view agg_mode_name(AggMode mode) { return enum_name(mode); }

LossAggregation LossAggregation::verl(AggMode mode, const VerlBatchInfo& info) {
  RF_CHECK(info.dp_size >= 1, "dp_size: expected >= 1, got {}", info.dp_size);
  return LossAggregation(mode, Form::verl, info);
}

LossAggregation LossAggregation::global(AggMode mode, const engine::LossContext& context,
                                        std::optional<double> loss_scale_factor) {
  return LossAggregation(
      mode, Form::global,
      VerlBatchInfo{1, double(context.global_num_tokens), double(context.global_num_seqs), loss_scale_factor});
}

LossAggregation LossAggregation::with_mode(AggMode mode) const { return LossAggregation(mode, form_, counts_); }

double LossAggregation::aggregate(const Matrix& loss, const Matrix& mask, Matrix* weights) const {
  check_same_shape(loss, "loss_BT", mask, "mask_BT");
  const std::vector<double> length_B = masked_row_sums(mask, mask);
  double local_tokens = 0, local_seqs = 0;
  for (double n : length_B) {
    local_tokens += n;
    local_seqs += n > 0 ? 1.0 : 0.0;
  }
  const double num_tokens = counts_.batch_num_tokens.value_or(local_tokens);
  const double num_seqs = counts_.global_batch_size.value_or(local_seqs);
  const double dp = double(counts_.dp_size);
  const double norm_length = counts_.loss_scale_factor.value_or(double(mask.cols));
  const double sum_norm_divisor = form_ == Form::global ? norm_length * num_seqs : norm_length;

  Matrix w(loss.rows, loss.cols, DType::f64);
  double result = 0;
  for (int64_t b = 0; b < loss.rows; ++b) {
    double row_weight = 0;
    switch (mode_) {
      case AggMode::token_mean:
        row_weight = ratio_or_zero(dp, num_tokens);
        break;
      case AggMode::seq_mean_token_sum:
        row_weight = ratio_or_zero(dp, num_seqs);
        break;
      case AggMode::seq_mean_token_mean:
        row_weight = ratio_or_zero(dp, num_seqs * masked_count_divisor(length_B[size_t(b)], loss.dtype));
        break;
      case AggMode::seq_mean_token_sum_norm:
        row_weight = ratio_or_zero(1.0, sum_norm_divisor);
        break;
    }
    for (int64_t t = 0; t < loss.cols; ++t) {
      if (mask(b, t) == 0.0) continue;
      w(b, t) = row_weight;
      result += row_weight * loss(b, t);
    }
  }
  if (weights != nullptr) *weights = std::move(w);
  return result;
}

double LossAggregation::aggregate(TensorView loss_BT, TensorView mask_BT, TensorView dloss_BT) const {
  const Matrix loss = read_matrix(loss_BT, "loss_BT");
  const Matrix mask = read_mask(mask_BT, "mask_BT");
  if (dloss_BT.empty()) return aggregate(loss, mask);
  Matrix weights;
  const double result = aggregate(loss, mask, &weights);
  write_matrix(weights, dloss_BT, "dloss_BT");
  return result;
}

double LossAggregation::sequence_mean(const std::vector<double>& loss_B, double* weight) const {
  double sum = 0;
  for (double loss : loss_B) sum += loss;
  const double num_seqs = form_ == Form::global ? *counts_.global_batch_size : double(loss_B.size());
  if (weight != nullptr) *weight = ratio_or_zero(1.0, num_seqs);
  return ratio_or_zero(sum, num_seqs);
}

double agg_loss(TensorView loss_BT, TensorView mask_BT, AggMode mode, const VerlBatchInfo& info) {
  return LossAggregation::verl(mode, info).aggregate(loss_BT, mask_BT);
}

}  // namespace rf::rl
