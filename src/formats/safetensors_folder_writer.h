// Writes a Hugging Face model folder's weights as save_pretrained does: one `model.safetensors`
// when everything fits in one shard, otherwise `model-00001-of-00003.safetensors`, ... and
// `model.safetensors.index.json` ({"metadata": {"total_size": bytes}, "weight_map": {name: file}}),
// which SafetensorsFolder reads back; or split as a folder was (SafetensorsFolder::split()): the same
// files under the same names and the same index, so a folder read and written back is byte for byte
// the same, whatever tool chose its split.
//
// Every file is written atomically (temp file, fsync, rename), shards before the index, and files a
// previous save left behind (the other layout, shards of another count) are removed last. A reader
// prefers model.safetensors, so one opening the folder while a save of another layout is under way
// finds the old weights or the new ones whole; shards of the same names are replaced one by one.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor_view.h"
#include "formats/safetensors_folder.h"

namespace rf::formats {

// Which tensors go to which shard (indices into `tensor_bytes`), by huggingface_hub's rule
// (split_state_dict_into_shards_factory): tensors are taken in order; one bigger than max_shard_bytes
// gets a shard of its own at once, while the shard being filled stays open; otherwise the shard being
// filled is closed first when the tensor would take it past max_shard_bytes. Sizes count tensor bytes
// only, not headers. Shards are listed in the order they were closed, which names them.
std::vector<std::vector<size_t>> plan_safetensors_shards(const std::vector<size_t>& tensor_bytes,
                                                         size_t max_shard_bytes);

// "model-00002-of-00003.safetensors" (index counts from 0).
std::string safetensors_shard_name(size_t index, size_t num_shards);

// Writes `tensors` into `dir` (created if missing), sharded by `max_shard_bytes`, with `metadata` in
// every file's header. Names must be non-empty, unique and not "__metadata__" (rf::Error before
// anything is written). Returns the names of the files written, the index last.
std::vector<std::string> write_safetensors_folder(const std::string& dir,
                                                  const std::vector<std::pair<std::string, TensorView>>& tensors,
                                                  size_t max_shard_bytes,
                                                  const std::map<std::string, std::string>& metadata = {});
// The same, with each tensor in the file `split.file_of` names and, when split.index is set, an index
// made of it and the weight_map. The tensors must be exactly split.file_of's keys, every file name
// plain, and without an index every file model.safetensors (rf::Error before anything is written).
std::vector<std::string> write_safetensors_folder(const std::string& dir,
                                                  const std::vector<std::pair<std::string, TensorView>>& tensors,
                                                  const SafetensorsSplit& split,
                                                  const std::map<std::string, std::string>& metadata = {});

}  // namespace rf::formats
