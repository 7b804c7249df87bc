// The few POSIX file operations a crash-safe checkpoint needs, each throwing IoError naming the path:
// write a whole file and fsync it, fsync a folder (so the names created in it survive a crash),
// rename, and swap two folders atomically. Nothing here decides what is written where: that is
// CheckpointWriter's protocol.
#pragma once

#include <string>
#include <string_view>

namespace rf::checkpoint {

// Creates or truncates `path`, writes `bytes`, fsyncs and closes it.
void write_file_synced(const std::string& path, std::string_view bytes);
void sync_folder(const std::string& path);
// rename(2): atomic replacement of a file, or of a folder by a new name.
void rename_path(const std::string& from, const std::string& to);
// Replaces the folder `to` by the folder `from` with no moment at which neither exists: the two are
// swapped atomically (renameat2 RENAME_EXCHANGE), after which `from` holds the old contents. On a
// file system without the swap (some network and FUSE file systems), `to` is first moved aside to
// `aside`, so a crash between the two renames leaves `to` absent but its contents intact at
// `aside`; `from` is then `aside`. Returns the path now holding the old contents.
std::string replace_folder(const std::string& from, const std::string& to, const std::string& aside);
std::string read_text_file(const std::string& path);

}  // namespace rf::checkpoint
