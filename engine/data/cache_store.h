// Small helpers shared by the dataset caches: where cache files live and how they are read and written. The caches'
// keys come from the engine's hash (core/hash.h, included here for them).
#pragma once

#include <string>

#include "core/hash.h"

namespace ampwb {

// The cache folder for an option value: "" = $XDG_CACHE_HOME/ampwb, else $HOME/.cache/ampwb; "-" = none ("").
std::string resolve_cache_dir(const std::string& option);

// Replaces the cache file whole (core/atomic_file.h), creating its folder. Returns false (and leaves the old file, if
// any) on any error: a cache that cannot be written is not a reason to stop.
bool write_cache_file(const std::string& path, const std::string& content);

// The whole file, or "" when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace ampwb
