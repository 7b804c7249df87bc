#include "model/moe_dispatch.h"

#include <cstring>
#include <utility>

namespace rf::model {
namespace {

// The element counts of rows `width` wide, into `out` (its capacity reused).
const std::vector<int64_t>& elements(std::span<const int64_t> rows, int64_t width, std::vector<int64_t>& out) {
  out.assign(rows.begin(), rows.end());
  for (int64_t& n : out) n *= width;
  return out;
}

void check_rows(const TensorView& t, int64_t rows, int64_t width, const char* what) {
  RF_CHECK(t.rank() == 2 && t.is_contiguous() && t.size(0) >= rows && t.size(1) == width,
           "moe exchange {}: {} cannot hold {} rows of width {}", what, t.describe(), rows, width);
}

TensorView first_rows(TensorView t, int64_t rows) { return t.slice(0, 0, rows); }
TensorView flat(TensorView t, int64_t rows) { return t.slice(0, 0, rows).reshape({rows * t.size(1)}); }

void plan_expert_rows(dist::ProcessGroup& ep, TensorView tokens_per_expert_E, ExpertRowPlan& plan) {
  plan.ep_size = ep.size();
  plan.ep_rank = ep.rank();
  plan.num_experts = tokens_per_expert_E.numel();
  RF_CHECK(plan.num_experts % plan.ep_size == 0, "expert parallel: {} ranks do not divide the {} experts",
           plan.ep_size, plan.num_experts);
  const int64_t EP = plan.ep_size, E = plan.num_experts, E_loc = plan.local_experts();
  plan.counts.resize(size_t(EP * E));
  ep.all_gather(tokens_per_expert_E, TensorView(plan.counts.data(), DType::i64, Shape{EP * E}));
  plan.send_rows.assign(size_t(EP), 0);
  plan.recv_rows.assign(size_t(EP), 0);
  plan.local_sizes.assign(size_t(E_loc), 0);
  plan.rows = 0;
  ChunkOrder& chunks = plan.chunks;
  chunks.ranks = EP;
  chunks.experts = E_loc;
  chunks.rows.resize(size_t(EP * E_loc));
  for (int64_t q = 0; q < EP; ++q)
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = plan.counts[size_t(q * E + e)];
      if (q == plan.ep_rank) plan.send_rows[size_t(e / E_loc)] += n;
      if (e / E_loc == plan.ep_rank) {
        plan.recv_rows[size_t(q)] += n;
        plan.local_sizes[size_t(e % E_loc)] += n;
        plan.rows += n;
        chunks.rows[size_t(q * E_loc + e % E_loc)] = n;
      }
    }
  chunks.place();
}

void plan_expert_tp_rows(dist::ProcessGroup& etp, std::span<const int64_t> local_sizes, ExpertTpPlan& plan) {
  const int64_t T = etp.size(), E_loc = int64_t(local_sizes.size());
  ChunkOrder& chunks = plan.chunks;
  chunks.ranks = T;
  chunks.experts = E_loc;
  chunks.rows.resize(size_t(T * E_loc));
  etp.all_gather(TensorView(const_cast<int64_t*>(local_sizes.data()), DType::i64, Shape{E_loc}),
                 TensorView(chunks.rows.data(), DType::i64, Shape{T * E_loc}));
  plan.local_sizes.assign(size_t(E_loc), 0);
  plan.rank_rows.assign(size_t(T), 0);
  plan.rows = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E_loc; ++e) {
      const int64_t n = chunks.rows[size_t(t * E_loc + e)];
      plan.local_sizes[size_t(e)] += n;
      plan.rank_rows[size_t(t)] += n;
      plan.rows += n;
    }
  chunks.place();
}

}  // namespace

void ChunkOrder::place() {
  rank_major_starts.resize(size_t(ranks * experts));
  expert_major_starts.resize(size_t(ranks * experts));
  int64_t at = 0;
  for (int64_t p = 0; p < ranks; ++p)
    for (int64_t e = 0; e < experts; ++e)
      rank_major_starts[size_t(p * experts + e)] = std::exchange(at, at + rows[size_t(p * experts + e)]);
  at = 0;
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t p = 0; p < ranks; ++p)
      expert_major_starts[size_t(p * experts + e)] = std::exchange(at, at + rows[size_t(p * experts + e)]);
}

void ChunkOrder::reorder(TensorView from, TensorView to, bool from_rank_major) const {
  const size_t row_bytes = size_t(from.size(1)) * from.element_size();
  const auto* src = static_cast<const char*>(from.raw());
  auto* dst = static_cast<char*>(to.raw());
  for (size_t c = 0; c < rows.size(); ++c) {
    const int64_t rank_row = rank_major_starts[c], expert_row = expert_major_starts[c];
    std::memcpy(dst + size_t(from_rank_major ? expert_row : rank_row) * row_bytes,
                src + size_t(from_rank_major ? rank_row : expert_row) * row_bytes, size_t(rows[c]) * row_bytes);
  }
}

ExpertExchange::ExpertExchange(dist::ProcessGroup* ep, dist::ProcessGroup* etp, bool etp_gathers,
                               ExpertRowPlan& ep_plan, ExpertTpPlan& etp_plan)
    : ep_(ep), etp_(etp), etp_gathers_(etp != nullptr && etp_gathers), ep_plan_(ep_plan), etp_plan_(etp_plan) {}

void ExpertExchange::plan(TensorView tokens_per_expert_E) {
  std::span<const int64_t> local_sizes(tokens_per_expert_E.data<int64_t>(), size_t(tokens_per_expert_E.numel()));
  if (ep_) {
    plan_expert_rows(*ep_, tokens_per_expert_E, ep_plan_);
    local_sizes = ep_plan_.local_sizes;
  } else {
    ep_plan_.rows = 0;
    for (int64_t n : local_sizes) ep_plan_.rows += n;
    ep_plan_.local_sizes.assign(local_sizes.begin(), local_sizes.end());
  }
  if (etp_gathers_) plan_expert_tp_rows(*etp_, local_sizes, etp_plan_);
}

int64_t ExpertExchange::exchanged_rows() const { return ep_plan_.rows; }
int64_t ExpertExchange::expert_rows() const { return etp_gathers_ ? etp_plan_.rows : ep_plan_.rows; }
std::span<const int64_t> ExpertExchange::expert_sizes() const {
  return etp_gathers_ ? etp_plan_.local_sizes : ep_plan_.local_sizes;
}

int64_t ExpertExchange::local_rows() const {
  int64_t J = 0;
  for (int64_t n : ep_plan_.send_rows) J += n;
  return J;
}

dist::CommHandle ExpertExchange::start_to_experts(TensorView local_JW, TensorView staging) {
  RF_CHECK(moves_rows(), "moe exchange: no group moves the rows");
  const int64_t W = local_JW.size(1), R = exchanged_rows();
  check_rows(staging, expert_rows(), W, "staging");
  if (!ep_) return {};
  const int64_t J = local_rows();
  check_rows(local_JW, J, W, "local rows");
  return ep_->iall_to_all_v(flat(local_JW, J), elements(ep_plan_.send_rows, W, ep_plan_.send_elements),
                            flat(staging, R), elements(ep_plan_.recv_rows, W, ep_plan_.recv_elements));
}

void ExpertExchange::finish_to_experts(dist::CommHandle& pending, TensorView local_JW, TensorView middle_RW,
                                       TensorView staging, TensorView expert_RW) {
  pending.wait();
  const int64_t W = local_JW.size(1), R = exchanged_rows();
  check_rows(expert_RW, expert_rows(), W, "expert rows");
  TensorView exchanged = local_JW;  // this rank's rows for its experts, after the EP exchange
  if (ep_) {
    exchanged = etp_gathers_ ? middle_RW : expert_RW;
    check_rows(exchanged, R, W, "exchanged rows");
    ep_plan_.chunks.reorder(staging, exchanged, true);
  }
  if (!etp_gathers_) return;
  etp_->all_gather_v(flat(exchanged, R), flat(staging, etp_plan_.rows),
                     elements(etp_plan_.rank_rows, W, etp_plan_.rank_elements));
  etp_plan_.chunks.reorder(staging, expert_RW, true);
}

void ExpertExchange::to_experts(TensorView local_JW, TensorView middle_RW, TensorView staging, TensorView expert_RW) {
  dist::CommHandle pending = start_to_experts(local_JW, staging);
  finish_to_experts(pending, local_JW, middle_RW, staging, expert_RW);
}

dist::CommHandle ExpertExchange::start_from_experts(TensorView expert_RW, TensorView middle_RW, TensorView staging,
                                                    TensorView local_JW) {
  const int64_t W = expert_RW.size(1), R = exchanged_rows();
  // Each ETP rank's FFN shard gave partial sums for every row it ran: summed over the shards (the process group has
  // no uneven reduce-scatter: all-reduced, the same sums for twice the bytes), then this rank's own rows taken.
  if (etp_) etp_->all_reduce(first_rows(expert_RW, expert_rows()), dist::ReduceOp::sum);
  returned_ = first_rows(expert_RW, R);
  if (!moves_rows()) return {};
  TensorView exchanged = expert_RW;
  if (etp_gathers_) {  // this rank's own rows, into the EP combine's input (or, without EP, the local rows)
    exchanged = ep_ ? middle_RW : local_JW;
    check_rows(exchanged, R, W, "exchanged rows");
    const ChunkOrder& chunks = etp_plan_.chunks;
    const size_t row_bytes = size_t(W) * expert_RW.element_size();
    const int64_t t = etp_->rank();
    for (int64_t e = 0, at = 0; e < chunks.experts; ++e) {
      const size_t c = size_t(t * chunks.experts + e);
      std::memcpy(static_cast<char*>(exchanged.raw()) + size_t(at) * row_bytes,
                  static_cast<const char*>(expert_RW.raw()) + size_t(chunks.expert_major_starts[c]) * row_bytes,
                  size_t(chunks.rows[c]) * row_bytes);
      at += chunks.rows[c];
    }
    returned_ = first_rows(exchanged, R);
  }
  if (!ep_) return {};
  const int64_t J = local_rows();
  check_rows(local_JW, J, W, "local rows");
  ep_plan_.chunks.reorder(exchanged, staging, false);
  returned_ = first_rows(local_JW, J);
  return ep_->iall_to_all_v(flat(staging, R), elements(ep_plan_.recv_rows, W, ep_plan_.recv_elements),
                            flat(local_JW, J), elements(ep_plan_.send_rows, W, ep_plan_.send_elements));
}

TensorView ExpertExchange::finish_from_experts(dist::CommHandle& pending) {
  pending.wait();
  return returned_;
}

TensorView ExpertExchange::from_experts(TensorView expert_RW, TensorView middle_RW, TensorView staging,
                                        TensorView local_JW) {
  dist::CommHandle pending = start_from_experts(expert_RW, middle_RW, staging, local_JW);
  return finish_from_experts(pending);
}

void plan_token_gather(dist::ProcessGroup& group, int64_t tokens, TokenGatherPlan& plan) {
  plan.tokens.resize(size_t(group.size()));
  int64_t mine = tokens;
  group.all_gather(TensorView(&mine, DType::i64, Shape{1}),
                   TensorView(plan.tokens.data(), DType::i64, Shape{int64_t(plan.tokens.size())}));
  plan.total = plan.first = 0;
  for (int r = 0; r < group.size(); ++r) {
    if (r == group.rank()) plan.first = plan.total;
    plan.total += plan.tokens[size_t(r)];
  }
}

void gather_tokens(dist::ProcessGroup& group, TokenGatherPlan& plan, TensorView local_NW, TensorView all_TW) {
  const int64_t N = plan.tokens[size_t(group.rank())], W = local_NW.size(1);
  check_rows(local_NW, N, W, "local tokens");
  check_rows(all_TW, plan.total, W, "gathered tokens");
  group.all_gather_v(flat(local_NW, N), flat(all_TW, plan.total), elements(plan.tokens, W, plan.elements));
}

void sum_tokens_to_owners(dist::ProcessGroup& group, const TokenGatherPlan& plan, TensorView all_TW,
                          TensorView local_NW) {
  const int64_t N = plan.tokens[size_t(group.rank())], W = all_TW.size(1);
  check_rows(all_TW, plan.total, W, "gathered tokens");
  check_rows(local_NW, N, W, "local tokens");
  group.all_reduce(first_rows(all_TW, plan.total), dist::ReduceOp::sum);
  std::memcpy(local_NW.raw(), static_cast<const char*>(all_TW.raw()) + size_t(plan.first * W) * all_TW.element_size(),
              size_t(N * W) * all_TW.element_size());
}

}  // namespace rf::model
