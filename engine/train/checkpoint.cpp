// Checkpoint files.
#include "train/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"

namespace ampwb {
namespace {
constexpr char kMagic[8] = {'A', 'M', 'P', 'W', 'B', 'C', 'K', '2'};    // with checksums
constexpr char kMagicV1[8] = {'A', 'M', 'P', 'W', 'B', 'C', 'K', '1'};  // without: still read

// The checked header of the checkpoint open in `in`, which is left at the first tensor's bytes; whether the file
// carries checksums in *checked.
nlohmann::json read_header(std::istream& in, const std::string& path, bool* checked) {
  char magic[8];
  uint64_t length = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  *checked = std::memcmp(magic, kMagic, sizeof kMagic) == 0;
  if (!in || (!*checked && std::memcmp(magic, kMagicV1, sizeof kMagicV1) != 0) || length > (uint64_t{1} << 30))
    throw Error("'" + path + "' is not an AMP Workbench checkpoint");
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  uint32_t header_crc = 0;
  if (*checked) in.read(reinterpret_cast<char*>(&header_crc), sizeof header_crc);
  if (!in) throw Error("checkpoint '" + path + "' is truncated (in its header)");
  if (*checked && crc32c(text.data(), text.size()) != header_crc)
    throw Error("checkpoint '" + path + "' is damaged: its header fails its checksum");
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error("checkpoint '" + path + "' has a damaged header: " + e.what());
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

  AtomicFile file(path);  // removes its temporary when anything below throws
  file.write(kMagic, sizeof kMagic);
  file.write(&length, sizeof length);
  file.write(text.data(), text.size());
  file.write(&header_crc, sizeof header_crc);
  for (const auto& [name, t] : checkpoint.tensors) file.write(t.data(), t.nbytes());
  file.flush();
  try {
    load_checkpoint(file.temporary_path());  // read back and checked before anything older is given up
  } catch (const Error& e) {
    throw Error(std::string("the checkpoint just written does not read back: ") + e.what());
  }
  // The last good checkpoint stays as PATH.prev until this one is in place: resume falls back to it.
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::filesystem::rename(path, previous_checkpoint_path(path), ec);
    if (ec)
      throw Error("cannot keep the previous checkpoint as '" + previous_checkpoint_path(path) + "': " + ec.message());
  }
  file.commit();
}

nlohmann::json load_checkpoint_meta(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open checkpoint '" + path + "'");
  bool checked = false;
  nlohmann::json meta = read_header(in, path, &checked);
  meta.erase("tensors");
  return meta;
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open checkpoint '" + path + "'");
  bool checked = false;
  Checkpoint c;
  c.meta = read_header(in, path, &checked);
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
