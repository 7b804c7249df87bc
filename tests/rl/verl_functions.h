// The rl layer's implementations of each verl function the reference vectors call, keyed by the
// function's fully qualified name: a few utilities by name here, and every advantage estimator and
// policy loss through its registry entry's verl_function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "verl_case_reader.h"

namespace rf::testing {

// The implementations of `function` with the case's inputs and config read from `reader`, or nullopt
// when the rl layer has none. `registry_name` is the case's, checked against the registry entry.
std::optional<std::vector<Implementation>> implementations_of(const std::string& function, CaseReader& reader,
                                                              const std::string& registry_name);

}  // namespace rf::testing
