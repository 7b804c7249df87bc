#include "dist/parallel_context.h"

#include <string>

#include "core/error.h"

namespace rf::dist {

ParallelContext::ParallelContext(RankLayout layout, std::unique_ptr<ProcessGroup> role, Groups groups,
                                 bool sequence_parallel, CpCommType cp_comm_type)
    : layout_(std::move(layout)), role_(std::move(role)), groups_(std::move(groups)),
      sequence_parallel_(sequence_parallel), cp_comm_type_(cp_comm_type) {}

ParallelContext ParallelContext::single_process() {
  SingleProcessGroup alone("role");
  return create(RankLayout(ParallelDims{}), alone, false);
}

ParallelContext ParallelContext::create(const RankLayout& layout, ProcessGroup& role, bool sequence_parallel,
                                        CpCommType cp_comm_type) {
  RF_CHECK(layout.world_size() == role.size(), "ParallelContext: the layout is for {} ranks, group '{}' has {}",
           layout.world_size(), role.name(), role.size());
  // Every rank walks the kinds in the same order: each split is a collective over `role`.
  std::unique_ptr<ProcessGroup> own_role = role.split(0, role.rank(), "role");
  Groups groups;
  for (GroupKind kind : kAllGroupKinds) {
    const GroupMembership m = layout.membership(kind, role.rank());
    groups[size_t(kind)] = role.split(m.color, m.index, std::string(group_name(kind)));
  }
  return ParallelContext(layout, std::move(own_role), std::move(groups), sequence_parallel, cp_comm_type);
}

ProcessGroup& ParallelContext::group(GroupKind kind) const {
  RF_CHECK(in_group(kind), "{} is in no {} group (embedding groups hold the first and last pipeline stage only)",
           layout_.label(role_->rank()), group_name(kind));
  return *groups_[size_t(kind)];
}

}  // namespace rf::dist
