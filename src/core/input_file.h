// Reading a whole input file (a YAML config, a tokenizer.json, a model's config.json) into memory with
// a size cap, so that a wrong path fails at once with the file's name instead of exhausting memory:
// `--config /dev/zero` is refused as a device, a multi-gigabyte file by its size, and a pipe
// (`--config <(...)`) is read only up to the cap. Every kind of file has its own cap, next to its reader.
// Large data (JSONL rows) is read line by line instead, each line under its own cap.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace rf::core {

// IoError naming `path` when it is missing, a folder, a device or socket (anything but a regular file
// or a pipe), unreadable, or larger than `max_bytes`. `what` names the kind of file in the errors
// ("a YAML config").
std::string read_input_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// `path` opened for reading, after the same checks of what it is as read_input_file.
std::ifstream open_input_file(const std::string& path, std::string_view what);
// The next line of `in` into `line` (without the '\n'); false at the end of the input. A line longer
// than `max_bytes` is an IoError naming `path` and `line_number`, and so is a read error.
bool read_line(std::istream& in, std::string& line, uint64_t max_bytes, const std::string& path, int64_t line_number);

// "16 MiB", "1.5 GiB", "300 bytes": a byte count as a person reads it in an error message.
std::string describe_bytes(uint64_t num_bytes);

}  // namespace rf::core
