// Reading a whole input file (a YAML config, a tokenizer.json, a model's config.json) into memory with
// a size cap, so that a wrong path fails at once with the file's name instead of exhausting memory:
// `--config /dev/zero` is refused as a device, a multi-gigabyte file by its size, and a pipe
// (`--config <(...)`) is read only up to the cap. Every kind of file has its own cap, next to its reader.
// Not here: streaming large data (JSONL rows are read line by line, data/jsonl_dataset.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rf::core {

// IoError naming `path` when it is missing, a folder, a device or socket (anything but a regular file
// or a pipe), unreadable, or larger than `max_bytes`. `what` names the kind of file in the size error
// ("a YAML config").
std::string read_input_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// "16 MiB", "1.5 GiB", "300 bytes": a byte count as a person reads it in an error message.
std::string describe_bytes(uint64_t num_bytes);

}  // namespace rf::core
