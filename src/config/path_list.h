// PathList: a config value that names files as one path or a list of them (verl's data.train_files:
// `train_files: data/train.jsonl` and `train_files: [a.jsonl, b.jsonl]` mean the same reading). The
// binder (bind.h) reads either spelling and writes the list; an empty list is the owner's to refuse.
#pragma once

#include <string>
#include <vector>

namespace rf::config {

struct PathList {
  std::vector<std::string> paths;

  bool operator==(const PathList&) const = default;
};

}  // namespace rf::config
