// CheckpointWriter: writes one step of a native sharded checkpoint in verl's layout,
//
//   <root>/global_step_<k>/<component>/<file_stem>.safetensors   tensor shards
//   <root>/global_step_<k>/<component>/<name>.json               small state (RNG streams, data position)
//   <root>/global_step_<k>/manifest.json                         see manifest.h
//   <root>/latest_checkpointed_iteration.txt                     "<k>"
//
// Components ("actor", "critic", "optimizer", "trainer", ...) are free-form folder names. Every tensor
// is saved as shards that record their box in the global tensor (ShardedTensor), so a run saved at one
// parallel layout loads at another: CheckpointReader assembles any region from whichever shards
// overlap it. Today each rank saves whole tensors (one shard each); a layout that splits a tensor
// writes several shards, in one file or one file per rank, and the format stays the same.
//
// Crash safety: everything goes into a hidden temp folder `<root>/.global_step_<k>.tmp.<pid>.<n>`.
// commit() writes the manifest last, fsyncs every file and folder, renames the temp folder to
// global_step_<k> (swapping it atomically with an existing one of the same step), and only then
// replaces the latest pointer through a temp file and a rename. A crash at any moment leaves the
// previous checkpoints and pointer intact and never a global_step_<k> without its manifest. Nothing
// already saved is modified in place. (Where the file system cannot swap folders atomically, a crash
// while re-saving an existing step can leave that step moved aside under a hidden `.old` name; see
// replace_folder in durable_file.h.) A crashed writer's temp folder is left behind (it is hidden and
// never read); it is not cleaned up automatically, since another writer may be using it.
//
// Not here: gathering shards from several ranks into one step (the distributed save), HF export.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "core/tensor_view.h"

namespace rf::checkpoint {

// One rank's piece of a tensor: `local` holds the box [global_offset, global_offset + local.shape())
// of a tensor of `global_shape` (offset per dim).
struct ShardedTensor {
  std::string name;
  TensorView local;
  Shape global_shape;
  Shape global_offset;
};

// The whole tensor as one shard (offset 0 in every dim).
ShardedTensor whole_tensor(std::string name, TensorView tensor);

class CheckpointWriter {
 public:
  // Creates `root_dir` if needed and the temp step folder; IoError naming `root_dir` if either cannot
  // be created (e.g. the path lies under a regular file, or the folder is not writable).
  CheckpointWriter(std::string root_dir, int64_t step);
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  // An uncommitted writer removes its temp folder, so nothing it wrote becomes visible.
  ~CheckpointWriter();

  // Writes `shards` to <component>/<file_stem>.safetensors now (the views need not outlive the call).
  // Any dtype and strides. Shards of one tensor may come from several calls (several files), and must
  // agree on its global shape. rf::Error on a bad argument: a name that is not plain, a file stem used
  // twice in a component, a box outside its global shape, two shards of one tensor at the same offset
  // in one call. IoError naming the file when it cannot be written.
  void add_tensors(const std::string& component, const std::string& file_stem,
                   const std::vector<ShardedTensor>& shards);
  // Writes `value` to <component>/<name>.json.
  void add_json(const std::string& component, const std::string& name, const nlohmann::json& value);
  // Writes `contents` to <component>/<file_name> (e.g. an HF config.json or tokenizer.json), recorded
  // and checksummed in the manifest like every other file.
  void add_file(const std::string& component, const std::string& file_name, const std::string& contents);
  // Publishes the step (see the file comment). Nothing is visible before; the writer is spent after.
  void commit();

  const std::string& root_dir() const { return root_dir_; }
  int64_t step() const { return step_; }

 private:
  // The folder of `component` inside the temp folder, created on first use.
  std::string component_folder(const std::string& component);
  bool has_file(const std::string& component, const std::string& file_name) const;
  void record_file(const std::string& component, const std::string& file_name);

  std::string root_dir_;
  int64_t step_ = 0;
  std::string temp_dir_;
  Manifest manifest_;
  bool committed_ = false;
};

}  // namespace rf::checkpoint
