// Whole-pipeline views of a schedule (every stage's action list at once): the checker that proves a set of
// tables runs (§3.6/§3.7's constraints, matched transfers, no deadlock), and the text table behind
// `--dump-schedule`. Not here: building the lists (pipeline_schedule.h), timing them (pipeline_simulator.h).
#pragma once

#include <string>

#include "engine/pipeline/pipeline_schedule.h"

namespace rf::engine::pipeline {

// Throws rf::Error naming the stage, the action and the rule on the first violation of:
// 1. per stage, every (micro-batch, chunk) is forwarded exactly once and (unless forward-only) backwarded
//    exactly once, after its forward;
// 2. every forward's input is received before it (except stage 0 chunk 0, which reads data), every backward's
//    output gradient likewise (except the last stage's last chunk, which starts from the loss); every forward
//    output is sent after the forward (except from the last stage's last chunk), every input gradient after
//    the backward (except from stage 0 chunk 0), each exactly once; activations go to the next stage, grads
//    to the previous one;
// 3. the k-th send on a channel (sender, receiver, tensor kind) and the k-th receive on it name the same tensor:
//    the same micro-batch, and the same chunk, or one chunk on where the ring wraps (stage P-1 chunk v feeds
//    stage 0 chunk v+1; stage 0 chunk v's gradient goes to stage P-1 chunk v-1);
// 4. the tables run to the end when every communicate waits until each of its transfers is posted on both
//    sides (no deadlock), and then every forward of (mb, chunk) ends after the forward that feeds it (stage
//    p-1 same chunk, or stage P-1 chunk c-1 for stage 0), every backward after the backward it receives from;
// 5. param_gather of each chunk exactly once, before the chunk's first forward; unless forward-only,
//    enable_grad_sync of each chunk exactly once, after all but the last of its backwards and before that
//    one, and launch_grad_sync exactly once, after its last backward (forward-only lists have none).
void check_schedule_tables(const PipelineSchedule& schedule);

// The table as text: a legend line, then one column per stage and one row per time slot of the schedule
// replayed with unit forward and backward times and free transfers (so a row is what runs at the same time).
// A cell holds the slot's forward or backward ("F3.1": micro-batch 3, chunk 1) followed by the exchanges and
// markers the stage posts before its next one (">a3.1+<g0.0": send activation 3.1 and receive gradient 0.0
// together); a stage's actions before its first compute head its first row.
std::string format_schedule_table(const PipelineSchedule& schedule);

}  // namespace rf::engine::pipeline
