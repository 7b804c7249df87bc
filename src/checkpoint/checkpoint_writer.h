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
// Collective save: with a ProcessGroup every rank of it constructs the writer for the same root and
// step, adds the shards it holds (each to files no other rank writes: e.g. "model-tp1") and commits.
// Rank 0 creates the temp folder and tells the others its name; every rank writes and fsyncs its own
// files; commit gathers each rank's part of the manifest to rank 0, which checks that no two ranks
// wrote the same file, writes the merged manifest and publishes the step as above, then tells every
// rank the outcome, so commit returns (or throws) on all ranks together and the step is visible to
// all of them afterwards. The ranks must see one file system at `root_dir` (one machine, or a shared
// file system on a cluster).
//
// Not here: which rank writes which shards (engine/train_engine.h), HF export.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "core/tensor_view.h"
#include "dist/process_group.h"

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
  // The collective writer over `group` (kept by reference); see the file comment. A failure on rank 0
  // (creating or publishing) makes every rank throw; a failure on another rank before commit leaves
  // rank 0 waiting in commit, as any collective does: the guarded main aborts the job.
  CheckpointWriter(std::string root_dir, int64_t step, dist::ProcessGroup& group);
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  // An uncommitted writer removes its temp folder (rank 0 of a collective one), so nothing it wrote
  // becomes visible.
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
  // The ranks writing this step together (1 without a group) and this one's place among them.
  int num_writers() const { return group_ ? group_->size() : 1; }
  int writer_rank() const { return group_ ? group_->rank() : 0; }

 private:
  void create_temp_folder();
  // Writes the manifest, makes everything durable and renames the temp folder into place.
  void publish();
  // The folder of `component` inside the temp folder, created on first use.
  std::string component_folder(const std::string& component);
  bool has_file(const std::string& component, const std::string& file_name) const;
  void record_file(const std::string& component, const std::string& file_name);

  std::string root_dir_;
  int64_t step_ = 0;
  dist::ProcessGroup* group_ = nullptr;  // a collective save's ranks
  std::string temp_dir_;
  Manifest manifest_;
  bool committed_ = false;
};

}  // namespace rf::checkpoint
