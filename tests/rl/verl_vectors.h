// The data-driven harness over verl's reference vectors (shared/reference/verl_algos.json; the format
// is in shared/reference/README.md). Each case names the verl function that produced it; the harness
// dispatches on that name to the rl layer (directly, or through the advantage-estimator and
// policy-loss registries by their verl_function), runs every implementation we have of it (an
// estimator and its loop twin, agg_loss and its loop twin) and compares each output elementwise,
// masked positions included, with |got - ref| <= atol + rtol·|ref| from the case's tolerance.
// There is no per-case code, so a file of the same format with other shapes runs unchanged.
// verl_case_reader.h reads a case; verl_functions.h maps verl's function names to our calls.
//
// A case fails when: its function is unknown; an input or config key is not understood; an output is
// missing, extra, of another shape or out of tolerance; an error case does not throw rf::Error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace rf::testing {

// $RLFORGE_VERL_VECTORS when set, else the shared file under RF_REFERENCE_DIR.
std::string verl_vectors_path();

struct ReferenceVectors {
  nlohmann::json header;  // every top-level field but "cases"
  std::vector<nlohmann::json> cases;
  DType float_dtype = DType::f32;  // from "float_dtype": the dtype of every float input tensor
};

// Throws rf::IoError naming the file and what is wrong with it.
ReferenceVectors load_verl_vectors(const std::string& path);

// Runs one case under GoogleTest assertions (see the file comment for what fails it).
void run_verl_case(const nlohmann::json& test_case, DType float_dtype);

}  // namespace rf::testing
