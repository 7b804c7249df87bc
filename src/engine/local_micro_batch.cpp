#include "engine/local_micro_batch.h"

#include <numeric>

#include "core/error.h"
#include "engine/sequence_padding.h"

namespace rf::engine {
namespace {

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

TensorView first_tokens(TensorView t_N, int64_t N) { return t_N.empty() ? t_N : t_N.slice(0, 0, N); }

// `buffer` as a [size] tensor of `dtype`, kept when it already is one (micro-batches of one size reuse it).
TensorView sized(Tensor& buffer, int64_t size, DType dtype) {
  if (buffer.empty() || buffer.numel() != size || buffer.dtype() != dtype) buffer = Tensor({size}, dtype);
  return buffer;
}

}  // namespace

int64_t context_parallel_length(int64_t length, int64_t cp_size) {
  return cp_size <= 1 ? length : round_up(length, 2 * cp_size);
}

int64_t local_token_capacity(int64_t max_tokens, const dist::ParallelContext& parallel) {
  const int64_t tp = parallel.sequence_parallel() ? parallel.tp().size() : 1, cp = parallel.cp().size();
  if (cp == 1) return round_up(max_tokens, tp);
  // A rank's share of padded documents is even (two chunks each); sequence parallel's padding document then
  // brings it to the next multiple of both 2 and TP.
  return round_up((max_tokens + cp - 1) / cp, std::lcm(int64_t(2), tp));
}

LocalMicroBatch::LocalMicroBatch(const TensorMap& mb, double temperature, const dist::ParallelContext& parallel,
                                 int64_t capacity)
    : parallel_(parallel), num_tokens_(mb.num_tokens()) {
  inputs_.batch = 1;
  inputs_.seq_len = num_tokens_;
  inputs_.tokens_N = mb.get("input_ids");
  inputs_.positions_N = mb.get("position_ids");
  inputs_.targets_N = mb.get("labels");
  inputs_.cu_seqlens = mb.cu_seqlens();
  inputs_.temperature = temperature;
  // MoE router replay and recording (tensor_map.h): rows of the real tokens; the model checks them (no CP or
  // pipeline chunk) and fills sequence parallel's padding rows.
  if (mb.contains("replay_experts")) inputs_.replay_experts_NLk = mb.get("replay_experts");
  if (mb.contains("record_experts")) inputs_.record_experts_NLk = mb.get("record_experts");
  const int cp = parallel.cp().size();
  const int64_t tp = parallel.sequence_parallel() ? parallel.tp().size() : 1;
  if (cp > 1) {
    split_.emplace(mb.cu_seqlens(), num_tokens_, cp, parallel.cp().rank(), tp);
    const int64_t n = split_->local_tokens();
    if (n > capacity)
      throw Error(fmt::format(
          "a micro-batch of {} tokens in {} documents needs {} tokens on each of the {} context-parallel ranks once "
          "each document is padded to a multiple of 2 x context_parallel_size = {}; the engine reserved {} (its "
          "micro-batch token budget over context_parallel_size): raise the budget (e.g. ppo_max_token_len_per_gpu, "
          "data.max_tokens_per_micro_batch) or make the micro-batches smaller",
          num_tokens_, split_->num_documents(), n, cp, 2 * cp, capacity));
    tokens_n_ = Tensor({n}, DType::i64);
    positions_n_ = Tensor({n}, DType::i64);
    targets_n_ = Tensor({n}, DType::i64);
    split_->take_local(inputs_.tokens_N, tokens_n_, 0.0);
    split_->take_local_positions(inputs_.positions_N, positions_n_);
    split_->take_local(inputs_.targets_N, targets_n_, -100.0);
    inputs_.seq_len = n;
    inputs_.tokens_N = tokens_n_;
    inputs_.positions_N = positions_n_;
    inputs_.targets_N = targets_n_;
    inputs_.cu_seqlens = split_->local_cu_seqlens();
    inputs_.context = &*split_;
    return;
  }
  if (num_tokens_ % tp != 0) {
    const model::ModelInputs real = inputs_;
    padded_ = pad_to_multiple(inputs_, tp);
    inputs_ = padded_->inputs(temperature);
    inputs_.replay_experts_NLk = real.replay_experts_NLk;
    inputs_.record_experts_NLk = real.record_experts_NLk;
  }

  RF_CHECK(inputs_.seq_len <= capacity, "a micro-batch of {} tokens (padded for sequence parallel: {}); the engine "
           "reserved {}", num_tokens_, inputs_.seq_len, capacity);
}

int64_t LocalMicroBatch::real_tokens() const {
  if (!split_) return num_tokens_;
  int64_t real = 0;
  for (int64_t t = 0; t < split_->local_tokens(); ++t) real += split_->source_token(split_->cp_rank(), t) >= 0;
  return real;
}

model::ModelOutputs LocalMicroBatch::outputs(const model::ModelOutputs& run) {
  model::ModelOutputs out = run;
  if (!split_) {
    out.logp_N = first_tokens(run.logp_N, num_tokens_);
    out.entropy_N = first_tokens(run.entropy_N, num_tokens_);
    out.logits_NV = first_tokens(run.logits_NV, num_tokens_);
    out.values_N = first_tokens(run.values_N, num_tokens_);
    return out;
  }
  out.logits_NV = TensorView();  // a CP rank has its own tokens' logits only: nothing reads them in training
  auto gather = [&](TensorView local_n, Tensor& whole) -> TensorView {
    if (local_n.empty()) return local_n;
    const TensorView all = sized(gathered_, split_->padded_tokens(), local_n.dtype());
    parallel_.cp().all_gather(local_n, all);
    const TensorView whole_N = sized(whole, num_tokens_, local_n.dtype());
    split_->put_gathered(all, whole_N);
    return whole_N;
  };
  out.logp_N = gather(run.logp_N, logp_N_);
  out.entropy_N = gather(run.entropy_N, entropy_N_);
  out.values_N = gather(run.values_N, values_N_);
  return out;
}

model::OutputGrads LocalMicroBatch::loss_grads(const model::OutputGrads& run_grads) {
  for (TensorView grad : {run_grads.dlogp_N, run_grads.dentropy_N, run_grads.dvalues_N})
    if (!grad.empty()) fill_zero(grad);
  if (!split_)
    return {first_tokens(run_grads.dlogp_N, num_tokens_), first_tokens(run_grads.dentropy_N, num_tokens_),
            first_tokens(run_grads.dvalues_N, num_tokens_)};
  auto whole = [&](TensorView local_n, Tensor& buffer) -> TensorView {
    if (local_n.empty()) return local_n;
    const TensorView whole_N = sized(buffer, num_tokens_, local_n.dtype());
    fill_zero(whole_N);
    return whole_N;
  };
  return {whole(run_grads.dlogp_N, dlogp_N_), whole(run_grads.dentropy_N, dentropy_N_),
          whole(run_grads.dvalues_N, dvalues_N_)};
}

void LocalMicroBatch::local_grads(const model::OutputGrads& loss_grads, const model::OutputGrads& run_grads) const {
  if (!split_) return;  // the loss wrote into the run's buffers
  const std::pair<TensorView, TensorView> pairs[] = {{loss_grads.dlogp_N, run_grads.dlogp_N},
                                                     {loss_grads.dentropy_N, run_grads.dentropy_N},
                                                     {loss_grads.dvalues_N, run_grads.dvalues_N}};
  for (const auto& [whole_N, local_n] : pairs)
    if (!whole_N.empty()) split_->take_local(whole_N, local_n.slice(0, 0, split_->local_tokens()), 0.0);
}

}  // namespace rf::engine
