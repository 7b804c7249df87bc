#include "trainer/sft_loss.h"

namespace rf::trainer {

engine::LossOutput token_mean_nll(const engine::TensorMap& mb, const model::ModelOutputs& out,
                                  const engine::LossContext& ctx, const model::OutputGrads& grads) {
  const float* mask = mb.get("loss_mask").data<float>();
  const float* logp = out.logp_N.data<float>();
  float* dlogp = grads.dlogp_N.data<float>();
  const double scale = 1.0 / double(ctx.global_num_tokens);
  engine::LossOutput result;
  for (int64_t n = 0; n < grads.dlogp_N.numel(); ++n) {
    result.loss -= double(mask[n]) * double(logp[n]) * scale;
    dlogp[n] = float(-double(mask[n]) * scale);
  }
  return result;
}

}  // namespace rf::trainer
