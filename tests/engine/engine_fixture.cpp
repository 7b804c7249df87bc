#include "engine_fixture.h"

namespace rf::engine_testing {

model::ModelConfig tiny_config(model::Arch arch, model::HeadKind head) {
  model::ModelConfig c;
  c.arch = arch;
  c.head = head;
  c.vocab_size = 20;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.attention_bias = arch == model::Arch::qwen2;
  c.qk_norm = arch == model::Arch::qwen3;
  c.initializer_range = 0.2;
  return c;
}

engine::EngineConfig f32_engine() {
  engine::EngineConfig c;
  c.dtype = "float32";
  return c;
}

optim::OptimConfig adam(double lr) {
  optim::OptimConfig c;
  c.lr = lr;
  c.lr_decay_steps = 100;
  return c;
}

engine::TensorMap micro_batch(const std::vector<std::vector<int64_t>>& docs) {
  const model::PackedSequences p = model::pack_sequences(docs);
  return engine::make_micro_batch(clone(p.tokens_N, DType::i64), clone(p.positions_N, DType::i64),
                                  clone(p.targets_N, DType::i64), p.cu_seqlens);
}

}  // namespace rf::engine_testing
