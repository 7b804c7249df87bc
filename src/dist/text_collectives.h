// Collectives over short texts (paths, JSON documents) rather than tensors: what a rank-0-coordinated
// protocol such as the sharded checkpoint's commit needs. Built on ProcessGroup's tensor collectives,
// so they work on every implementation, the group of one included.
#pragma once

#include <string>
#include <vector>

#include "dist/process_group.h"

namespace rf::dist {

// Every rank ends with `root`'s `text`.
std::string broadcast_text(ProcessGroup& group, const std::string& text, int root);
// Every rank ends with every rank's `text`, in rank order.
std::vector<std::string> all_gather_texts(ProcessGroup& group, const std::string& text);

}  // namespace rf::dist
