// Hugging Face model folders in and out (model/hf_folder.h): import then export is bit-exact for the
// three architectures x f32/bf16 x tied/untied x one file/sharded, checked file by file and at the
// format level (config keys, tensor names, dtypes, shapes, index); a folder's own split into files
// comes back unless a dtype change or a size asks otherwise; the reference folders, which
// transformers wrote, come back byte for byte; generation's eos ids; fields that change the maths are
// judged by their effective value; every bad folder is an error naming the file (and the key or tensor).
#include "model/hf_folder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/philox.h"
#include "formats/safetensors_folder.h"
#include "formats/safetensors_writer.h"
#include "model/hf_weights.h"
#include "model/param_layout.h"
#include "support/scratch_folder.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

namespace fs = std::filesystem;

using rf::testing::folder_files;

class HfFolderTest : public rf::testing::ScratchFolderTest {};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

ModelConfig small_config(Arch arch, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = arch == Arch::qwen3 ? 6 : 4;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == Arch::qwen2 || arch == Arch::qwen2_moe;
  c.qk_norm = arch == Arch::qwen3 || arch == Arch::qwen3_moe;
  if (arch == Arch::qwen3_moe)  // layer 1 dense
    c.moe = MoeConfig{.num_experts = 4, .num_experts_per_tok = 2, .moe_intermediate_size = 8, .mlp_only_layers = {1}};
  if (arch == Arch::qwen2_moe)
    c.moe = MoeConfig{.num_experts = 3, .num_experts_per_tok = 2, .moe_intermediate_size = 8,
                      .shared_expert_intermediate_size = 12, .shared_expert_gate = true};
  c.validate();
  return c;
}

// A source folder as transformers might have written it: fields rlforge does not read, side files,
// weights with every element random (biases and norms included) in `dtype`.
std::string make_source_folder(const std::string& dir, Arch arch, bool tied, DType dtype, size_t max_shard_bytes) {
  HfModelFolder folder = HfModelFolder::for_config(small_config(arch, tied), dtype);
  folder.config_json["transformers_version"] = "4.51.3";
  folder.config_json["use_cache"] = true;
  folder.config_json["some_future_field"] = {{"nested", {1, 2.5, "x"}}, {"flag", nullptr}};
  folder.config_json["max_window_layers"] = 28;
  folder.side_files["generation_config.json"] = "{\n  \"eos_token_id\": [2, 3]\n}\n";
  folder.side_files["tokenizer.json"] = "{\"not parsed\": \"copied byte for byte\"}\n";
  folder.side_files["tokenizer_config.json"] = "{\"eos_token\": \"<eos>\"}";
  ParamStore params(ParamLayout::for_model(folder.config), DType::f32);
  fill_uniform(params.flat(), Philox(7, int(arch) * 4 + tied), -1.0, 1.0);
  write_hf_folder(dir, folder, params, HfExportOptions{.max_shard_bytes = max_shard_bytes});
  return dir;
}

// Import `src` and export it to `dst` with `options`.
void reexport(const std::string& src, const std::string& dst, const HfExportOptions& options) {
  const HfModelFolder folder = HfModelFolder::open(src);
  ParamStore params(ParamLayout::for_model(folder.config), folder.exact_store_dtype());
  load_hf_weights(params, src);
  write_hf_folder(dst, folder, params, options);
}

void expect_same_tensors(const std::string& a_dir, const std::string& b_dir) {
  const formats::SafetensorsFolder a(a_dir), b(b_dir);
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    const auto& ea = a.entry(name);
    const auto& eb = b.entry(name);
    EXPECT_EQ(ea.dtype, eb.dtype) << name;
    EXPECT_EQ(ea.shape, eb.shape) << name;
    const TensorView va = a.file_of(name).view(name), vb = b.file_of(name).view(name);
    ASSERT_EQ(va.nbytes(), vb.nbytes()) << name;
    EXPECT_EQ(std::memcmp(va.raw(), vb.raw(), va.nbytes()), 0) << name << ": different bits";
  }
}

TEST_F(HfFolderTest, ImportThenExportIsBitExactForEveryArchDtypeTyingAndSharding) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3, Arch::qwen2_moe, Arch::qwen3_moe})
    for (DType dtype : {DType::f32, DType::bf16})
      for (bool tied : {false, true})
        for (size_t shard_bytes : {kDefaultMaxShardBytes, size_t(3000)}) {
          const std::string tag = fmt::format("{}_{}_{}_{}", arch_name(arch), dtype_name(dtype), tied, shard_bytes);
          SCOPED_TRACE(tag);
          const std::string src = make_source_folder(path(tag + "_src"), arch, tied, dtype, shard_bytes);
          const bool sharded = shard_bytes != kDefaultMaxShardBytes;

          // Format level: config keys and values, tensor names, dtypes, shapes, the index.
          const HfModelFolder opened = HfModelFolder::open(src);
          EXPECT_EQ(opened.config_json.at("some_future_field"), nlohmann::json({{"nested", {1, 2.5, "x"}}, {"flag", nullptr}}));
          EXPECT_EQ(opened.config_json.at("torch_dtype"), torch_dtype_name(dtype));
          EXPECT_EQ(opened.config_json.at("tie_word_embeddings"), tied);
          EXPECT_EQ(opened.side_files.size(), 3u);
          const formats::SafetensorsFolder weights(src);
          const ParamLayout layout = ParamLayout::for_model(opened.config);
          EXPECT_EQ(weights.names().size(), layout.entries().size());
          EXPECT_EQ(weights.contains("lm_head.weight"), !tied);
          for (const ParamEntry& e : layout.entries()) {
            ASSERT_TRUE(weights.contains(e.name)) << e.name;
            EXPECT_EQ(weights.entry(e.name).dtype, dtype) << e.name;
            EXPECT_EQ(weights.entry(e.name).shape, e.shape) << e.name;
          }
          EXPECT_EQ(fs::exists(fs::path(src) / "model.safetensors.index.json"), sharded);
          EXPECT_EQ(fs::exists(fs::path(src) / "model.safetensors"), !sharded);
          if (sharded) {
            const auto index = nlohmann::json::parse(read_file_bytes(src + "/model.safetensors.index.json"));
            EXPECT_EQ(index.at("weight_map").size(), layout.entries().size());
            EXPECT_GT(weights.files().size(), 1u);
          }

          // Import then export with the same sharding: every file byte for byte.
          reexport(src, path(tag + "_out"), HfExportOptions{.max_shard_bytes = shard_bytes});
          EXPECT_EQ(folder_files(src), folder_files(path(tag + "_out")));
          // Across layouts (sharded <-> one file): the same tensors, bit for bit.
          const size_t other = sharded ? kDefaultMaxShardBytes : size_t(3000);
          reexport(src, path(tag + "_relaid"), HfExportOptions{.max_shard_bytes = other});
          expect_same_tensors(src, path(tag + "_relaid"));
          EXPECT_EQ(read_file_bytes(src + "/config.json"), read_file_bytes(path(tag + "_relaid") + "/config.json"));
        }
}

TEST_F(HfFolderTest, ExportDtypeConvertsAndUpdatesTorchDtype) {
  const std::string src = make_source_folder(path("src"), Arch::qwen2, false, DType::f32, kDefaultMaxShardBytes);
  reexport(src, path("bf16"), HfExportOptions{.dtype = DType::bf16});
  const HfModelFolder bf16 = HfModelFolder::open(path("bf16"));
  EXPECT_EQ(bf16.config_json.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(bf16.config_json.at("some_future_field"), HfModelFolder::open(src).config_json.at("some_future_field"));
  for (const auto& [name, dtype] : bf16.weight_dtypes) EXPECT_EQ(dtype, DType::bf16) << name;
  // bf16 -> f32 widens exactly, and back gives the same bits.
  reexport(path("bf16"), path("f32"), HfExportOptions{.dtype = DType::f32});
  reexport(path("f32"), path("bf16_again"), HfExportOptions{.dtype = DType::bf16});
  EXPECT_EQ(folder_files(path("bf16")), folder_files(path("bf16_again")));
}

TEST_F(HfFolderTest, TheOriginalSplitComesBackUnlessADtypeOrASizeAsksOtherwise) {
  // A sharded folder whose split no size rule gives: the embedding alone, every layer in a file of
  // its own, named as no save_pretrained names them, with an index that has total_parameters too.
  const std::string sized = make_source_folder(path("sized"), Arch::qwen2, false, DType::bf16, 3000);
  HfModelFolder folder = HfModelFolder::open(sized);
  ParamStore params(ParamLayout::for_model(folder.config), DType::f32);
  load_hf_weights(params, sized);
  ASSERT_TRUE(folder.weight_split && folder.weight_split->index);
  formats::SafetensorsSplit split{{}, nlohmann::json{{"metadata", {{"total_parameters", 12345}, {"total_size", 1}}}}};
  for (const ParamEntry& e : params.layout().entries())
    split.file_of[e.name] = e.name.starts_with("model.layers.") ? "layer-" + e.name.substr(13, 1) + ".safetensors"
                                                                : "rest.safetensors";
  folder.weight_split = split;
  write_hf_folder(path("custom"), folder, params);
  const auto custom = folder_files(path("custom"));
  EXPECT_EQ(HfModelFolder::open(path("custom")).weight_split, split);
  for (const char* name : {"layer-0.safetensors", "layer-1.safetensors", "rest.safetensors"})
    EXPECT_TRUE(custom.count(name)) << name;

  // Import then export: byte for byte, the index included.
  reexport(path("custom"), path("again"), {});
  EXPECT_EQ(folder_files(path("again")), custom);
  // An export dtype that changes nothing keeps the split too.
  reexport(path("custom"), path("same_dtype"), HfExportOptions{.dtype = DType::bf16});
  EXPECT_EQ(folder_files(path("same_dtype")), custom);
  // A dtype change: the files would have other sizes, so save_pretrained's rule (one file here).
  reexport(path("custom"), path("f32"), HfExportOptions{.dtype = DType::f32});
  EXPECT_FALSE(HfModelFolder::open(path("f32")).weight_split->index);
  EXPECT_TRUE(fs::exists(path("f32/model.safetensors")));
  // A size asked for: that rule, with save_pretrained's names.
  reexport(path("custom"), path("resized"), HfExportOptions{.max_shard_bytes = 3000});
  EXPECT_EQ(folder_files(path("resized")), folder_files(sized));
  // Other tensors than the split lists (here: a different model): by size.
  HfModelFolder other = HfModelFolder::open(path("custom"));
  other.weight_split->file_of.erase("model.norm.weight");
  write_hf_folder(path("other"), other, params);
  EXPECT_TRUE(fs::exists(path("other/model.safetensors")));
}

TEST_F(HfFolderTest, SetDtypeChangesEveryWeightAndTheConfig) {
  HfModelFolder folder = HfModelFolder::open(make_source_folder(path("src"), Arch::llama, true, DType::f32, 3000));
  folder.config_json["dtype"] = "float32";  // as transformers >= 4.56 writes it
  folder.set_dtype(DType::f32);
  EXPECT_TRUE(folder.weight_split) << "no weight changed dtype";
  folder.set_dtype(DType::bf16);
  EXPECT_FALSE(folder.weight_split);
  EXPECT_EQ(folder.config_json.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(folder.config_json.at("dtype"), "bfloat16");
  EXPECT_EQ(folder.config.torch_dtype, "bfloat16");
  EXPECT_EQ(folder.weight_dtypes.size(), ParamLayout::for_model(folder.config).entries().size());
  for (const auto& [name, dtype] : folder.weight_dtypes) EXPECT_EQ(dtype, DType::bf16) << name;
}

TEST(HfGenerationEos, GenerationConfigThenConfigThenNone) {
  HfModelFolder folder;
  folder.config_json = {{"eos_token_id", 7}};
  folder.side_files["generation_config.json"] = "{\"eos_token_id\": [5, 6]}";
  EXPECT_EQ(generation_eos_ids(folder, "dir"), (std::vector<int64_t>{5, 6}));
  folder.side_files["generation_config.json"] = "{\"eos_token_id\": 4}";
  EXPECT_EQ(generation_eos_ids(folder, "dir"), (std::vector<int64_t>{4}));
  folder.side_files["generation_config.json"] = "{\"pad_token_id\": 4}";
  EXPECT_EQ(generation_eos_ids(folder, "dir"), (std::vector<int64_t>{7}));
  folder.side_files.clear();
  EXPECT_EQ(generation_eos_ids(folder, "dir"), (std::vector<int64_t>{7}));
  folder.config_json = nlohmann::json::object();
  EXPECT_TRUE(generation_eos_ids(folder, "dir").empty());
  folder.side_files["generation_config.json"] = "{\"eos_token_id\": [5, \"x\"]}";
  try {
    generation_eos_ids(folder, "dir");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), "dir/generation_config.json");
    EXPECT_NE(std::string(e.what()).find("eos_token_id: [5,\"x\"] is not a token id"), std::string::npos) << e.what();
  }
}

// The dense reference folders and the Qwen MoE ones transformers wrote (tests/reference/moe).
TEST_F(HfFolderTest, ReferenceFoldersComeBackByteForByte) {
  auto dirs = rf::testing::reference_model_dirs();
  ASSERT_FALSE(dirs.empty());
  for (const char* moe : {"qwen3_moe", "qwen3_moe_dense_layer", "qwen2_moe"})
    dirs.push_back(std::string(RF_MOE_REFERENCE_DIR) + "/" + moe);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    const std::string out = path(fs::path(dir).filename().string());
    reexport(dir, out, {});
    for (const char* name : {"config.json", "model.safetensors", "generation_config.json"})
      EXPECT_EQ(read_file_bytes(dir + "/" + name), read_file_bytes(out + "/" + name)) << name;
  }
}

// --- fields that change the maths, judged by effective value --------------------------------------

nlohmann::json qwen2_json() {
  return nlohmann::json{{"architectures", {"Qwen2ForCausalLM"}},
                        {"model_type", "qwen2"},
                        {"vocab_size", 40},
                        {"hidden_size", 16},
                        {"intermediate_size", 24},
                        {"num_hidden_layers", 2},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},
                        {"max_window_layers", 21},
                        {"sliding_window", 32768},
                        {"use_sliding_window", false},
                        {"rope_scaling", nullptr}};
}

void expect_config_error(const nlohmann::json& json, const std::string& key, const std::string& fragment) {
  try {
    ModelConfig::from_json(json, "dir/config.json");
    ADD_FAILURE() << "expected a ConfigError at " << key << " for " << json.dump();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dir/config.json"), std::string::npos) << e.what();
  }
}

TEST(HfConfigMaths, SlidingWindowIsJudgedByUseSlidingWindow) {
  EXPECT_NO_THROW(ModelConfig::from_json(qwen2_json(), "qwen2.5"));  // Qwen2.5-0.5B's own setting
  auto j = qwen2_json();
  j["use_sliding_window"] = true;
  expect_config_error(j, "use_sliding_window", "32768");
  j.erase("sliding_window");  // transformers' default window then applies
  expect_config_error(j, "use_sliding_window", "4096 by default");
  j["sliding_window"] = nullptr;  // no window: full attention
  EXPECT_NO_THROW(ModelConfig::from_json(j, "test"));
  j = qwen2_json();
  j["layer_types"] = {"full_attention", "sliding_attention"};
  expect_config_error(j, "layer_types[1]", "sliding_attention");
  j["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_NO_THROW(ModelConfig::from_json(j, "test"));
}

TEST(HfConfigMaths, RopeScalingIsJudgedByItsType) {
  using kernels::RopeScalingType;
  auto j = qwen2_json();
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(ModelConfig::from_json(j, "test").rope_scaling.type, RopeScalingType::none);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 1}};  // the older key; factor 1 is the identity
  EXPECT_EQ(ModelConfig::from_json(j, "test").rope_scaling.type, RopeScalingType::none);
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  const ModelConfig linear = ModelConfig::from_json(j, "test");
  EXPECT_EQ(linear.rope_scaling.type, RopeScalingType::linear);
  EXPECT_EQ(linear.rope_scaling.factor, 2.0);
  EXPECT_EQ(linear.to_json()["rope_scaling"], j["rope_scaling"]);
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  const ModelConfig llama3 = ModelConfig::from_json(j, "test");
  EXPECT_EQ(llama3.rope_scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(llama3.rope_scaling.original_max_position_embeddings, 8192.0);
  EXPECT_EQ(ModelConfig::from_json(llama3.to_json(), "test").rope_scaling.high_freq_factor, 4.0);
  j["rope_scaling"].erase("low_freq_factor");
  expect_config_error(j, "rope_scaling.low_freq_factor", "expected a positive finite number, got nothing");
  j["rope_scaling"]["low_freq_factor"] = 4.0;
  expect_config_error(j, "rope_scaling.high_freq_factor", "must exceed low_freq_factor");
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0}};
  expect_config_error(j, "rope_scaling.factor", "expected a positive finite number, got 0");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_config_error(j, "rope_scaling.rope_type", "'yarn' is not supported");
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  expect_config_error(j, "rope_scaling.rope_type", "'dynamic' is not supported");
  j["rope_scaling"] = {{"factor", 2.0}};
  expect_config_error(j, "rope_scaling.rope_type", "expected a string");
  j["rope_scaling"] = "linear";
  expect_config_error(j, "rope_scaling", "expected null or an object");
}

TEST(HfConfigMaths, OtherFieldsThatChangeTheMaths) {
  auto j = qwen2_json();
  j["hidden_act"] = "swish";  // the same function as silu
  EXPECT_NO_THROW(ModelConfig::from_json(j, "test"));
  j["hidden_act"] = "gelu";
  expect_config_error(j, "hidden_act", "'gelu' is not supported");
  j = qwen2_json();
  j["partial_rotary_factor"] = 0.5;
  expect_config_error(j, "partial_rotary_factor", "0.5");
  j["partial_rotary_factor"] = 1.0;
  EXPECT_NO_THROW(ModelConfig::from_json(j, "test"));
  j["mlp_bias"] = true;
  expect_config_error(j, "mlp_bias", "not supported");
}

// --- bad folders ------------------------------------------------------------------------------

// `fn` throws an rf::Error whose message contains every fragment.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one with '" << fragments.front() << "'";
  } catch (const Error& e) {
    for (const std::string& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "'" << f << "' not in: " << e.what();
  }
}

TEST_F(HfFolderTest, BadFoldersAreErrorsNamingTheFile) {
  expect_error([&] { HfModelFolder::open(path("absent")); }, {path("absent"), "not a folder"});

  fs::create_directories(path("no_config"));
  expect_error([&] { HfModelFolder::open(path("no_config")); }, {path("no_config/config.json"), "missing"});

  const std::string src = make_source_folder(path("good"), Arch::qwen3, true, DType::f32, kDefaultMaxShardBytes);
  const auto copy = [&](const std::string& name) {
    fs::copy(src, path(name), fs::copy_options::recursive);
    return path(name);
  };
  std::string dir = copy("bad_json");
  write_text(dir + "/config.json", "{\"model_type\": \"qwen3\",");
  expect_error([&] { HfModelFolder::open(dir); }, {dir + "/config.json", "not valid JSON"});

  dir = copy("sliding");
  auto config = nlohmann::json::parse(read_file_bytes(dir + "/config.json"));
  config["use_sliding_window"] = true;
  config["sliding_window"] = 128;
  write_text(dir + "/config.json", config.dump());
  expect_error([&] { HfModelFolder::open(dir); }, {dir + "/config.json", "use_sliding_window"});

  dir = copy("no_weights");
  fs::remove(dir + "/model.safetensors");
  expect_error([&] { HfModelFolder::open(dir); }, {dir, "model.safetensors"});

  dir = copy("bad_generation_config");
  write_text(dir + "/generation_config.json", "{oops");
  expect_error([&] { HfModelFolder::open(dir); }, {dir + "/generation_config.json", "not valid JSON"});

  // Weights that disagree with the config: a missing tensor, a wrong shape, an integer tensor.
  const HfModelFolder good = HfModelFolder::open(src);
  const ParamLayout layout = ParamLayout::for_model(good.config);
  const auto write_weights = [&](const std::string& name, const std::function<void(std::vector<std::pair<std::string, TensorView>>&, std::vector<Tensor>&)>& edit) {
    const std::string d = copy(name);
    std::vector<Tensor> owned;
    std::vector<std::pair<std::string, TensorView>> tensors;
    owned.reserve(layout.entries().size() + 1);
    for (const ParamEntry& e : layout.entries()) {
      owned.emplace_back(e.shape, DType::f32);
      tensors.emplace_back(e.name, owned.back().view());
    }
    edit(tensors, owned);
    formats::write_safetensors(d + "/model.safetensors", tensors);
    return d;
  };
  dir = write_weights("missing_tensor", [](auto& tensors, auto&) { tensors.pop_back(); });
  expect_error([&] { HfModelFolder::open(dir); }, {dir, "model.norm.weight"});
  dir = write_weights("int_tensor", [](auto& tensors, auto& owned) {
    owned.emplace_back(tensors.back().second.shape(), DType::i32);
    tensors.back().second = owned.back().view();
  });
  expect_error([&] { HfModelFolder::open(dir); }, {dir + "/model.safetensors", "model.norm.weight", "floating point"});
  dir = write_weights("wrong_shape", [](auto& tensors, auto& owned) {
    owned.emplace_back(Shape{3}, DType::f32);
    tensors.back().second = owned.back().view();
  });
  ParamStore params(layout, DType::f32);
  expect_error([&] { load_hf_weights(params, dir); }, {dir + "/model.safetensors", "model.norm.weight", "shape"});

  // Weights of another model: export refuses a store laid out for a different config.
  ParamStore other(ParamLayout::for_model(small_config(Arch::llama, true)), DType::f32);
  expect_error([&] { write_hf_folder(path("mismatch"), good, other); }, {"do not match the config"});
}

}  // namespace
}  // namespace rf::model
