// The pipeline layer split (model/pipeline_split.h) against Megatron §3.1's worked examples and closed-form
// offsets, MindSpeed's noop layers and HF numbering, the layout-string grammar, every refusal with its key,
// and a sweep over (L, P, V, options) checking the invariants and the acceptance rule of each mode.
#include "model/pipeline_split.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "config/bind.h"
#include "core/error.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> out(end - begin);
  std::iota(out.begin(), out.end(), begin);
  return out;
}

using testing::expect_config_error;

void expect_split_refused(const PipelineSplitConfig& config, int64_t num_hidden_layers, int64_t pp_size,
                          const std::string& key, const std::string& fragment, int64_t num_mtp_layers = 0) {
  expect_config_error([&] { make_pipeline_split(config, num_hidden_layers, pp_size, num_mtp_layers); }, key, fragment);
}

// Each chunk's layers in forward order: "0-5 6-14 15 ..." ("-" for an empty chunk).
std::string placement(const PipelineSplit& split) {
  std::vector<std::string> chunks;
  for (const PipelineChunk& c : split.chunks) {
    if (c.num_layers <= 1) {
      chunks.push_back(c.num_layers == 0 ? "-" : fmt::format("{}", c.first_layer));
    } else {
      chunks.push_back(fmt::format("{}-{}", c.first_layer, c.end_layer() - 1));
    }
  }
  return fmt::format("{}", fmt::join(chunks, " "));
}

PipelineSplitConfig with_layout(const std::string& layout) {
  PipelineSplitConfig c;
  c.pipeline_model_parallel_layout = layout;
  return c;
}

TEST(PipelineSplit, SpecExampleInterleaved) {
  PipelineSplitConfig c;
  c.virtual_pipeline_model_parallel_size = 2;
  const PipelineSplit s = make_pipeline_split(c, 16, 4);
  EXPECT_EQ(s.pp_size, 4);
  EXPECT_EQ(s.vp_size, 2);
  ASSERT_EQ(s.chunks.size(), 8u);
  EXPECT_EQ(s.chunk(0, 0).layers(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.chunk(0, 1).layers(), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(s.chunk(1, 0).layers(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.chunk(1, 1).layers(), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(s.chunk(2, 0).layers(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(s.chunk(3, 0).layers(), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(s.chunk(3, 1).layers(), (std::vector<int64_t>{14, 15}));
  EXPECT_EQ(s.chunk(2, 1).vstage, 6);
  for (const PipelineChunk& chunk : s.chunks) {
    EXPECT_EQ(chunk.pre_process, chunk.pp_rank == 0 && chunk.vp_stage == 0);
    EXPECT_EQ(chunk.post_process, chunk.pp_rank == 3 && chunk.vp_stage == 1);
  }
  EXPECT_EQ(s.chunk_of_layer(9).pp_rank, 0);
  EXPECT_EQ(s.chunk_of_layer(9).vp_stage, 1);
  EXPECT_EQ(s.chunk_of_layer(5).pp_rank, 2);
  EXPECT_EQ(s.describe(),
            "pipeline split: 16 layers on PP 4 x VP 2\n"
            "  pp 0: [E, 0-1] [8-9]\n"
            "  pp 1: [2-3] [10-11]\n"
            "  pp 2: [4-5] [12-13]\n"
            "  pp 3: [6-7] [14-15, L]");
}

TEST(PipelineSplit, EvenWithoutVirtualStages) {
  const PipelineSplit s = make_pipeline_split(PipelineSplitConfig{}, 8, 2);
  EXPECT_EQ(s.vp_size, 1);
  EXPECT_EQ(s.chunk(0, 0).layers(), range(0, 4));
  EXPECT_EQ(s.chunk(1, 0).layers(), range(4, 8));
  EXPECT_TRUE(s.chunk(0, 0).pre_process);
  EXPECT_TRUE(s.chunk(1, 0).post_process);
  // One stage: one chunk holding everything, embedding and loss.
  const PipelineSplit one = make_pipeline_split(PipelineSplitConfig{}, 3, 1);
  ASSERT_EQ(one.chunks.size(), 1u);
  EXPECT_EQ(one.chunks[0].layers(), range(0, 3));
  EXPECT_TRUE(one.chunks[0].pre_process && one.chunks[0].post_process);
}

TEST(PipelineSplit, AccountForEmbeddingTakesTheFirstChunksSlot) {
  PipelineSplitConfig c;
  c.account_for_embedding_in_pipeline_split = true;
  EXPECT_EQ(placement(make_pipeline_split(c, 15, 4)), "0-2 3-6 7-10 11-14");  // n = 16: stage 0 builds 3
  // With VP 2: c = 2; chunk (0,0) builds 1, every other chunk starts at v*8 + p*2 - 1 (forward order).
  c.virtual_pipeline_model_parallel_size = 2;
  EXPECT_EQ(placement(make_pipeline_split(c, 15, 4)), "0 1-2 3-4 5-6 7-8 9-10 11-12 13-14");
  // One layer's worth per chunk: the embedding's chunk builds none.
  c.virtual_pipeline_model_parallel_size.reset();
  const PipelineSplit t = make_pipeline_split(c, 3, 4);
  EXPECT_EQ(placement(t), "- 0 1 2");
  EXPECT_EQ(t.describe(),
            "pipeline split: 3 layers on PP 4 x VP 1\n  pp 0: [E]\n  pp 1: [0]\n  pp 2: [1]\n  pp 3: [2, L]");
  EXPECT_EQ(t.chunk_of_layer(0).pp_rank, 1);
}

TEST(PipelineSplit, AccountForLossTakesTheLastChunksSlot) {
  PipelineSplitConfig c;
  c.account_for_embedding_in_pipeline_split = true;
  c.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(placement(make_pipeline_split(c, 14, 4)), "0-2 3-6 7-10 11-13");  // n = 16
  c.account_for_embedding_in_pipeline_split = false;
  c.virtual_pipeline_model_parallel_size = 2;
  EXPECT_EQ(placement(make_pipeline_split(c, 15, 2)), "0-3 4-7 8-11 12-14");  // n = 16, c = 4
}

TEST(PipelineSplit, UnevenFirstAndLastStages) {
  auto uneven = [](std::optional<int64_t> first, std::optional<int64_t> last, int64_t num_layers, int64_t pp) {
    PipelineSplitConfig c;
    c.num_layers_in_first_pipeline_stage = first;
    c.num_layers_in_last_pipeline_stage = last;
    return placement(make_pipeline_split(c, num_layers, pp));
  };
  EXPECT_EQ(uneven(6, 6, 30, 4), "0-5 6-14 15-23 24-29");             // middle: 18 over 2
  EXPECT_EQ(uneven(3, std::nullopt, 30, 4), "0-2 3-11 12-20 21-29");  // 27 over 3
  EXPECT_EQ(uneven(std::nullopt, 3, 30, 4), "0-8 9-17 18-26 27-29");
  EXPECT_EQ(uneven(5, 3, 8, 2), "0-4 5-7");  // PP 2 with both set: no middle stage, the two add up
}

TEST(PipelineSplit, UnevenStagesWithVirtualChunks) {
  PipelineSplitConfig c;
  c.num_layers_in_first_pipeline_stage = 4;
  c.num_layers_in_last_pipeline_stage = 4;
  c.virtual_pipeline_model_parallel_size = 2;
  // 28 layers: stages 4, 10, 10, 4; chunks 2, 5, 5, 2; 14 layers per virtual round. Chunk (2, 1) starts at
  // the spec's v*14 + 4/2 + 1*(20/2/2) = 21.
  const PipelineSplit s = make_pipeline_split(c, 28, 4);
  EXPECT_EQ(placement(s), "0-1 2-6 7-11 12-13 14-15 16-20 21-25 26-27");
  EXPECT_EQ(s.chunk(2, 1).first_layer, 21);
}

TEST(PipelineSplit, ParsesLayoutStrings) {
  using enum LayoutLayer;
  const std::vector<LayoutStage> deepseek = parse_pipeline_layout("Ettt|(tt|)*29,m|L");
  ASSERT_EQ(deepseek.size(), 32u);
  EXPECT_EQ(deepseek[0], (LayoutStage{embedding, decoder, decoder, decoder}));
  for (size_t s = 1; s < 30; ++s) EXPECT_EQ(deepseek[s], (LayoutStage{decoder, decoder})) << s;
  EXPECT_EQ(deepseek[30], (LayoutStage{mtp}));
  EXPECT_EQ(deepseek[31], (LayoutStage{loss}));
  EXPECT_EQ(parse_pipeline_layout("Et*3|(tt|)*29,m|L"), deepseek);  // Megatron's documented spelling
  EXPECT_EQ(parse_pipeline_layout("(t|)*2"), (std::vector<LayoutStage>{{decoder}, {decoder}, {}}));
  EXPECT_EQ(parse_pipeline_layout("((t)*2|)*2"),
            (std::vector<LayoutStage>{{decoder, decoder}, {decoder, decoder}, {}}));
  EXPECT_EQ(parse_pipeline_layout("E|*2L"), (std::vector<LayoutStage>{{embedding}, {}, {loss}}));
  EXPECT_EQ(parse_pipeline_layout("E,t,,t,L"), (std::vector<LayoutStage>{{embedding, decoder, decoder, loss}}));
  EXPECT_EQ(parse_pipeline_layout("t*12").front().size(), 12u);
}

TEST(PipelineSplit, LayoutPlacesLayersMtpAndLoss) {
  // DeepSeek-V3 on PP 16: 61 decoder layers + 1 MTP layer, VP 2.
  const PipelineSplit s = make_pipeline_split(with_layout("Ettt|(tt|)*29,m|L"), 61, 16, 1);
  EXPECT_EQ(s.vp_size, 2);
  EXPECT_EQ(s.chunk(0, 0).layers(), range(0, 3));
  EXPECT_TRUE(s.chunk(0, 0).pre_process);
  EXPECT_EQ(s.chunk(1, 0).layers(), range(3, 5));
  EXPECT_EQ(s.chunk(15, 0).layers(), range(31, 33));
  EXPECT_EQ(s.chunk(0, 1).layers(), range(33, 35));
  EXPECT_EQ(s.chunk(13, 1).layers(), range(59, 61));
  EXPECT_EQ(s.chunk(14, 1).num_layers, 0);
  EXPECT_EQ(s.chunk(14, 1).num_mtp_layers, 1);
  EXPECT_FALSE(s.chunk(14, 1).post_process);
  EXPECT_EQ(s.chunk(15, 1).num_layers, 0);
  EXPECT_EQ(s.chunk(15, 1).num_mtp_layers, 0);
  EXPECT_TRUE(s.chunk(15, 1).post_process);
  EXPECT_EQ(s.chunk(15, 1).first_layer, 61);
  // Without VP: the virtual size given explicitly must agree.
  PipelineSplitConfig c = with_layout("Etttt|ttttL");
  c.virtual_pipeline_model_parallel_size = 1;
  const PipelineSplit two = make_pipeline_split(c, 8, 2);
  EXPECT_EQ(two.vp_size, 1);
  EXPECT_EQ(two.chunk(1, 0).layers(), range(4, 8));
  // MTP layers in the last chunk together with the loss.
  const PipelineSplit mtp = make_pipeline_split(with_layout("Ett|ttmmL"), 4, 2, 2);
  EXPECT_EQ(mtp.chunk(1, 0).num_mtp_layers, 2);
  EXPECT_EQ(mtp.describe(),
            "pipeline split: 4 layers + 2 MTP on PP 2 x VP 1\n  pp 0: [E, 0-1]\n  pp 1: [2-3, mtp 0-1, L]");
  // A single stage is a valid layout too.
  EXPECT_EQ(make_pipeline_split(with_layout("EtttL"), 3, 1).chunks[0].layers(), range(0, 3));
}

TEST(PipelineSplit, NoopLayersPadTheStackAndSkipHfNumbering) {
  // MindSpeed: a 30-layer model on PP 4 with two identity layers at the end.
  PipelineSplitConfig c;
  c.noop_layers = {31, 30};
  const PipelineSplit s = make_pipeline_split(c, 30, 4);
  EXPECT_EQ(s.num_layers, 32);
  EXPECT_EQ(s.num_hidden_layers, 30);
  EXPECT_EQ(s.noop_layers, (std::vector<int64_t>{30, 31}));
  EXPECT_EQ(s.chunk(3, 0).layers(), range(24, 32));
  EXPECT_EQ(s.chunk(3, 0).noop_layers, (std::vector<int64_t>{30, 31}));
  EXPECT_EQ(s.chunk(3, 0).num_real_layers(), 6);
  EXPECT_TRUE(s.chunk(0, 0).noop_layers.empty());
  EXPECT_EQ(s.hf_layer(29), 29);
  EXPECT_EQ(s.hf_layer(30), std::nullopt);
  EXPECT_TRUE(s.is_noop(31));
  EXPECT_EQ(s.global_layer(29), 29);
  EXPECT_EQ(s.describe(),
            "pipeline split: 32 layers (30 + 2 noop) on PP 4 x VP 1\n"
            "  pp 0: [E, 0-7]\n  pp 1: [8-15]\n  pp 2: [16-23]\n  pp 3: [24-29, noop 30-31, L]");
  // Noop layers at both ends (the embedding's and the loss's stages get one real layer fewer).
  c.noop_layers = {0, 31};
  c.virtual_pipeline_model_parallel_size = 2;
  const PipelineSplit v = make_pipeline_split(c, 30, 4);
  EXPECT_EQ(v.chunk(0, 0).noop_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(v.chunk(3, 1).noop_layers, (std::vector<int64_t>{31}));
  EXPECT_EQ(v.hf_layer(0), std::nullopt);
  EXPECT_EQ(v.hf_layer(1), 0);
  EXPECT_EQ(v.hf_layer(30), 29);
  EXPECT_EQ(v.global_layer(0), 1);
  EXPECT_EQ(v.global_layer(29), 30);
  EXPECT_EQ(v.chunk_of_layer(v.global_layer(0)).pp_rank, 0);
  // A layout counts the noop layers among its t.
  PipelineSplitConfig laid = with_layout("Et*8|t*8|t*8|t*8L");
  laid.noop_layers = {30, 31};
  EXPECT_EQ(make_pipeline_split(laid, 30, 4).chunk(3, 0).noop_layers, (std::vector<int64_t>{30, 31}));
}

TEST(PipelineSplit, RefusesInvalidSizesNamingTheKey) {
  PipelineSplitConfig vp;
  vp.virtual_pipeline_model_parallel_size = 2;
  expect_split_refused(vp, 16, 1, "virtual_pipeline_model_parallel_size", "2 needs pipeline_model_parallel_size > 1");
  expect_split_refused(vp, 20, 4, "virtual_pipeline_model_parallel_size",
                       "2 does not divide the 5 layers of each pipeline stage");
  vp.virtual_pipeline_model_parallel_size = 4;
  expect_split_refused(vp, 24, 4, "virtual_pipeline_model_parallel_size", "4 does not divide the 6 layers");
  vp.virtual_pipeline_model_parallel_size = 0;
  expect_split_refused(vp, 16, 4, "virtual_pipeline_model_parallel_size", "must be >= 1");
  expect_split_refused(PipelineSplitConfig{}, 30, 4, "pipeline_model_parallel_size", "4 does not divide the 30 layers");
  expect_split_refused(PipelineSplitConfig{}, 30, 0, "pipeline_model_parallel_size", "must be >= 1");
  PipelineSplitConfig embedding;
  embedding.account_for_embedding_in_pipeline_split = true;
  expect_split_refused(embedding, 16, 4, "pipeline_model_parallel_size", "16 layers + 1 for the embedding");
  expect_split_refused(embedding, 15, 1, "account_for_embedding_in_pipeline_split",
                       "needs pipeline_model_parallel_size > 1");
  PipelineSplitConfig loss;
  loss.account_for_loss_in_pipeline_split = true;
  expect_split_refused(loss, 15, 1, "account_for_loss_in_pipeline_split", "needs pipeline_model_parallel_size > 1");
}

TEST(PipelineSplit, RefusesInvalidUnevenStagesNamingTheKey) {
  PipelineSplitConfig c;
  c.num_layers_in_first_pipeline_stage = 0;
  expect_split_refused(c, 30, 4, "num_layers_in_first_pipeline_stage", "must be >= 1");
  c.num_layers_in_first_pipeline_stage = 4;
  c.account_for_embedding_in_pipeline_split = true;
  expect_split_refused(c, 30, 4, "num_layers_in_first_pipeline_stage",
                       "cannot be combined with account_for_embedding_in_pipeline_split");
  c.account_for_embedding_in_pipeline_split = false;
  expect_split_refused(c, 30, 1, "num_layers_in_first_pipeline_stage", "needs pipeline_model_parallel_size > 1");
  c.num_layers_in_first_pipeline_stage = 5;
  expect_split_refused(c, 30, 4, "num_layers_in_first_pipeline_stage",
                       "the 25 layers left after 5 do not divide over the 3 other stages");
  c.num_layers_in_last_pipeline_stage = 30;
  expect_split_refused(c, 30, 4, "num_layers_in_first_pipeline_stage", "5 + 30 = 35 layers exceed the model's 30");
  c.num_layers_in_first_pipeline_stage = 6;
  c.num_layers_in_last_pipeline_stage = 6;
  expect_split_refused(c, 12, 3, "num_layers_in_first_pipeline_stage", "leave none for the 1 middle stages");
  expect_split_refused(c, 13, 2, "num_layers_in_first_pipeline_stage", "on the only two stages, the model has 13");
  PipelineSplitConfig last;
  last.num_layers_in_last_pipeline_stage = 3;
  last.account_for_loss_in_pipeline_split = true;
  expect_split_refused(last, 30, 4, "num_layers_in_last_pipeline_stage",
                       "cannot be combined with account_for_loss_in_pipeline_split");
  last.account_for_loss_in_pipeline_split = false;
  last.virtual_pipeline_model_parallel_size = 2;
  expect_split_refused(last, 33, 4, "num_layers_in_last_pipeline_stage",
                       "3 does not divide over virtual_pipeline_model_parallel_size = 2");
  PipelineSplitConfig vp;
  vp.num_layers_in_first_pipeline_stage = 2;
  vp.virtual_pipeline_model_parallel_size = 2;
  expect_split_refused(vp, 11, 4, "virtual_pipeline_model_parallel_size",
                       "2 does not divide the 3 layers of each middle pipeline stage");
}

TEST(PipelineSplit, RefusesBadNoopLayersNamingTheKey) {
  PipelineSplitConfig c;
  c.noop_layers = {40};
  expect_split_refused(c, 31, 4, "noop_layers", "index 40 out of range [0, 32)");
  c.noop_layers = {3, -1};
  expect_split_refused(c, 31, 4, "noop_layers", "index -1 is negative");
  c.noop_layers = {30, 31, 30};
  expect_split_refused(c, 30, 4, "noop_layers", "index 30 appears twice");
}

TEST(PipelineSplit, RefusesLayoutsThatDoNotParseAtTheirColumn) {
  const std::string key = "pipeline_model_parallel_layout";
  auto refused = [&](const std::string& layout, const std::string& fragment) {
    expect_config_error([&] { parse_pipeline_layout(layout); }, key, fragment);
    expect_config_error([&] { with_layout(layout).validate(); }, key, fragment);
  };
  refused("Ettt|(tt|*29,m|L", "cannot parse at column 6: '(' is not closed");
  refused("EtXt|L", "cannot parse at column 3: unexpected 'X'");
  refused("Et |tL", "column 3: unexpected ' '");
  refused("E(tt)|L", "column 6: a group must be followed by *<count>");
  refused("Et*|L", "column 3: '*' must be followed by a count");
  refused("Et*0|L", "column 4: repeat count must be >= 1");
  refused("E()*2|L", "column 2: empty group '()'");
  refused("Et)|L", "column 3: ')' without a matching '('");
  refused("*2", "column 1: unexpected '*'");
  refused("E((t)*1024)*1025L", "expands to more than 1048576 items");
  refused("Et*99999999999L", "repeat count above 1048576");
  refused(std::string(40, '(') + "t" + std::string(40, ')'), "groups nest deeper than 32");
}

TEST(PipelineSplit, RefusesLayoutsThatDoNotFitTheModel) {
  const std::string key = "pipeline_model_parallel_layout";
  expect_split_refused(with_layout("Et|t|tL"), 3, 2, key,
                       "3 virtual stages do not divide over pipeline_model_parallel_size = 2");
  expect_split_refused(with_layout("Et|tL"), 2, 1, key, "2 virtual stages need pipeline_model_parallel_size > 1");
  PipelineSplitConfig conflict = with_layout("Et|t|t|tL");
  conflict.virtual_pipeline_model_parallel_size = 3;
  expect_split_refused(conflict, 4, 2, "virtual_pipeline_model_parallel_size",
                       "3 conflicts with pipeline_model_parallel_layout, which has 2 virtual stages per pipeline rank");
  expect_split_refused(with_layout("tE|tL"), 2, 2, key, "the embedding E must open the first virtual stage");
  expect_split_refused(with_layout("EEt|tL"), 2, 2, key, "has 2 embeddings E");
  expect_split_refused(with_layout("Et|t"), 2, 2, key, "has 0 losses L");
  expect_split_refused(with_layout("EtL|t"), 2, 2, key, "the loss L must close the last virtual stage");
  expect_split_refused(with_layout("Ett|tL"), 4, 2, key, "has 3 decoder layers t, the model has 4 (4 + 0 noop layers)");
  expect_split_refused(with_layout("Et|tmL"), 2, 2, key, "has 1 MTP layers m, the model has 0");
  expect_split_refused(with_layout("Etm|tL"), 2, 2, key, "a decoder layer t in virtual stage 1 follows an MTP layer m",
                       1);
  expect_split_refused(with_layout("Etm|mL"), 1, 2, key, "MTP layers m in virtual stages 0 and 1", 2);
  expect_split_refused(with_layout("Ett|m||L"), 2, 2, key, "chunk 0 of pipeline rank 1: they must be in its last chunk",
                       1);
  PipelineSplitConfig mixed = with_layout("Et|tL");
  mixed.account_for_loss_in_pipeline_split = true;
  expect_split_refused(mixed, 2, 2, key, "cannot be combined with account_for_loss_in_pipeline_split");
  mixed = with_layout("Et|tL");
  mixed.num_layers_in_last_pipeline_stage = 1;
  expect_split_refused(mixed, 2, 2, key, "cannot be combined with num_layers_in_last_pipeline_stage");
}

TEST(PipelineSplit, BindsFromYamlUnderItsParentsKey) {
  const auto c = config::bind<PipelineSplitConfig>(
      YAML::Load("{virtual_pipeline_model_parallel_size: null, noop_layers: [30, 31], "
                 "num_layers_in_first_pipeline_stage: 6, pipeline_model_parallel_layout: null}"),
      "megatron");
  EXPECT_FALSE(c.virtual_pipeline_model_parallel_size.has_value());
  EXPECT_EQ(c.noop_layers, (std::vector<int64_t>{30, 31}));
  EXPECT_EQ(c.num_layers_in_first_pipeline_stage, 6);
  expect_config_error([] { config::bind<PipelineSplitConfig>(YAML::Load("{noop_layers: [1, 1]}"), "megatron"); },
                      "megatron.noop_layers", "index 1 appears twice");
  expect_config_error(
      [] { config::bind<PipelineSplitConfig>(YAML::Load("{pipeline_model_parallel_layout: 'Et|(t|L'}"), "megatron"); },
      "megatron.pipeline_model_parallel_layout", "cannot parse at column 4");
  const std::string doc = config::document<PipelineSplitConfig>("megatron", "Pipeline split");
  for (const char* key : {"virtual_pipeline_model_parallel_size", "num_layers_in_first_pipeline_stage",
                          "num_layers_in_last_pipeline_stage", "account_for_embedding_in_pipeline_split",
                          "account_for_loss_in_pipeline_split", "pipeline_model_parallel_layout", "noop_layers"})
    EXPECT_NE(doc.find(fmt::format("| `{}` |", key)), std::string::npos) << key;
}

// ---- The sweep ----

struct Case {
  int64_t num_hidden_layers = 1, pp = 1, vp = 1;
  bool embedding = false, loss = false;
  std::optional<int64_t> first, last;
  std::vector<int64_t> noop;
};

PipelineSplitConfig config_of(const Case& k) {
  PipelineSplitConfig c;
  if (k.vp > 1) c.virtual_pipeline_model_parallel_size = k.vp;
  c.account_for_embedding_in_pipeline_split = k.embedding;
  c.account_for_loss_in_pipeline_split = k.loss;
  c.num_layers_in_first_pipeline_stage = k.first;
  c.num_layers_in_last_pipeline_stage = k.last;
  c.noop_layers = k.noop;
  return c;
}

// Megatron's acceptance rule and closed-form (offset, count) of chunk (p, v), written from §3.1 and
// get_transformer_layer_offset / get_num_layers_to_build, independently of the prefix sums the code uses.
struct Expected {
  bool ok = false;
  std::vector<std::pair<int64_t, int64_t>> offset_count;  // index v * P + p
};

Expected megatron_split(const Case& k) {
  const int64_t L = k.num_hidden_layers + static_cast<int64_t>(k.noop.size()), P = k.pp, V = k.vp;
  Expected e;
  if (P == 1 && (V > 1 || k.embedding || k.loss || k.first || k.last)) return e;
  if ((k.first || k.last) && (k.embedding || k.loss)) return e;
  e.offset_count.resize(P * V);
  if (k.first || k.last) {
    const int64_t F = k.first.value_or(0), Lst = k.last.value_or(0);
    const int64_t num_middle = P - (k.first ? 1 : 0) - (k.last ? 1 : 0);
    const int64_t middle_total = L - F - Lst;
    if (middle_total < 0 || (num_middle == 0) != (middle_total == 0)) return e;
    if (num_middle > 0 && middle_total % num_middle != 0) return e;
    const int64_t middle = num_middle > 0 ? middle_total / num_middle : 0;
    if (F % V != 0 || Lst % V != 0 || middle % V != 0) return e;
    for (int64_t v = 0; v < V; ++v)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t mid_rank = k.first ? p - 1 : p;
        const int64_t offset = p == 0 ? v * (F / V + middle_total / V + Lst / V)
                                      : v * (F / V + middle_total / V + Lst / V) + F / V +
                                            mid_rank * (num_middle > 0 ? middle_total / V / num_middle : 0);
        const int64_t count = (p == 0 && k.first) ? F / V : (p == P - 1 && k.last) ? Lst / V : middle / V;
        e.offset_count[v * P + p] = {offset, count};
      }
  } else {
    const int64_t n = L + (k.embedding ? 1 : 0) + (k.loss ? 1 : 0);
    if (n % P != 0 || (n / P) % V != 0) return e;
    const int64_t c = n / P / V;
    for (int64_t v = 0; v < V; ++v)
      for (int64_t p = 0; p < P; ++p) {
        const bool first_chunk = p == 0 && v == 0, last_chunk = p == P - 1 && v == V - 1;
        const int64_t offset = v * (n / V) + p * c - (k.embedding && !first_chunk ? 1 : 0);
        const int64_t count = c - (k.embedding && first_chunk ? 1 : 0) - (k.loss && last_chunk ? 1 : 0);
        e.offset_count[v * P + p] = {offset, count};
      }
  }
  e.ok = true;
  return e;
}

// The same split written as a layout string: E, each chunk's t's, L.
std::string as_layout(const PipelineSplit& s) {
  std::string out = "E";
  for (const PipelineChunk& chunk : s.chunks) {
    if (chunk.vstage > 0) out += "|";
    if (chunk.num_layers > 0) out += fmt::format("t*{}", chunk.num_layers);
  }
  return out + "L";
}

void check_invariants(const PipelineSplit& s, const Case& k, const Expected& expected) {
  const int64_t P = k.pp, V = k.vp;
  ASSERT_EQ(s.pp_size, P);
  ASSERT_EQ(s.vp_size, V);
  ASSERT_EQ(s.chunks.size(), static_cast<size_t>(P * V));
  std::vector<int64_t> concatenated, noops;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const PipelineChunk& chunk = s.chunks[i];
    EXPECT_EQ(chunk.vstage, static_cast<int64_t>(i));
    EXPECT_EQ(chunk.vp_stage * P + chunk.pp_rank, chunk.vstage);
    EXPECT_EQ(&s.chunk(chunk.pp_rank, chunk.vp_stage), &chunk);
    EXPECT_EQ(chunk.pre_process, chunk.pp_rank == 0 && chunk.vp_stage == 0);
    EXPECT_EQ(chunk.post_process, chunk.pp_rank == P - 1 && chunk.vp_stage == V - 1);
    EXPECT_GE(chunk.num_layers, 0);
    EXPECT_EQ(std::make_pair(chunk.first_layer, chunk.num_layers), expected.offset_count[i])
        << "pp " << chunk.pp_rank << " vp " << chunk.vp_stage;
    for (const int64_t l : chunk.layers()) {
      concatenated.push_back(l);
      EXPECT_EQ(&s.chunk_of_layer(l), &chunk) << l;
    }
    noops.insert(noops.end(), chunk.noop_layers.begin(), chunk.noop_layers.end());
  }
  // Forward order visits every global layer once, ascending.
  EXPECT_EQ(concatenated, range(0, s.num_layers));
  std::vector<int64_t> sorted_noop = k.noop;
  std::sort(sorted_noop.begin(), sorted_noop.end());
  EXPECT_EQ(noops, sorted_noop);
  // HF numbering: the real layers in order, 0..H-1, and back.
  int64_t next_hf = 0;
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::optional<int64_t> hf = s.hf_layer(l);
    EXPECT_EQ(hf.has_value(), !std::binary_search(sorted_noop.begin(), sorted_noop.end(), l));
    if (!hf) continue;
    EXPECT_EQ(*hf, next_hf++);
    EXPECT_EQ(s.global_layer(*hf), l);
  }
  EXPECT_EQ(next_hf, k.num_hidden_layers);
  // The layout string of the same placement gives the same split (its t's count the noop layers).
  PipelineSplitConfig noop_layout = with_layout(as_layout(s));
  noop_layout.noop_layers = k.noop;
  const PipelineSplit laid_noop = make_pipeline_split(noop_layout, k.num_hidden_layers, P);
  ASSERT_EQ(laid_noop.chunks.size(), s.chunks.size());
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    EXPECT_EQ(laid_noop.chunks[i].first_layer, s.chunks[i].first_layer);
    EXPECT_EQ(laid_noop.chunks[i].num_layers, s.chunks[i].num_layers);
    EXPECT_EQ(laid_noop.chunks[i].noop_layers, s.chunks[i].noop_layers);
  }
}

TEST(PipelineSplit, PropertySweepAgreesWithMegatronsClosedForms) {
  int64_t num_accepted = 0, num_refused = 0;
  int64_t accepted_by_mode[8][2] = {};  // [mode][interleaved]
  for (int64_t H = 1; H <= 26; ++H)
    for (int64_t P = 1; P <= 6; ++P)
      for (int64_t V = 1; V <= 3; ++V)
        for (int mode = 0; mode < 8; ++mode)
          for (int noop_kind = 0; noop_kind < 3; ++noop_kind) {
            Case k{.num_hidden_layers = H, .pp = P, .vp = V};
            k.embedding = mode == 1 || mode == 3;
            k.loss = mode == 2 || mode == 3;
            if (mode == 4 || mode == 6) k.first = 1 + H % 5;
            if (mode == 5 || mode == 6) k.last = 1 + (H * 7) % 4;
            if (mode == 7) k.first = V * (1 + H % 3);
            // Noop layers extend the H real ones: none, one at the end, one at each end.
            if (noop_kind == 1) k.noop = {H};
            if (noop_kind == 2) k.noop = {H + 1, 0};
            const Expected expected = megatron_split(k);
            SCOPED_TRACE(fmt::format("H={} P={} V={} mode={} noop={}", H, P, V, mode, noop_kind));
            try {
              const PipelineSplit s = make_pipeline_split(config_of(k), H, P);
              ASSERT_TRUE(expected.ok) << "accepted a split Megatron refuses";
              check_invariants(s, k, expected);
              ++num_accepted;
              ++accepted_by_mode[mode][V > 1 ? 1 : 0];
            } catch (const ConfigError& e) {
              EXPECT_FALSE(expected.ok) << e.what();
              ++num_refused;
            }
          }
  // The sweep must exercise both outcomes in earnest.
  EXPECT_GT(num_accepted, 1000);
  EXPECT_GT(num_refused, 1000);
  for (int mode = 0; mode < 8; ++mode)
    for (int interleaved = 0; interleaved < 2; ++interleaved)
      EXPECT_GT(accepted_by_mode[mode][interleaved], 0) << "mode " << mode << " interleaved " << interleaved;
}

}  // namespace
}  // namespace rf::model
