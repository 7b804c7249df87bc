// The SFT loss (an engine::LossFn): the negative log-likelihood of the loss tokens averaged over the step's
// loss tokens on every DP rank (LossContext::global_num_tokens), with its gradient dL/dlogp. `rlforge sft`
// trains with it and the train-step benchmarks time it.
#pragma once

#include "engine/train_engine.h"

namespace rf::trainer {

engine::LossOutput token_mean_nll(const engine::TensorMap& micro_batch, const model::ModelOutputs& outputs,
                                  const engine::LossContext& context, const model::OutputGrads& grads);

}  // namespace rf::trainer
