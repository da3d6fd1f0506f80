// A cheap identity for a dataset folder, so runs on "the same" folder can be told apart when its files change.
#pragma once

#include <string>

namespace ampwb {

// FNV-1a 64 (core/hash.h) over the sorted relative paths, each with a terminating zero byte, and sizes (8 bytes,
// little-endian) of every regular file under `folder`, as 16 hex digits. Stored with every run
// (runs.dataset_fingerprint), so this definition is frozen.
// Reads no file contents (a folder of a million images takes about a second to list); a renamed, added, removed or
// resized file changes it, an edit that keeps the size does not. Empty when the folder cannot be listed.
std::string dataset_fingerprint(const std::string& folder);

}  // namespace ampwb
