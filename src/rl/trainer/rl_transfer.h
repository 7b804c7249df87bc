// Moving a step's responses and results between the ranks of an RL run whose roles sit on different
// ranks (device_mapping; rl_roles.h). The controller is SPMD and every rank keeps the whole RlBatch, so
// each stage ends by bringing what its role computed to every rank of the world:
//   gather_responses   the rollout's replicas each generated a share of the prompts: every rank ends with
//                      all responses, in prompt order (one all-gather of byte counts, one all-gather-v);
//   gather_columns     per-token columns (old log-probs, entropy, ref log-probs, values) computed by a role's
//                      DP replicas, each a share of the responses, brought together on every rank
//                      (gather_scores: a reward model's scores);
//   broadcast_metrics  a stage's metrics from the rank that computed them (broadcast_scores: the rewards).
// The actor's weights travel by weight_sync.h.
// Bytes are CBOR documents of the response fields (exact for floats): bookkeeping, not activations.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_metrics.h"
#include "dist/process_group.h"

namespace rf::rl {

// `mine` holds this rank's contribution (empty if it has none); returns every rank's, in world-rank order
// of the contributors, then stably ordered by prompt (`group`).
RlBatch gather_responses(RlBatch mine, dist::ProcessGroup& world);

// A forward pass split over a role's DP replicas: each rank passes the responses whose `columns` it
// computed (`mine`; empty on a replica's other TP ranks and off the role), together each response once;
// every rank ends with every response's columns. One all-gather of sizes, two all-gather-v.
void gather_columns(RlBatch& batch, std::span<const int64_t> mine,
                    const std::vector<std::vector<float> RlResponse::*>& columns, dist::ProcessGroup& world);
// The same for scores (a reward model's, f32: sent as f32, exactly), reward extras cleared.
void gather_scores(RlBatch& batch, std::span<const int64_t> mine, dist::ProcessGroup& world);

void broadcast_metrics(Metrics& metrics, dist::ProcessGroup& world, int root);

// Every response's score and reward extras set on every rank to `root`'s, or, when `error` is set on the
// root (its scoring failed), that error thrown on every rank (so no rank waits for scores that never come).
void broadcast_scores(RlBatch& batch, const std::optional<std::string>& error, dist::ProcessGroup& world, int root);

}  // namespace rf::rl
