// A cheap identity for a dataset folder, so runs on "the same" folder can be told apart when its files change.
#pragma once

#include <string>

namespace ampwb {

// FNV-1a 64 over the sorted relative paths and sizes of every regular file under `folder`, as 16 hex digits.
// Reads no file contents (a folder of a million images takes about a second to list); a renamed, added, removed or
// resized file changes it, an edit that keeps the size does not. Empty when the folder cannot be listed.
std::string dataset_fingerprint(const std::string& folder);

}  // namespace ampwb
