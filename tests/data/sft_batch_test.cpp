// SFT packing: tokens, targets (loss on response and eos only), positions and cu_seqlens of packed
// micro-batches, checked by hand on small cases and against the model's own packing convention
// (model::make_causal_lm_targets); first-fit placement; too-long examples and bad limits as errors.
#include "data/sft_batch.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"
#include "data/builtin_tasks.h"
#include "data/char_tokenizer.h"
#include "model/model_inputs.h"

namespace rf::data {
namespace {

std::vector<int64_t> values(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

constexpr int64_t X = kIgnoreTarget;

// The character tokenizer's own framing: <bos> prompt response <eos>.
constexpr SftSpecialIds kCharIds{.bos = CharTokenizer::kBosId, .eos = CharTokenizer::kEosId};

TEST(SftBatchBuilder, OneExample) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const SftBatchBuilder builder(tok, kCharIds, {.max_length = 16, .max_tokens_per_micro_batch = 16});
  const std::vector<Example> examples = {{.prompt = "1+2=", .response = "3"}};
  const std::vector<SftMicroBatch> batches = builder.build(examples);
  ASSERT_EQ(batches.size(), 1u);
  const SftMicroBatch& b = batches[0];
  //                      <bos>  1   +   2   =   3  <eos>
  EXPECT_EQ(values(b.tokens_N), (std::vector<int64_t>{1, 4, 13, 5, 16, 6, 2}));
  EXPECT_EQ(values(b.targets_N), (std::vector<int64_t>{X, X, X, X, 6, 2, X}));
  EXPECT_EQ(values(b.positions_N), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 7}));
  EXPECT_EQ(b.num_sequences, 1);
  EXPECT_EQ(b.num_loss_tokens, 2);  // the response token and eos
  EXPECT_EQ(b.tokens_N.dtype(), DType::i64);
  EXPECT_EQ(b.targets_N.dtype(), DType::i64);
  EXPECT_EQ(b.positions_N.dtype(), DType::i64);
}

TEST(SftBatchBuilder, PacksFirstFitInOrder) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const SftBatchBuilder builder(tok, kCharIds, {.max_length = 12, .max_tokens_per_micro_batch = 16});
  // Lengths with bos and eos: 7, 10, 5, 9, 4.
  const std::vector<Example> examples = {{.prompt = "1+2=", .response = "3"},
                                         {.prompt = "10+20=", .response = "30"},
                                         {.prompt = "0=", .response = "0"},
                                         {.prompt = "9+9=", .response = "18 "},
                                         {.prompt = "", .response = "12"}};
  const std::vector<SftMicroBatch> batches = builder.build(examples);
  // 7 opens batch 0; 10 does not fit there (17) and opens batch 1; 5 joins batch 0 (12); 9 fits
  // neither (21, 19) and opens batch 2; 4 joins batch 0, filling it exactly (16).
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].cu_seqlens, (std::vector<int32_t>{0, 7, 12, 16}));
  EXPECT_EQ(batches[0].num_sequences, 3);
  //                                                    example 0              | example 2      | example 4
  EXPECT_EQ(values(batches[0].tokens_N), (std::vector<int64_t>{1, 4, 13, 5, 16, 6, 2, 1, 3, 16, 3, 2, 1, 4, 5, 2}));
  EXPECT_EQ(values(batches[0].targets_N), (std::vector<int64_t>{X, X, X, X, 6, 2, X, X, X, 3, 2, X, 4, 5, 2, X}));
  EXPECT_EQ(values(batches[0].positions_N), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 0, 1, 2, 3}));
  EXPECT_EQ(batches[0].num_loss_tokens, 2 + 2 + 3);  // example 4 has no prompt: bos predicts its first token

  EXPECT_EQ(batches[1].cu_seqlens, (std::vector<int32_t>{0, 10}));
  EXPECT_EQ(values(batches[1].tokens_N), (std::vector<int64_t>{1, 4, 3, 13, 5, 3, 16, 6, 3, 2}));
  EXPECT_EQ(values(batches[1].targets_N), (std::vector<int64_t>{X, X, X, X, X, X, 6, 3, 2, X}));
  EXPECT_EQ(batches[1].num_loss_tokens, 3);

  EXPECT_EQ(batches[2].cu_seqlens, (std::vector<int32_t>{0, 9}));
  EXPECT_EQ(values(batches[2].tokens_N), (std::vector<int64_t>{1, 12, 13, 12, 16, 4, 11, 17, 2}));
  EXPECT_EQ(values(batches[2].targets_N), (std::vector<int64_t>{X, X, X, X, 4, 11, 17, 2, X}));
  EXPECT_EQ(batches[2].num_loss_tokens, 4);

  EXPECT_TRUE(builder.build(std::span<const Example>()).empty());
}

// Over many task examples: every example lands in exactly one micro-batch, whole and in order, no
// micro-batch exceeds the limit or holds padding, and positions and targets follow the model's own
// packing convention (make_causal_lm_targets) with the prompt's targets masked.
TEST(SftBatchBuilder, AgreesWithTheModelsPackingConvention) {
  for (const std::string name : {"arith", "reversal"}) {
    const auto task = make_task(name, nullptr, 17);
    const CharTokenizer tok = CharTokenizer::for_task(name);
    const SftPackingConfig config{.max_length = 20, .max_tokens_per_micro_batch = 48};
    const SftBatchBuilder builder(tok, kCharIds, config);
    std::vector<Example> examples;
    for (uint64_t i = 0; i < 64; ++i) examples.push_back(task->example(Split::train, i));
    const std::vector<SftMicroBatch> batches = builder.build(examples);

    std::vector<std::vector<int64_t>> documents;  // in micro-batch order
    int64_t num_tokens = 0, num_loss_tokens = 0;
    for (const SftMicroBatch& b : batches) {
      const int64_t N = b.tokens_N.numel();
      EXPECT_LE(N, config.max_tokens_per_micro_batch);
      ASSERT_EQ(b.cu_seqlens.back(), N);
      EXPECT_EQ(int64_t(b.cu_seqlens.size()) - 1, b.num_sequences);
      Tensor positions_N(Shape{N}, DType::i64), targets_N(Shape{N}, DType::i64);
      model::make_causal_lm_targets(b.tokens_N, b.cu_seqlens, positions_N, targets_N);
      EXPECT_EQ(values(b.positions_N), values(positions_N)) << name;
      int64_t batch_loss_tokens = 0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t target = b.targets_N.data<int64_t>()[n];
        if (target != kIgnoreTarget) {
          EXPECT_EQ(target, targets_N.data<int64_t>()[n]) << name << " token " << n;
          ++batch_loss_tokens;
        }
      }
      EXPECT_EQ(b.num_loss_tokens, batch_loss_tokens);
      for (int64_t d = 0; d < b.num_sequences; ++d)
        documents.emplace_back(b.tokens_N.data<int64_t>() + b.cu_seqlens[size_t(d)],
                               b.tokens_N.data<int64_t>() + b.cu_seqlens[size_t(d) + 1]);
      num_tokens += N;
      num_loss_tokens += b.num_loss_tokens;
    }

    // Each example's tokens appear as one document; the loss covers its response and eos.
    int64_t expected_tokens = 0, expected_loss_tokens = 0;
    std::vector<std::vector<int64_t>> expected_documents;
    for (size_t i = 0; i < examples.size(); ++i) {
      const SftSequence s = builder.tokenize(examples[i], i);
      expected_documents.push_back(s.tokens);
      expected_tokens += int64_t(s.tokens.size());
      expected_loss_tokens += int64_t(examples[i].response.size()) + 1;
    }
    EXPECT_EQ(num_tokens, expected_tokens) << name;
    EXPECT_EQ(num_loss_tokens, expected_loss_tokens) << name;
    std::sort(documents.begin(), documents.end());
    std::sort(expected_documents.begin(), expected_documents.end());
    EXPECT_EQ(documents, expected_documents) << name;
    // First fit leaves little room: the micro-batches average over 3/4 full.
    EXPECT_GT(num_tokens, int64_t(batches.size()) * config.max_tokens_per_micro_batch * 3 / 4) << name;
  }
}

TEST(SftBatchBuilder, NoBosAndAnotherEos) {
  // As for Qwen: no bos; the eos is the model's stop id, here not the tokenizer's own <eos> (2).
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const SftPackingConfig config{.max_length = 8, .max_tokens_per_micro_batch = 8};
  const SftBatchBuilder builder(tok, {.bos = std::nullopt, .eos = 0}, config);
  const std::vector<Example> examples = {{.prompt = "1=", .response = "1"}};
  EXPECT_EQ(builder.prompt_tokens(examples[0]), (std::vector<int64_t>{4, 16}));
  const SftMicroBatch b = std::move(builder.build(examples)[0]);
  EXPECT_EQ(values(b.tokens_N), (std::vector<int64_t>{4, 16, 4, 0}));
  EXPECT_EQ(values(b.targets_N), (std::vector<int64_t>{X, 4, 0, X}));
  EXPECT_EQ(b.num_loss_tokens, 2);
  const SftBatchBuilder with_bos(tok, kCharIds, config);
  EXPECT_EQ(with_bos.prompt_tokens(examples[0]), (std::vector<int64_t>{1, 4, 16}));
}

TEST(SftBatchBuilder, TooLongExampleIsNamed) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const SftBatchBuilder builder(tok, kCharIds, {.max_length = 8, .max_tokens_per_micro_batch = 64});
  const std::vector<Example> examples = {{.prompt = "1+2=", .response = "3"},
                                         {.prompt = "123+456=", .response = "579"}};
  try {
    builder.build(examples);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("example 1 (prompt \"123+456=\")"), std::string::npos) << what;
    EXPECT_NE(what.find("13 tokens (9 prompt with bos, 3 response, eos) exceed data.max_length=8"), std::string::npos)
        << what;
  }
  // Exactly max_length fits.
  const std::vector<Example> fits = {{.prompt = "12+34=", .response = ""}};
  EXPECT_EQ(builder.build(fits)[0].tokens_N.numel(), 8);
}

TEST(SftBatchBuilder, RejectsBadLimitsAndSpecialIds) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const auto expect_config_error = [&](SftPackingConfig config, const std::string& key, const std::string& fragment) {
    try {
      const SftBatchBuilder builder(tok, kCharIds, config);
      ADD_FAILURE() << "no error for " << key;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), key);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_config_error({.max_length = 32, .max_tokens_per_micro_batch = 16}, "data.max_tokens_per_micro_batch",
                      "16 is below data.max_length=32");
  expect_config_error({.max_length = 1, .max_tokens_per_micro_batch = 16}, "data.max_length", "1 leaves no room");
  expect_config_error({.max_length = 8, .max_tokens_per_micro_batch = int64_t(1) << 32},
                      "data.max_tokens_per_micro_batch", "int32 cu_seqlens");
  EXPECT_THROW(SftBatchBuilder(tok, {.bos = 1, .eos = -1}, {.max_length = 8, .max_tokens_per_micro_batch = 8}), Error);
  EXPECT_THROW(SftBatchBuilder(tok, {.bos = -1, .eos = 2}, {.max_length = 8, .max_tokens_per_micro_batch = 8}), Error);
}

}  // namespace
}  // namespace rf::data
