// engine/hf_checkpoint.h: a Hugging Face folder -> native checkpoint -> folder is the same folder,
// byte for byte, shards and index included; a checkpoint whose tensors were saved split across ranks
// and files (row-split as column-parallel layers, column-split as row-parallel ones) converts to the
// same folder as whole tensors; a trainer's export (add_hf_export) gives the imported folder back with
// only the weights changed; a TrainEngine checkpoint (no huggingface/ part) converts from the config it
// recorded; a step with no weights is an error naming it.
#include "engine/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_writer.h"
#include "core/philox.h"
#include "engine/train_engine.h"
#include "model/hf_weights.h"
#include "support/scratch_folder.h"

namespace rf::engine {
namespace {

namespace fs = std::filesystem;

using rf::testing::folder_files;

class HfCheckpoint : public rf::testing::ScratchFolderTest {};

model::ModelConfig config_of(model::Arch arch, bool tied) {
  model::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 30;
  c.hidden_size = 16;
  c.intermediate_size = 20;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = arch == model::Arch::qwen3 ? 6 : 4;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == model::Arch::qwen2;
  c.qk_norm = arch == model::Arch::qwen3;
  return c;
}

// A folder with unknown config fields and side files; returns its weights.
model::ParamStore write_folder(const std::string& dir, const model::ModelConfig& config, DType dtype) {
  model::HfModelFolder folder = model::HfModelFolder::for_config(config, dtype);
  folder.config_json["sliding_window"] = 32768;
  folder.config_json["use_sliding_window"] = false;
  folder.config_json["custom"] = {{"kept", true}};
  folder.side_files["generation_config.json"] = "{\"eos_token_id\": 2}\n";
  folder.side_files["tokenizer.json"] = "opaque bytes";
  model::ParamStore params(model::ParamLayout::for_model(config), DType::f32);
  fill_uniform(params.flat(), Philox(5, 0), -1.0, 1.0);
  model::write_hf_folder(dir, folder, params);
  return params;
}

TEST_F(HfCheckpoint, FolderToCheckpointAndBackIsTheSameFolder) {
  for (const auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3})
    for (const DType dtype : {DType::f32, DType::bf16}) {
      const std::string tag = fmt::format("{}_{}", model::arch_name(arch), dtype_name(dtype));
      SCOPED_TRACE(tag);
      write_folder(path(tag), config_of(arch, arch != model::Arch::qwen2), dtype);
      hf_folder_to_checkpoint(path(tag), {path(tag + "_ckpt"), 0}, std::nullopt);
      checkpoint_to_hf_folder(locate_checkpoint_step(path(tag + "_ckpt")), path(tag + "_back"), {});
      EXPECT_EQ(folder_files(path(tag)), folder_files(path(tag + "_back")));
      // Naming the step folder itself works too.
      checkpoint_to_hf_folder(locate_checkpoint_step(path(tag + "_ckpt") + "/global_step_0/"), path(tag + "_back2"), {});
      EXPECT_EQ(folder_files(path(tag)), folder_files(path(tag + "_back2")));
    }
}

// `folder` re-split: the embedding and the norm in one file, each layer in its own, under names no
// save_pretrained uses, and an index with more than total_size.
void split_by_layer(model::HfModelFolder& folder) {
  formats::SafetensorsSplit split{{}, nlohmann::json{{"metadata", {{"total_parameters", 99}, {"total_size", 1}}}}};
  for (const auto& [name, dtype] : folder.weight_dtypes)
    split.file_of[name] = name.starts_with("model.layers.") ? "layer-" + name.substr(13, 1) + ".safetensors"
                                                            : "rest.safetensors";
  folder.weight_split = split;
}

TEST_F(HfCheckpoint, AShardedFolderComesBackWithItsSplit) {
  const model::ParamStore params = write_folder(path("one_file"), config_of(model::Arch::qwen3, false), DType::bf16);
  model::HfModelFolder folder = model::HfModelFolder::open(path("one_file"));
  split_by_layer(folder);
  model::write_hf_folder(path("sharded"), folder, params);
  hf_folder_to_checkpoint(path("sharded"), {path("ckpt"), 0}, std::nullopt);
  checkpoint_to_hf_folder(locate_checkpoint_step(path("ckpt")), path("back"), {});
  EXPECT_TRUE(fs::exists(path("back") + "/layer-1.safetensors"));
  EXPECT_EQ(folder_files(path("sharded")), folder_files(path("back")));
  // A size asked for at export re-shards; a dtype change at import does too (the sizes change).
  checkpoint_to_hf_folder(locate_checkpoint_step(path("ckpt")), path("one_again"),
                          {.max_shard_bytes = size_t(1) << 30});
  EXPECT_EQ(folder_files(path("one_file")), folder_files(path("one_again")));
  hf_folder_to_checkpoint(path("sharded"), {path("ckpt_f32"), 0}, DType::f32);
  checkpoint_to_hf_folder(locate_checkpoint_step(path("ckpt_f32")), path("f32"), {});
  EXPECT_TRUE(fs::exists(path("f32") + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(path("f32") + "/layer-1.safetensors"));
}

// What `rlforge sft` does with a folder it started from: the trained weights go into the step's
// huggingface/ part with the folder's record; converting the step gives the folder back with only
// the weights changed (rounded to their stored bf16), and the part itself is a loadable folder.
TEST_F(HfCheckpoint, ATrainersExportKeepsEverythingButTheWeights) {
  model::ParamStore trained = write_folder(path("one_file"), config_of(model::Arch::qwen2, true), DType::bf16);
  model::HfModelFolder folder = model::HfModelFolder::open(path("one_file"));
  split_by_layer(folder);
  model::write_hf_folder(path("imported"), folder, trained);
  folder = model::HfModelFolder::open(path("imported"));
  fill_uniform(trained.flat(), Philox(6, 0), -1.0, 1.0);  // "training" changed every weight
  {
    checkpoint::CheckpointWriter writer(path("run"), 4);
    add_hf_export(writer, folder, trained, dist::ParallelContext::single_process());
    writer.commit();
  }
  checkpoint_to_hf_folder(locate_checkpoint_step(path("run")), path("exported"), {});
  auto before = folder_files(path("imported")), after = folder_files(path("exported"));
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [name, bytes] : before)
    if (name.ends_with(".safetensors"))
      EXPECT_NE(after[name], bytes) << name << ": the trained weights were not exported";
    else
      EXPECT_EQ(after[name], bytes) << name;  // config.json whole, side files, the index
  const model::HfModelFolder exported = model::HfModelFolder::open(path("exported"));
  EXPECT_EQ(exported.weight_dtypes, folder.weight_dtypes);
  EXPECT_EQ(exported.config_json.at("custom"), nlohmann::json({{"kept", true}}));
  // The huggingface/ part is a Hugging Face folder too, with the same record and weights.
  const std::string part = path("run") + "/global_step_4/huggingface";
  EXPECT_EQ(model::HfModelFolder::open(part).config_json, folder.config_json);
  model::ParamStore loaded(trained.layout(), DType::f32), from_part(trained.layout(), DType::f32);
  model::load_hf_weights(loaded, path("exported"));
  model::load_hf_weights(from_part, part);
  for (const model::ParamEntry& e : trained.layout().entries()) {
    const TensorView t = trained.get(e.name), a = loaded.get(e.name), b = from_part.get(e.name);
    for (int64_t i = 0; i < t.numel(); ++i) {
      ASSERT_EQ(to_f32(to_bf16(t.data<float>()[i])), a.data<float>()[i]) << e.name << "[" << i << "]";
      ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << e.name << "[" << i << "]";
    }
  }
}

// The step as a TP-2 run would save it: every matrix in two shards in two files (rank 0, rank 1),
// row-split or column-split, vectors split in two; the huggingface/ part written by a rank-0 export.
TEST_F(HfCheckpoint, ASplitCheckpointConvertsToTheWholeTensors) {
  const model::ModelConfig config = config_of(model::Arch::qwen2, false);
  const model::ParamStore params = write_folder(path("original"), config, DType::f32);
  hf_folder_to_checkpoint(path("original"), {path("whole"), 0}, std::nullopt);

  std::vector<checkpoint::ShardedTensor> rank0, rank1;
  for (const model::ParamEntry& e : params.layout().entries()) {
    const TensorView t = params.get(e.name);
    const int dim = (e.shape.rank() == 2 && (e.name.find("o_proj") != std::string::npos ||
                                             e.name.find("down_proj") != std::string::npos))
                        ? 1
                        : 0;  // row-parallel layers split their input dimension
    const int64_t half = t.size(dim) / 2;
    Shape offset0 = e.shape, offset1 = e.shape;
    for (int d = 0; d < e.shape.rank(); ++d) offset0[d] = offset1[d] = 0;
    offset1[dim] = half;
    rank0.push_back({e.name, t.slice(dim, 0, half), e.shape, offset0});
    rank1.push_back({e.name, t.slice(dim, half, t.size(dim) - half), e.shape, offset1});
  }
  {
    checkpoint::CheckpointWriter writer(path("split"), 7);
    writer.add_tensors("actor", "model_rank0", rank0);
    writer.add_tensors("actor", "model_rank1", rank1);
    const std::string hf = path("whole") + "/global_step_0/huggingface/";
    for (const char* name : {"config.json", "generation_config.json", "tokenizer.json"})
      writer.add_file("huggingface", name, model::read_file_bytes(hf + name));
    writer.add_json("huggingface", "hf_folder", nlohmann::json::parse(model::read_file_bytes(hf + "hf_folder.json")));
    writer.commit();
  }
  checkpoint_to_hf_folder(locate_checkpoint_step(path("split")), path("from_split"), {});
  EXPECT_EQ(folder_files(path("original")), folder_files(path("from_split")));
}

TEST_F(HfCheckpoint, ATrainEngineCheckpointConvertsFromTheConfigItRecorded) {
  const model::ModelConfig config = config_of(model::Arch::qwen3, true);
  EngineConfig engine_config;
  engine_config.dtype = "float32";
  const kernels::KernelRegistry kernels;
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  optim::OptimConfig optim_config;
  optim_config.lr_decay_steps = 10;
  TrainEngine engine(engine_config, optim_config, config, kernels, parallel, tracker, 16);
  engine.init_random_weights(9);
  {
    checkpoint::CheckpointWriter writer(path("run"), 3);
    engine.save_checkpoint(writer, "actor");
    writer.commit();
  }
  checkpoint_to_hf_folder(locate_checkpoint_step(path("run")), path("exported"), {.dtype = DType::bf16});
  const model::HfModelFolder exported = model::HfModelFolder::open(path("exported"));
  EXPECT_EQ(exported.config_json.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(exported.config.head_dim, 6);
  EXPECT_TRUE(exported.config.tie_word_embeddings);
  model::ParamStore loaded(model::ParamLayout::for_model(exported.config), DType::f32);
  model::load_hf_weights(loaded, path("exported"));
  const model::ParamStore& master = engine.master_weights();
  for (const model::ParamEntry& e : master.layout().entries()) {
    const TensorView a = master.get(e.name), b = loaded.get(e.name);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(to_f32(to_bf16(a.data<float>()[i])), b.data<float>()[i]) << e.name << "[" << i << "]";
  }
}

TEST_F(HfCheckpoint, StepsWithoutWeightsAndNonCheckpointsAreNamedErrors) {
  {
    checkpoint::CheckpointWriter writer(path("no_weights"), 1);
    writer.add_json("trainer", "state", nlohmann::json{{"global_step", 1}});
    writer.commit();
  }
  try {
    checkpoint_to_hf_folder(locate_checkpoint_step(path("no_weights")), path("out"), {});
    ADD_FAILURE() << "expected an error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("global_step_1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no model weights"), std::string::npos) << e.what();
  }
  fs::create_directories(path("plain"));
  try {
    locate_checkpoint_step(path("plain"));
    ADD_FAILURE() << "expected an error";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path("plain"));
    EXPECT_NE(std::string(e.what()).find("neither a Hugging Face model folder"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("out") + "/config.json"));
}

}  // namespace
}  // namespace rf::engine
