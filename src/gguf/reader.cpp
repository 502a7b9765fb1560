// GGUF parsing: the file is hostile until proven otherwise. Every count and length is checked
// against the bytes that remain before anything is allocated for it, so a header claiming 2^60
// strings fails at once instead of exhausting memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/zero_pages.h"
#include "gguf/gguf.h"
#include "gguf/types.h"

namespace invar {

namespace {

constexpr uint32_t kMaxArrayDepth = 8;  // nested arrays deeper than this are refused
constexpr uint64_t kMaxNameBytes = 63;  // ggml's GGML_MAX_NAME − 1
constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS

[[noreturn]] void fail(uint64_t offset, const std::string& msg) {
  throw GgufError("gguf: offset " + std::to_string(offset) + ": " + msg);
}

// Bounded little-endian reader over the file image.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& field) const {
    if (n > remaining())
      fail(pos_, field + ": needs " + std::to_string(n) + " bytes, only " +
                     std::to_string(remaining()) + " left in the file");
  }
  template <typename T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, base_ + pos_,
                sizeof(T));  // the format is little-endian, like every host we build for
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& field) {
    const uint64_t at = pos_;
    const uint64_t n = read<uint64_t>(field + " length");
    if (n > remaining())
      fail(at, field + ": string length " + std::to_string(n) + " exceeds the " +
                   std::to_string(remaining()) + " bytes left in the file");
    std::string s(reinterpret_cast<const char*>(base_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }
  // Element i of the string array `field`: its name is built only for an error message (a
  // vocabulary has hundreds of thousands of elements).
  std::string read_string_element(const std::string& field, uint64_t i) {
    uint64_t n = 0;
    if (remaining() >= sizeof n) std::memcpy(&n, base_ + pos_, sizeof n);
    if (remaining() < sizeof n || n > remaining() - sizeof n)
      return read_string(field + "[" + std::to_string(i) + "]");  // fails with the message
    pos_ += sizeof n;
    std::string s(reinterpret_cast<const char*>(base_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }
  void skip(uint64_t n, const std::string& field) {
    need(n, field);
    pos_ += n;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Bytes of one scalar of a fixed-size metadata type; 0 for STRING/ARRAY; -1 if the id is unknown.
int scalar_bytes(uint32_t t) {
  switch (static_cast<GgufType>(t)) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    case GgufType::STRING:
    case GgufType::ARRAY:
      return 0;
  }
  return -1;
}

// Reads one fixed-size scalar (the type is known valid and not STRING/ARRAY).
void read_scalar(Cursor& c, GgufType t, const std::string& field, GgufValue& v) {
  switch (t) {
    case GgufType::UINT8:
      v.u64 = c.read<uint8_t>(field);
      break;
    case GgufType::INT8:
      v.i64 = c.read<int8_t>(field);
      break;
    case GgufType::UINT16:
      v.u64 = c.read<uint16_t>(field);
      break;
    case GgufType::INT16:
      v.i64 = c.read<int16_t>(field);
      break;
    case GgufType::UINT32:
      v.u64 = c.read<uint32_t>(field);
      break;
    case GgufType::INT32:
      v.i64 = c.read<int32_t>(field);
      break;
    case GgufType::UINT64:
      v.u64 = c.read<uint64_t>(field);
      break;
    case GgufType::INT64:
      v.i64 = c.read<int64_t>(field);
      break;
    case GgufType::FLOAT32:
      v.f64 = c.read<float>(field);
      break;
    case GgufType::FLOAT64:
      v.f64 = c.read<double>(field);
      break;
    case GgufType::BOOL:
      v.u64 = c.read<uint8_t>(field) != 0;
      break;
    case GgufType::STRING:
    case GgufType::ARRAY:
      INVAR_CHECK(false, "not a scalar");
  }
}

uint32_t read_type_id(Cursor& c, const std::string& field) {
  const uint64_t at = c.pos();
  const uint32_t t = c.read<uint32_t>(field);
  if (scalar_bytes(t) < 0) fail(at, field + ": unknown metadata value type " + std::to_string(t));
  return t;
}

// Skips a nested array's payload without decoding it (its element count is kept by the caller).
void skip_array(Cursor& c, const std::string& field, uint32_t depth) {
  if (depth > kMaxArrayDepth)
    fail(c.pos(), field + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  const uint32_t et = read_type_id(c, field + " element type");
  const uint64_t at = c.pos();
  const uint64_t n = c.read<uint64_t>(field + " element count");
  const int eb = scalar_bytes(et);
  if (eb > 0) {
    if (n > c.remaining() / uint64_t(eb))
      fail(at, field + ": " + std::to_string(n) + " elements do not fit in the file");
    c.skip(n * uint64_t(eb), field);
    return;
  }
  // Strings need ≥ 8 bytes each, nested arrays ≥ 12: a hostile count runs out of bytes quickly.
  if (n > c.remaining() / 8)
    fail(at, field + ": " + std::to_string(n) + " elements do not fit in the file");
  for (uint64_t i = 0; i < n; ++i) {
    if (static_cast<GgufType>(et) == GgufType::STRING) {
      const uint64_t sat = c.pos();
      const uint64_t len = c.read<uint64_t>(field + " string length");
      if (len > c.remaining())
        fail(sat, field + ": string length " + std::to_string(len) + " exceeds the file");
      c.skip(len, field);
    } else {
      skip_array(c, field, depth + 1);
    }
  }
}

GgufValue read_value(Cursor& c, GgufType t, const std::string& field) {
  GgufValue v;
  v.type = t;
  if (t == GgufType::STRING) {
    v.str = c.read_string(field);
    return v;
  }
  if (t != GgufType::ARRAY) {
    read_scalar(c, t, field, v);
    return v;
  }
  const auto et = static_cast<GgufType>(read_type_id(c, field + " element type"));
  v.elem_type = et;
  const uint64_t at = c.pos();
  const uint64_t n = c.read<uint64_t>(field + " element count");
  v.arr_len = n;
  const int eb = scalar_bytes(uint32_t(et));
  const uint64_t min_bytes = eb > 0 ? uint64_t(eb) : (et == GgufType::STRING ? 8 : 12);
  if (n > c.remaining() / min_bytes)
    fail(at, field + ": array of " + std::to_string(n) + " " + std::string(gguf_type_name(et)) +
                 " elements does not fit in the " + std::to_string(c.remaining()) +
                 " bytes left in the file");
  if (et == GgufType::ARRAY) {
    for (uint64_t i = 0; i < n; ++i) skip_array(c, field, 2);
    return v;
  }
  if (et == GgufType::STRING) {
    v.arr_str.reserve(size_t(n));
    for (uint64_t i = 0; i < n; ++i) v.arr_str.push_back(c.read_string_element(field, i));
    return v;
  }
  if (gguf_type_is_float(et)) {
    v.arr_float.reserve(size_t(n));
  } else {
    v.arr_int.reserve(size_t(n));
  }
  GgufValue e;
  for (uint64_t i = 0; i < n; ++i) {
    read_scalar(c, et, field, e);
    if (gguf_type_is_float(et)) {
      v.arr_float.push_back(e.f64);
    } else {
      // Unsigned 64-bit elements above INT64_MAX wrap; no key invar reads can hold such values.
      v.arr_int.push_back(gguf_type_is_signed(et) ? e.i64 : int64_t(e.u64));
    }
  }
  return v;
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

FileIdentity identity_from_stat(const struct stat& st) {
  FileIdentity id;
  id.dev = uint64_t(st.st_dev);
  id.ino = uint64_t(st.st_ino);
  id.size = uint64_t(st.st_size);
  id.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

}  // namespace

std::optional<FileIdentity> file_identity_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return identity_from_stat(st);
}

namespace {

// The file's bytes copied into a private anonymous region of 2 MiB pages (huge_pages_alloc).
// Returns the region; its length in *bytes_out.
void* huge_page_copy(const void* file, size_t size, size_t* bytes_out) {
  size_t bytes = 0;
  void* region = huge_pages_alloc(size, &bytes);
  if (region == nullptr) return nullptr;
  std::memcpy(region, file, size);
  ::mprotect(region, bytes, PROT_READ);
  *bytes_out = bytes;
  return region;
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, bool populate, bool huge_pages) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw GgufError("gguf: cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GgufError("gguf: '" + path + "' is not a regular file");
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = uint64_t(st.st_size);
  f->identity_ = identity_from_stat(st);
  if (f->size_ > 0) {
    // MAP_POPULATE maps every page now, in one pass at page-cache speed (about 10 GB/s here);
    // faulting them in one at a time later, as the forward pass or the hash touch them, is
    // about ten times slower. The pages are the page cache's: nothing is copied.
    const int flags = MAP_PRIVATE | (populate || huge_pages ? MAP_POPULATE : 0);
    void* m = ::mmap(nullptr, size_t(f->size_), PROT_READ, flags, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw GgufError("gguf: cannot map '" + path + "': " + std::strerror(err));
    }
    f->mapping_ = m;
    f->mapping_bytes_ = size_t(f->size_);
    if (huge_pages) {
      size_t bytes = 0;
      void* copy = huge_page_copy(m, size_t(f->size_), &bytes);
      if (copy == nullptr) {
        const int err = errno;
        ::munmap(m, size_t(f->size_));
        ::close(fd);
        throw GgufError("gguf: cannot allocate a copy of '" + path + "': " + std::strerror(err));
      }
      ::munmap(m, size_t(f->size_));
      f->mapping_ = copy;
      f->mapping_bytes_ = bytes;
    }
    f->base_ = static_cast<const uint8_t*>(f->mapping_);
  }
  ::close(fd);
  try {
    f->parse();
  } catch (const GgufError& e) {
    throw GgufError(path + ": " + e.what());
  }
  return f;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(const uint8_t* bytes, size_t size) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = "<memory>";
  f->owned_.assign(bytes, bytes + size);
  f->base_ = f->owned_.data();
  f->size_ = size;
  f->parse();
  return f;
}

void GgufFile::populate() const {
  if (!mapping_) return;
#ifdef MADV_POPULATE_READ
  if (::madvise(mapping_, mapping_bytes_, MADV_POPULATE_READ) == 0) return;
#endif
  // Kernels before 5.14: touch every page (reading the mapping is what populating does).
  const long page = ::sysconf(_SC_PAGESIZE);
  uint8_t sum = 0;
  for (uint64_t i = 0; i < size_; i += uint64_t(page))
    sum ^= *static_cast<const volatile uint8_t*>(base_ + i);
  (void)sum;
}

GgufFile::~GgufFile() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
}

void GgufFile::parse() {
  Cursor c(base_, size_);
  if (size_ < 4 || std::memcmp(base_, "GGUF", 4) != 0) fail(0, "bad magic: not a GGUF file");
  c.skip(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    if (version_ != 0 && (version_ & 0xffff) == 0)
      fail(4, "version " + std::to_string(version_) +
                  " looks big-endian; only little-endian GGUF is supported");
    fail(4, "unsupported version " + std::to_string(version_) + " (invar reads GGUF v2 and v3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata kv count");
  // Minimum encoded sizes: a kv is key length (8) + type (4) + ≥ 1 value byte; a tensor info is
  // name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
  if (n_kv > c.remaining() / 13)
    fail(16, "metadata kv count " + std::to_string(n_kv) + " does not fit in the file");

  kvs_.reserve(size_t(n_kv));
  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    std::string key = c.read_string("kv " + std::to_string(i) + " key");
    if (!keys.insert(key).second) fail(at, "duplicate metadata key '" + key + "'");
    const auto t = static_cast<GgufType>(read_type_id(c, "key '" + key + "' type"));
    GgufValue v = read_value(c, t, "key '" + key + "'");
    kvs_.push_back({std::move(key), std::move(v)});
  }

  alignment_ = 32;
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::UINT32)
      fail(0, "general.alignment has type " + std::string(gguf_type_name(a->type)) +
                  ", expected uint32");
    if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0)
      fail(0, "general.alignment " + std::to_string(a->u64) + " is not a power of two");
    alignment_ = a->u64;
  }

  if (n_tensors > c.remaining() / 32)
    fail(8, "tensor count " + std::to_string(n_tensors) + " does not fit in the " +
                std::to_string(c.remaining()) + " bytes after the metadata");
  tensors_.reserve(size_t(n_tensors));
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.pos();
    GgufTensorInfo t;
    t.name = c.read_string("tensor " + std::to_string(i) + " name");
    const std::string field = "tensor '" + t.name + "'";
    if (t.name.size() > kMaxNameBytes)
      fail(at, field + ": name longer than " + std::to_string(kMaxNameBytes) + " bytes");
    if (!names.insert(t.name).second) fail(at, "duplicate tensor '" + t.name + "'");
    const uint64_t dims_at = c.pos();
    const uint32_t n_dims = c.read<uint32_t>(field + " n_dims");
    if (n_dims < 1 || n_dims > kMaxDims)
      fail(dims_at, field + ": n_dims " + std::to_string(n_dims) + " (must be 1 to 4)");
    int64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dat = c.pos();
      const uint64_t ne = c.read<uint64_t>(field + " ne[" + std::to_string(d) + "]");
      if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(dat, field + ": dimension " + std::to_string(d) + " = " + std::to_string(ne) +
                      " is out of range");
      if (int64_t(ne) > std::numeric_limits<int64_t>::max() / n_el)
        fail(dat, field + ": element count overflows");
      n_el *= int64_t(ne);
      t.ne.push_back(int64_t(ne));
    }
    const uint64_t type_at = c.pos();
    const uint32_t type_id = c.read<uint32_t>(field + " type");
    const GgmlTypeTraits* tt = ggml_type_traits(type_id);
    if (!tt) fail(type_at, field + ": unknown ggml type id " + std::to_string(type_id));
    t.type =
        static_cast<DType>(type_id);  // may be a type invar cannot compute with: hparams rejects it
    if (t.ne[0] % tt->block_size != 0)
      fail(type_at, field + ": row length " + std::to_string(t.ne[0]) +
                        " is not a multiple of the " + std::string(tt->name) + " block size " +
                        std::to_string(tt->block_size));
    const uint64_t n_blocks = uint64_t(n_el / tt->block_size);
    if (n_blocks > std::numeric_limits<uint64_t>::max() / uint64_t(tt->block_bytes))
      fail(type_at, field + ": byte size overflows");
    t.n_bytes = n_blocks * uint64_t(tt->block_bytes);
    const uint64_t off_at = c.pos();
    t.offset = c.read<uint64_t>(field + " offset");
    if (t.offset % alignment_ != 0)
      fail(off_at, field + ": data offset " + std::to_string(t.offset) + " is not aligned to " +
                       std::to_string(alignment_));
    tensors_.push_back(std::move(t));
  }

  if (tensors_.empty()) return;
  const uint64_t data_start = align_up(c.pos(), alignment_);
  if (data_start > size_)
    fail(c.pos(), "tensor data section starts at " + std::to_string(data_start) +
                      ", past the end of the file");
  const uint64_t data_size = size_ - data_start;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail(data_start + std::min(t.offset, data_size),
           "tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" +
               std::to_string(t.n_bytes) +
               ") extends past the end of the file (data section holds " +
               std::to_string(data_size) + " bytes)");
    t.data = base_ + data_start + t.offset;
  }
  std::vector<const GgufTensorInfo*> order;
  order.reserve(tensors_.size());
  for (auto& t : tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i - 1]->offset + order[i - 1]->n_bytes > order[i]->offset)
      fail(data_start + order[i]->offset,
           "tensor '" + order[i]->name + "': data overlaps tensor '" + order[i - 1]->name + "'");
  }
}

}  // namespace invar
