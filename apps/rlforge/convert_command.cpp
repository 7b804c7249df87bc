// `rlforge convert --from DIR --to DIR [--dtype f32|bf16|f16] [--max-shard-bytes N]`: a Hugging Face
// model folder to a native checkpoint, or back (engine/hf_checkpoint.h says what each holds). The
// direction is read from --from: a folder with config.json is a Hugging Face folder; a checkpoint root
// (latest_checkpointed_iteration.txt) or one step of it (global_step_<k>, with manifest.json) is
// native, read whatever parallel layout saved it. --to must not exist or be empty; a folder becomes
// step 0 of a new checkpoint. --dtype sets every weight's dtype (and torch_dtype); without it each
// weight keeps its stored dtype (as the checkpoint recorded it, else a trainer checkpoint's f32 master
// weights). --max-shard-bytes shards the Hugging Face output by size; without it a folder's own split
// into files comes back when it still applies (model/hf_folder.h: write_hf_folder).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "apps/rlforge/cli_numbers.h"
#include "apps/rlforge/command_util.h"
#include "apps/rlforge/commands.h"
#include "engine/hf_checkpoint.h"

namespace rf::apps {
namespace {

namespace fs = std::filesystem;

struct ConvertOptions {
  std::string from, to, dtype;
  std::optional<size_t> max_shard_bytes;
};

int run_convert(const ConvertOptions& o) {
  std::error_code ec;
  if (!fs::exists(o.from, ec)) throw IoError(o.from, "--from: no such folder");
  require_new_folder(o.to, "--to");
  const std::optional<DType> dtype = o.dtype.empty() ? std::nullopt : std::optional<DType>(parse_dtype(o.dtype));
  if (fs::exists(fs::path(o.from) / "config.json", ec)) {
    engine::hf_folder_to_checkpoint(o.from, engine::CheckpointStep{o.to, 0}, dtype);
    std::printf("convert: %s (Hugging Face) -> %s/global_step_0 (native)\n", o.from.c_str(), o.to.c_str());
    return 0;
  }
  const engine::CheckpointStep source = engine::locate_checkpoint_step(o.from);
  engine::checkpoint_to_hf_folder(source, o.to,
                                  model::HfExportOptions{.dtype = dtype, .max_shard_bytes = o.max_shard_bytes});
  std::printf("convert: %s/global_step_%lld (native) -> %s (Hugging Face)\n", source.root.c_str(),
              (long long)source.step, o.to.c_str());
  return 0;
}

}  // namespace

Command add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "convert a Hugging Face model folder to a native checkpoint, or back");
  auto o = std::make_shared<ConvertOptions>();
  auto max_shard_bytes = std::make_shared<size_t>();
  cmd->add_option("--from", o->from, "a Hugging Face folder, a checkpoint folder, or one global_step_<k> of it")
      ->required();
  cmd->add_option("--to", o->to, "the folder to create (must not exist or be empty)")->required();
  cmd->add_option("--dtype", o->dtype, "weights dtype: f32, bf16 or f16 (default: as stored)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  auto* shard_option = add_integer_option(
      *cmd, "--max-shard-bytes", *max_shard_bytes,
      "Hugging Face output: shard the weights by this many bytes (default: the folder's own split, else 5e9 as "
      "save_pretrained)",
      size_t(1));
  return [o, max_shard_bytes, shard_option] {
    if (shard_option->count()) o->max_shard_bytes = *max_shard_bytes;
    return run_convert(*o);
  };
}

}  // namespace rf::apps
