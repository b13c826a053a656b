// Implements: core/safetensors.h — the Hugging Face safetensors format (8-byte LE header length,
// JSON header, raw LE tensor bytes) with the same strictness as the reference Rust reader: the header
// is bounded, every entry is checked, and the byte ranges must tile the data region exactly (sorted by
// offset, no gap, no overlap) before a single tensor byte is read. Writes are atomic (tmp+fsync+rename).
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_checks.h"

namespace aobench {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

// The reference implementation refuses headers above 100 MB; so do we (a corrupt length field would
// otherwise make us allocate gigabytes).
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

const std::string kHint =
    "the file is corrupt or not a safetensors file; re-create it (checkpoints are "
    "rewritten by the next save, HF weights can be re-downloaded)";

[[noreturn]] void fail(const std::string& path, const std::string& msg, const std::string& hint = kHint) {
  throw CheckpointError("safetensors '" + path + "': " + msg, hint);
}

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  int64_t size;
};

const std::vector<DtypeInfo>& dtypes() {
  static const std::vector<DtypeInfo> table = {{"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4},
                                               {"F16", torch::kFloat16, 2}, {"BF16", torch::kBFloat16, 2},
                                               {"I64", torch::kInt64, 8},   {"I32", torch::kInt32, 4},
                                               {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},
                                               {"U8", torch::kUInt8, 1},    {"BOOL", torch::kBool, 1}};
  return table;
}

std::string supported_names() {
  std::string s;
  for (const auto& d : dtypes()) s += (s.empty() ? "" : " ") + std::string(d.name);
  return s;
}

// Everything we need from one header entry before reading bytes.
struct Entry {
  std::string name;
  DtypeInfo dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the start of the data region
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j) {
  const std::string where = "tensor '" + name + "': ";
  if (!j.is_object()) fail(path, where + "header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) fail(path, where + "header entry lacks \"" + key + "\"");
  Entry e;
  e.name = name;
  const auto& jd = j.at("dtype");
  if (!jd.is_string()) fail(path, where + "\"dtype\" is not a string");
  const std::string dname = jd.get<std::string>();
  auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const DtypeInfo& d) { return dname == d.name; });
  if (it == dtypes().end())
    fail(path, where + "unsupported dtype \"" + dname + "\"", "supported dtypes: " + supported_names());
  e.dtype = *it;

  const auto& js = j.at("shape");
  if (!js.is_array()) fail(path, where + "\"shape\" is not an array");
  uint64_t numel = 1;
  for (const auto& d : js) {
    if (!d.is_number_unsigned()) fail(path, where + "shape entry " + d.dump() + " is not a non-negative integer");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v))
      fail(path, where + "shape " + js.dump() + " overflows");
    numel *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const auto& jo = j.at("data_offsets");
  if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
    fail(path, where + "\"data_offsets\" must be [begin, end] non-negative integers, got " + jo.dump());
  e.begin = jo[0].get<uint64_t>();
  e.end = jo[1].get<uint64_t>();
  if (e.end < e.begin) fail(path, where + "data_offsets " + jo.dump() + " end before begin");
  const uint64_t esize = static_cast<uint64_t>(e.dtype.size);
  if (numel > std::numeric_limits<uint64_t>::max() / esize) fail(path, where + "shape " + js.dump() + " overflows");
  if (numel * esize != e.end - e.begin)
    fail(path, where + "shape " + js.dump() + " of " + dname + " needs " + std::to_string(numel * esize) +
                   " bytes but data_offsets " + jo.dump() + " span " + std::to_string(e.end - e.begin));
  return e;
}

// Writes through a callback to "<path>.tmp", fsyncs, renames over <path> and fsyncs the directory, so a
// crash leaves either the old file or the new one, never a torn one.
using WriteFn = std::function<void(const void*, size_t)>;
void atomic_write(const std::string& path, const std::function<void(const WriteFn&)>& body, bool replace = true) {
  // Per process: writers of one path never share (and clobber) a temporary file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const std::string hint = "check that the directory exists, is writable and the disk is not full";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw CheckpointError("cannot create '" + tmp + "': " + std::strerror(errno), hint);
  auto write_all = [&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const std::string err = std::strerror(errno);
        ::close(fd);
        ::unlink(tmp.c_str());
        throw CheckpointError("write to '" + tmp + "' failed: " + err, hint);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  };
  try {
    body(write_all);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw CheckpointError("fsync/close of '" + tmp + "' failed: " + err, hint);
  }
  if (!replace) {  // link(2) fails with EEXIST instead of replacing: no check-then-rename race
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      if (err == EEXIST)
        throw ConfigError("'" + path + "' exists (another process wrote it meanwhile): aobench never overwrites it",
                          "write to another file");
      throw CheckpointError("link '" + tmp + "' -> '" + path + "' failed: " + std::strerror(err), hint);
    }
    ::unlink(tmp.c_str());
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw CheckpointError("rename '" + tmp + "' -> '" + path + "' failed: " + err, hint);
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // directory fsync makes the rename durable; some filesystems refuse it, which is harmless
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open file", "check the path; checkpoints live in <run>/checkpoints/step_<N>/");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8)
    fail(path, "file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length");
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_len) + " exceeds the 100 MB limit");
  if (header_len > file_size - 8)
    fail(path, "header length " + std::to_string(header_len) + " exceeds the file size " + std::to_string(file_size));
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path, "short read of the header");

  // A real header is 3 levels deep; a deeper one is refused while parsing, before any message dumps it
  // (nlohmann's dump() recurses and would overflow the stack on a 60,000-deep value). A tensor name (or
  // an entry's field) given twice is refused too: nlohmann would keep the last silently, and which of
  // the two a reader takes is not fixed by the format.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header, json_checks(16));
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  } catch (const JsonCheckFailure& f) {
    if (f.kind == JsonCheckFailure::kDuplicateKey)
      fail(path, "duplicate key '" + f.path + "' in the header (a tensor name or an entry's field given twice)",
           "safetensors writers never repeat a key: the file was edited or damaged; re-create it");
    fail(path, "header JSON is nested deeper than 16 levels");
  }
  if (!j.is_object()) fail(path, "header JSON is not an object");

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) fail(path, "\"__metadata__\" is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) fail(path, "metadata '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, it.key(), it.value()));
  }

  // Byte ranges must tile [0, data_size) exactly, as the reference reader demands.
  const uint64_t data_size = file_size - 8 - header_len;
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  for (const Entry* e : by_offset) {
    if (e->begin < cursor)
      fail(path, "tensor '" + e->name + "': data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                     "] overlap the previous tensor (ends at " + std::to_string(cursor) + ")");
    if (e->begin > cursor)
      fail(path, "tensor '" + e->name + "': gap before data_offsets begin " + std::to_string(e->begin) +
                     " (previous tensor ends at " + std::to_string(cursor) + ")");
    if (e->end > data_size)
      fail(path, "tensor '" + e->name + "': data_offsets end " + std::to_string(e->end) +
                     " is beyond the data region of " + std::to_string(data_size) + " bytes (file truncated?)");
    cursor = e->end;
  }
  if (cursor != data_size)
    fail(path, "tensors cover " + std::to_string(cursor) + " bytes but the data region has " +
                   std::to_string(data_size) + " (trailing bytes)");

  // All ranges are validated: now read each tensor straight into its own storage.
  const uint64_t data_start = 8 + header_len;
  for (const Entry& e : entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype.type));
    const uint64_t n = e.end - e.begin;
    if (n > 0) {
      in.seekg(static_cast<std::streamoff>(data_start + e.begin));
      in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(n));
      if (!in) fail(path, "tensor '" + e.name + "': short read of " + std::to_string(n) + " bytes");
    }
    if (e.dtype.type == torch::kBool && n > 0 && t.view(torch::kUInt8).max().item<int64_t>() > 1)
      fail(path, "tensor '" + e.name + "': BOOL bytes other than 0/1");
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Tensors in name order (TensorMap is sorted), each contiguous on CPU in its own dtype.
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t0] : tensors) {
    if (name == "__metadata__") fail(path, "a tensor may not be called \"__metadata__\"", "rename the tensor");
    if (!t0.defined()) fail(path, "tensor '" + name + "': undefined tensor", "skip undefined tensors when saving");
    const auto type = t0.scalar_type();  // not captured directly: C++17 lambdas cannot capture bindings
    auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const DtypeInfo& d) { return d.type == type; });
    if (it == dtypes().end())
      fail(path, "tensor '" + name + "': cannot store dtype " + std::string(c10::toString(t0.scalar_type())),
           "supported dtypes: " + supported_names());
    torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
    const uint64_t n = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(it->size);
    header[name] = {{"dtype", it->name}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(t);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data region starts 8-byte aligned (as HF does)
  const uint64_t header_len = h.size();
  atomic_write(path, [&](const WriteFn& write) {
    write(&header_len, 8);
    write(h.data(), h.size());
    for (const auto& t : data)
      if (t.numel() > 0) write(t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size()));
  });
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  atomic_write(path, [&](const WriteFn& write) { write(bytes.data(), bytes.size()); });
}

void write_new_file_atomic(const std::string& path, const std::string& bytes) {
  atomic_write(
      path, [&](const WriteFn& write) { write(bytes.data(), bytes.size()); }, /*replace=*/false);
}

}  // namespace aobench
