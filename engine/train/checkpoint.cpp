// Checkpoint files.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/crc32c.h"
#include "core/error.h"

namespace ampwb {
namespace {
constexpr char kMagic[8] = {'A', 'M', 'P', 'W', 'B', 'C', 'K', '2'};    // with checksums
constexpr char kMagicV1[8] = {'A', 'M', 'P', 'W', 'B', 'C', 'K', '1'};  // without: still read

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write checkpoint '" + path + "': " + std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}
}  // namespace

const Tensor& Checkpoint::tensor(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw Error("the checkpoint holds no tensor '" + name + "' (a checkpoint of another model?)");
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  nlohmann::json header = checkpoint.meta;
  nlohmann::json entries = nlohmann::json::array();
  uint64_t offset = 0;
  for (const auto& [name, t] : checkpoint.tensors) {
    entries.push_back({{"name", name},
                       {"dtype", dtype_name(t.dtype())},
                       {"shape", t.shape()},
                       {"layout", layout_name(t.layout())},
                       {"offset", offset},
                       {"bytes", t.nbytes()},
                       {"crc32c", crc32c(t.data(), t.nbytes())}});
    offset += t.nbytes();
  }
  header["tensors"] = entries;
  const std::string text = header.dump();
  const uint64_t length = text.size();
  const uint32_t header_crc = crc32c(text.data(), text.size());

  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create checkpoint '" + temporary + "': " + std::strerror(errno));
  try {
    write_all(fd, kMagic, sizeof kMagic, temporary);
    write_all(fd, &length, sizeof length, temporary);
    write_all(fd, text.data(), text.size(), temporary);
    write_all(fd, &header_crc, sizeof header_crc, temporary);
    for (const auto& [name, t] : checkpoint.tensors) write_all(fd, t.data(), t.nbytes(), temporary);
    if (::fsync(fd) != 0) throw Error("cannot flush checkpoint '" + temporary + "': " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  ::close(fd);
  try {
    load_checkpoint(temporary);  // read back and checked before anything older is given up
  } catch (const Error& e) {
    ::unlink(temporary.c_str());
    throw Error(std::string("the checkpoint just written does not read back: ") + e.what());
  }
  // The last good checkpoint stays as PATH.prev until this one is in place: resume falls back to it.
  if (std::filesystem::exists(path)) std::filesystem::rename(path, previous_checkpoint_path(path));
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw Error("cannot move checkpoint into place at '" + path + "': " + why);
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open checkpoint '" + path + "'");
  char magic[8];
  uint64_t length = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  const bool checked = std::memcmp(magic, kMagic, sizeof kMagic) == 0;
  if (!in || (!checked && std::memcmp(magic, kMagicV1, sizeof kMagicV1) != 0) || length > (uint64_t{1} << 30))
    throw Error("'" + path + "' is not an AMP Workbench checkpoint");
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  uint32_t header_crc = 0;
  if (checked) in.read(reinterpret_cast<char*>(&header_crc), sizeof header_crc);
  if (!in) throw Error("checkpoint '" + path + "' is truncated (in its header)");
  if (checked && crc32c(text.data(), text.size()) != header_crc)
    throw Error("checkpoint '" + path + "' is damaged: its header fails its checksum");
  Checkpoint c;
  try {
    c.meta = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error("checkpoint '" + path + "' has a damaged header: " + e.what());
  }
  const std::streamoff data_start = in.tellg();
  for (const auto& entry : c.meta.at("tensors")) {
    const std::string name = entry.at("name").get<std::string>();
    const auto dtype = parse_dtype(entry.at("dtype").get<std::string>());
    if (!dtype) throw Error("checkpoint '" + path + "': tensor " + name + " has an unknown dtype");
    const Layout layout = entry.value("layout", std::string("nchw")) == "nhwc" ? Layout::NHWC : Layout::NCHW;
    Tensor t = Tensor::empty(entry.at("shape").get<Shape>(), *dtype, layout);
    if (t.nbytes() != entry.at("bytes").get<size_t>())
      throw Error("checkpoint '" + path + "': tensor " + name + " has the wrong size");
    in.seekg(data_start + static_cast<std::streamoff>(entry.at("offset").get<uint64_t>()));
    in.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
    if (!in) throw Error("checkpoint '" + path + "' is truncated (tensor " + name + ")");
    if (checked && crc32c(t.data(), t.nbytes()) != entry.at("crc32c").get<uint32_t>())
      throw Error("checkpoint '" + path + "' is damaged: tensor " + name + " fails its checksum");
    c.tensors.emplace_back(name, std::move(t));
  }
  c.meta.erase("tensors");
  return c;
}

std::string previous_checkpoint_path(const std::string& path) { return path + ".prev"; }

Checkpoint load_checkpoint_or_previous(const std::string& path, std::string* note) {
  try {
    return load_checkpoint(path);
  } catch (const Error& e) {
    const std::string previous = previous_checkpoint_path(path);
    if (!std::filesystem::exists(previous)) throw;
    Checkpoint c = load_checkpoint(previous);  // throws in turn when that one is damaged too
    if (note) *note = std::string(e.what()) + "; resuming from the previous checkpoint '" + previous + "' instead";
    return c;
  }
}

}  // namespace ampwb
