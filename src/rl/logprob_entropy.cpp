#include "rl/logprob_entropy.h"

#include <algorithm>
#include <cmath>

#include "rl/matrix.h"

namespace rf::rl {
namespace {

struct Logits {
  int64_t B = 0, T = 0, V = 0;
  DType dtype = DType::f32;
  std::vector<double> z_BTV;

  const double* row(int64_t b, int64_t t) const { return z_BTV.data() + (b * T + t) * V; }
};

Logits read_logits(TensorView logits_BTV) {
  RF_CHECK(!logits_BTV.empty() && is_floating(logits_BTV.dtype()), "logits_BTV: expected a floating tensor, got {}",
           logits_BTV.empty() ? std::string("none") : logits_BTV.describe());
  Logits logits{0, 0, 0, logits_BTV.dtype(), read_elements(logits_BTV, 3, "logits_BTV")};
  logits.B = logits_BTV.size(0);
  logits.T = logits_BTV.size(1);
  logits.V = logits_BTV.size(2);
  RF_CHECK(logits.V > 0, "logits_BTV: expected a non-empty vocab dimension, got {}", logits_BTV.describe());
  return logits;
}

double logsumexp(const double* z, int64_t V) {
  const double max = *std::max_element(z, z + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - max);
  return max + std::log(sum);
}

Matrix entropy_of(const Logits& logits) {
  Matrix entropy(logits.B, logits.T, logits.dtype);
  for (int64_t b = 0; b < logits.B; ++b) {
    for (int64_t t = 0; t < logits.T; ++t) {
      const double* z = logits.row(b, t);
      const double lse = logsumexp(z, logits.V);
      double expected_logit = 0;
      for (int64_t v = 0; v < logits.V; ++v) expected_logit += std::exp(z[v] - lse) * z[v];
      entropy(b, t) = lse - expected_logit;
    }
  }
  return entropy;
}

}  // namespace

void entropy_from_logits(TensorView logits_BTV, TensorView entropy_BT) {
  write_matrix(entropy_of(read_logits(logits_BTV)), entropy_BT, "entropy_BT");
}

void logprobs_from_logits(TensorView logits_BTV, TensorView labels_BT, TensorView logprobs_BT) {
  const Logits logits = read_logits(logits_BTV);
  RF_CHECK(!labels_BT.empty() && !is_floating(labels_BT.dtype()), "labels_BT: expected integer token ids, got {}",
           labels_BT.empty() ? std::string("none") : labels_BT.describe());
  const std::vector<double> labels = read_elements(labels_BT, 2, "labels_BT");
  RF_CHECK(labels_BT.size(0) == logits.B && labels_BT.size(1) == logits.T, "labels_BT: expected ({}, {}), got {}",
           logits.B, logits.T, labels_BT.describe());
  Matrix logprobs(logits.B, logits.T, logits.dtype);
  for (int64_t b = 0; b < logits.B; ++b) {
    for (int64_t t = 0; t < logits.T; ++t) {
      const double label = labels[size_t(b * logits.T + t)];
      RF_CHECK(label >= 0 && label < double(logits.V), "labels_BT[{}, {}]: expected a token id in [0, {}), got {}", b,
               t, logits.V, label);
      const double* z = logits.row(b, t);
      logprobs(b, t) = z[int64_t(label)] - logsumexp(z, logits.V);
    }
  }
  write_matrix(logprobs, logprobs_BT, "logprobs_BT");
}

double compute_entropy_loss(TensorView logits_BTV, TensorView response_mask_BT, const LossAggregation& aggregation) {
  const Matrix entropy = entropy_of(read_logits(logits_BTV));
  const Matrix mask = read_mask(response_mask_BT, "response_mask_BT");
  return aggregation.aggregate(entropy, mask);
}

}  // namespace rf::rl
