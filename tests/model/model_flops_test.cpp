// The FLOP count of MFU against a hand count: a 2-layer decoder with hidden 8, 2 heads of 4 (1 kv head),
// ffn 16 and vocab 10; its value-head twin; documents of 3 and 5 tokens.
#include "model/model_flops.h"

#include <gtest/gtest.h>

namespace rf::model {
namespace {

ModelConfig small() {
  ModelConfig c;
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.intermediate_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  return c;
}

TEST(ModelFlops, CountsEveryWeightATokenMultiplies) {
  // Per layer: q 8x8, o 8x8, k 8x4, v 8x4, gate/up/down 3 x 8x16 = 64+64+32+32+384 = 576; head 10x8 = 80.
  EXPECT_EQ(matmul_parameters(small()), 2 * 576 + 80);
  ModelConfig value = small();
  value.head = HeadKind::value;  // one label
  EXPECT_EQ(matmul_parameters(value), 2 * 576 + 8);
  ModelConfig tied = small();
  tied.tie_word_embeddings = true;  // the tied head still multiplies
  EXPECT_EQ(matmul_parameters(tied), matmul_parameters(small()));
}

TEST(ModelFlops, ForwardIsWeightsPerTokenPlusCausalAttentionAndTrainingTriplesIt) {
  const int64_t lengths[] = {3, 5};
  // Weights: 2 FLOPs x 1232 x 8 tokens. Attention: 2 T^2 x layers 2 x heads 2 x head_dim 4 per document.
  const double expected = 2.0 * 1232 * 8 + 2.0 * (9 + 25) * 2 * 2 * 4;
  EXPECT_DOUBLE_EQ(forward_flops(small(), lengths), expected);
  EXPECT_DOUBLE_EQ(train_flops(small(), lengths), 3 * expected);
  EXPECT_DOUBLE_EQ(forward_flops(small(), {}), 0.0);
}

}  // namespace
}  // namespace rf::model
