// The JSON side of Batch: equality of per-sample values and the merge rules for a batch's meta
// (verl's union_two_dict for union, the metrics gathering of DataProto.concat).
#pragma once

#include <span>
#include <string>

#include "rl/batch.h"

namespace rf::rl {

// Deep equality in which a NaN number equals a NaN (verl compares non-tensor columns with numpy's
// equal_nan). Numbers compare by value whatever their JSON kind (1 == 1.0), as Python's == does.
bool json_equal(const Json& a, const Json& b);

// Adds other's keys to `into`; a key in both must hold json_equal values, else the error names it.
void union_meta(Json& into, const Json& other);

// The meta of a concatenation: keys other than "metrics" must agree between the metas that have them
// (the error names the key); the "metrics" of each (an object, or a list of objects) are gathered into
// one object of lists, metric name -> values in order.
Json concat_meta(std::span<const Batch> parts);

}  // namespace rf::rl
