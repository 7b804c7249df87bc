// Writes a small file so that a crash leaves either the old contents or the new, never a mix:
// write a sibling temp file, fsync it, rename it over the target. IoError names the path.
#pragma once

#include <string>

namespace rf::formats {

void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace rf::formats
