// The command line the kernel benchmarks share: `[--threads N]`.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace rf::bench {

// The --threads value (0: one per core), or -1 on a malformed command line.
inline int parse_threads(int argc, char** argv) {
  if (argc == 1) return 0;
  if (argc == 3 && std::strcmp(argv[1], "--threads") == 0) return std::max(0, std::atoi(argv[2]));
  return -1;
}

}  // namespace rf::bench
