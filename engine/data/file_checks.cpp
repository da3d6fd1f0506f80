// Parallel file checks with results remembered per (path, size, modification time).
#include "data/file_checks.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/hash.h"
#include "core/parallel_for.h"
#include "data/cache_store.h"

namespace ampwb {
namespace {

constexpr const char* kCacheHeader = "ampwb-file-checks 2";  // bump when the checks change

struct Remembered {
  int64_t size = 0, mtime_ns = 0;
  ImageCheck check;
};
using RootResults = std::unordered_map<std::string, Remembered>;

// Results of the last few roots opened in this process (a GUI inspects, then trains the same folder).
std::mutex memory_mutex;
std::map<std::string, RootResults> memory;
constexpr size_t kRootsInMemory = 4;

std::string cache_file(const std::string& cache_dir, const std::string& root) {
  Hasher h;
  h.add(root);
  return (std::filesystem::path(cache_dir) / "file-checks" / (h.hex() + ".tsv")).string();
}

std::string clean(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

void load_from_disk(const std::string& path, const std::string& root, RootResults& out) {
  std::istringstream in(read_text_file(path));
  std::string line;
  if (!std::getline(in, line) || line != std::string(kCacheHeader) + "\t" + root) return;
  while (std::getline(in, line)) {
    // size mtime ok format width height reason relative-path
    std::string fields[8];
    size_t start = 0;
    int i = 0;
    for (; i < 7; ++i) {
      const size_t tab = line.find('\t', start);
      if (tab == std::string::npos) break;
      fields[i] = line.substr(start, tab - start);
      start = tab + 1;
    }
    if (i != 7) continue;
    fields[7] = line.substr(start);
    try {
      Remembered r;
      r.size = std::stoll(fields[0]);
      r.mtime_ns = std::stoll(fields[1]);
      r.check.ok = fields[2] == "1";
      r.check.format = static_cast<ImageFormat>(std::stoi(fields[3]));
      r.check.width = std::stoi(fields[4]);
      r.check.height = std::stoi(fields[5]);
      r.check.reason = fields[6];
      out[fields[7]] = r;
    } catch (const std::exception&) {
      continue;  // a damaged line: that file is simply checked again
    }
  }
}

void save_to_disk(const std::string& path, const std::string& root, const std::vector<FileToCheck>& files,
                  const std::vector<ImageCheck>& results, const std::vector<char>& cacheable) {
  std::string text = std::string(kCacheHeader) + "\t" + root + "\n";
  for (size_t i = 0; i < files.size(); ++i) {
    if (!cacheable[i] || files[i].relative.find('\n') != std::string::npos) continue;
    const ImageCheck& c = results[i];
    text += std::to_string(files[i].size) + '\t' + std::to_string(files[i].mtime_ns) + '\t' + (c.ok ? "1" : "0") +
            '\t' + std::to_string(static_cast<int>(c.format)) + '\t' + std::to_string(c.width) + '\t' +
            std::to_string(c.height) + '\t' + clean(c.reason) + '\t' + files[i].relative + '\n';
  }
  write_cache_file(path, text);
}

}  // namespace

void clear_file_check_memory() {
  std::lock_guard<std::mutex> lock(memory_mutex);
  memory.clear();
}

std::vector<ImageCheck> check_files(const std::string& root, const std::vector<FileToCheck>& files,
                                    const std::string& cache_dir, int threads, FileCheckStats* stats) {
  std::vector<ImageCheck> results(files.size());
  std::vector<char> done(files.size(), 0), cacheable(files.size(), 1);
  RootResults known;
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    if (auto it = memory.find(root); it != memory.end()) known = it->second;
  }
  if (known.empty() && !cache_dir.empty()) load_from_disk(cache_file(cache_dir, root), root, known);

  std::vector<size_t> todo;
  for (size_t i = 0; i < files.size(); ++i) {
    auto it = known.find(files[i].relative);
    if (it != known.end() && it->second.size == files[i].size && it->second.mtime_ns == files[i].mtime_ns) {
      results[i] = it->second.check;
      done[i] = 1;
    } else {
      todo.push_back(i);
    }
  }

  // At most a thread per 4 files: starting a thread costs more than checking a few small files.
  const int n_threads = static_cast<int>(std::min<size_t>(std::max(1, threads), std::max<size_t>(1, todo.size() / 4)));
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(n_threads));  // one per worker, reused
  parallel_for(todo.size(), n_threads, [&](size_t k, int worker) {
    const size_t i = todo[k];
    std::vector<uint8_t>& bytes = buffers[static_cast<size_t>(worker)];
    std::string reason;
    if (!read_file(files[i].path, bytes, reason)) {
      results[i].ok = false;
      results[i].reason = reason;
      cacheable[i] = 0;  // permissions can change without touching size or time
      return;
    }
    results[i] = check_image(bytes.data(), bytes.size());
  });

  if (stats) {
    stats->checked = static_cast<int64_t>(todo.size());
    stats->reused = static_cast<int64_t>(files.size() - todo.size());
  }

  RootResults now;
  now.reserve(files.size());
  for (size_t i = 0; i < files.size(); ++i)
    if (cacheable[i]) now[files[i].relative] = Remembered{files[i].size, files[i].mtime_ns, results[i]};
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    if (memory.size() >= kRootsInMemory && !memory.count(root)) memory.erase(memory.begin());
    memory[root] = std::move(now);
  }
  if (!todo.empty() && !cache_dir.empty()) save_to_disk(cache_file(cache_dir, root), root, files, results, cacheable);
  return results;
}

}  // namespace ampwb
