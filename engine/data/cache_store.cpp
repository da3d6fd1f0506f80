// Cache folders, and cache files read whole and replaced whole.
#include "data/cache_store.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace ampwb {
namespace fs = std::filesystem;

std::string resolve_cache_dir(const std::string& option) {
  if (option == "-") return "";
  if (!option.empty()) return option;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "ampwb").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "ampwb").string();
  return "";
}

bool write_cache_file(const std::string& path, const std::string& content) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;
  try {
    write_file_atomically(path, content);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ampwb
