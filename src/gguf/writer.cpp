// GGUF v3 writer with gguf-py's layout: header, kvs, tensor infos, zero padding to the
// alignment, then each tensor's data padded to the alignment, offsets relative to the data start.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <thread>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/types.h"

namespace invar {

namespace {

class Out {
 public:
  explicit Out(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw Error("cannot create '" + path + "': " + std::strerror(errno));
    std::setvbuf(f_, nullptr, _IOFBF, size_t(1) << 20);  // the header is many small writes
  }
  ~Out() {
    if (f_) std::fclose(f_);
  }
  void bytes(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n)
      throw Error("write to '" + path_ + "' failed: " + std::strerror(errno));
    pos_ += n;
  }
  template <typename T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t align) {
    static const uint8_t zeros[256] = {};
    while (pos_ % align)
      bytes(zeros, size_t(std::min<uint64_t>(align - pos_ % align, sizeof zeros)));
  }
  uint64_t pos() const { return pos_; }
  void close() {
    const bool ok = std::fflush(f_) == 0;
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok || !closed)
      throw Error("cannot finish writing '" + path_ + "': " + std::strerror(errno));
  }

 private:
  std::string path_;
  std::FILE* f_;
  uint64_t pos_ = 0;
};

void put_scalar(Out& o, GgufType t, uint64_t u, int64_t i, double f) {
  switch (t) {
    case GgufType::UINT8:
      o.put<uint8_t>(uint8_t(u));
      break;
    case GgufType::INT8:
      o.put<int8_t>(int8_t(i));
      break;
    case GgufType::UINT16:
      o.put<uint16_t>(uint16_t(u));
      break;
    case GgufType::INT16:
      o.put<int16_t>(int16_t(i));
      break;
    case GgufType::UINT32:
      o.put<uint32_t>(uint32_t(u));
      break;
    case GgufType::INT32:
      o.put<int32_t>(int32_t(i));
      break;
    case GgufType::UINT64:
      o.put<uint64_t>(u);
      break;
    case GgufType::INT64:
      o.put<int64_t>(i);
      break;
    case GgufType::FLOAT32:
      o.put<float>(float(f));
      break;
    case GgufType::FLOAT64:
      o.put<double>(f);
      break;
    case GgufType::BOOL:
      o.put<uint8_t>(u ? 1 : 0);
      break;
    case GgufType::STRING:
    case GgufType::ARRAY:
      INVAR_CHECK(false, "not a scalar");
  }
}

void put_value(Out& o, const std::string& key, const GgufValue& v) {
  o.put<uint32_t>(uint32_t(v.type));
  if (v.type == GgufType::STRING) {
    o.str(v.str);
  } else if (v.type != GgufType::ARRAY) {
    put_scalar(o, v.type, v.u64, v.i64, v.f64);
  } else {
    o.put<uint32_t>(uint32_t(v.elem_type));
    if (v.elem_type == GgufType::ARRAY)
      throw Error("gguf writer: key '" + key + "': nested arrays cannot be written");
    if (v.elem_type == GgufType::STRING) {
      o.put<uint64_t>(v.arr_str.size());
      for (const auto& s : v.arr_str) o.str(s);
    } else if (v.elem_type == GgufType::FLOAT32 || v.elem_type == GgufType::FLOAT64) {
      o.put<uint64_t>(v.arr_float.size());
      for (double x : v.arr_float) put_scalar(o, v.elem_type, 0, 0, x);
    } else {
      o.put<uint64_t>(v.arr_int.size());
      for (int64_t x : v.arr_int) put_scalar(o, v.elem_type, uint64_t(x), x, 0);
    }
  }
}

GgufValue scalar(GgufType t) {
  GgufValue v;
  v.type = t;
  return v;
}

}  // namespace

void GgufWriter::set_value(const std::string& key, const GgufValue& v) {
  for (auto& kv : kvs_) {
    if (kv.key == key) {
      kv.value = v;
      return;
    }
  }
  kvs_.push_back({key, v});
}

void GgufWriter::set_string(const std::string& key, const std::string& s) {
  GgufValue v = scalar(GgufType::STRING);
  v.str = s;
  set_value(key, v);
}
void GgufWriter::set_u32(const std::string& key, uint32_t x) {
  GgufValue v = scalar(GgufType::UINT32);
  v.u64 = x;
  set_value(key, v);
}
void GgufWriter::set_i32(const std::string& key, int32_t x) {
  GgufValue v = scalar(GgufType::INT32);
  v.i64 = x;
  set_value(key, v);
}
void GgufWriter::set_u64(const std::string& key, uint64_t x) {
  GgufValue v = scalar(GgufType::UINT64);
  v.u64 = x;
  set_value(key, v);
}
void GgufWriter::set_f32(const std::string& key, float x) {
  GgufValue v = scalar(GgufType::FLOAT32);
  v.f64 = x;
  set_value(key, v);
}
void GgufWriter::set_bool(const std::string& key, bool x) {
  GgufValue v = scalar(GgufType::BOOL);
  v.u64 = x ? 1 : 0;
  set_value(key, v);
}
void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& a) {
  GgufValue v = scalar(GgufType::ARRAY);
  v.elem_type = GgufType::STRING;
  v.arr_str = a;
  v.arr_len = a.size();
  set_value(key, v);
}
void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& a) {
  GgufValue v = scalar(GgufType::ARRAY);
  v.elem_type = GgufType::INT32;
  v.arr_int.assign(a.begin(), a.end());
  v.arr_len = a.size();
  set_value(key, v);
}
void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& a) {
  GgufValue v = scalar(GgufType::ARRAY);
  v.elem_type = GgufType::FLOAT32;
  v.arr_float.assign(a.begin(), a.end());
  v.arr_len = a.size();
  set_value(key, v);
}

void GgufWriter::tensor_check(const std::string& name, DType type,
                              const std::vector<int64_t>& ne) const {
  INVAR_CHECK(!ne.empty() && ne.size() <= 4, "tensor '" + name + "': 1 to 4 dims");
  INVAR_CHECK(ne[0] % dtype_block_size(type) == 0,
              "tensor '" + name + "': row not a whole number of blocks");
  for (const auto& t : tensors_) {
    if (t.name == name) throw Error("gguf writer: duplicate tensor '" + name + "'");
  }
}

namespace {

int64_t rows_of(const std::vector<int64_t>& ne) {
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  return rows;
}

}  // namespace

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                            std::vector<uint8_t> data) {
  tensor_check(name, type, ne);
  const uint64_t n_bytes = uint64_t(dtype_row_bytes(type, ne[0]) * rows_of(ne));
  INVAR_CHECK(data.size() == n_bytes, "tensor '" + name + "': data size does not match its shape");
  tensors_.push_back({name, type, ne, std::move(data), nullptr, n_bytes});
}

void GgufWriter::add_tensor_rows(const std::string& name, DType type,
                                 const std::vector<int64_t>& ne, RowsFn fill) {
  tensor_check(name, type, ne);
  INVAR_CHECK(fill != nullptr, "tensor '" + name + "': no row function");
  const uint64_t n_bytes = uint64_t(dtype_row_bytes(type, ne[0]) * rows_of(ne));
  tensors_.push_back({name, type, ne, {}, std::move(fill), n_bytes});
}

namespace {

// Produces the rows of add_tensor_rows tensors chunk by chunk and hands each full chunk to a
// writing thread while the next one is filled (filling is most of the time; the write overlaps).
class RowStreamer {
 public:
  RowStreamer(Out& o, uint64_t align, int n_threads, int64_t chunk_bytes)
      : o_(o), align_(align), chunk_bytes_(chunk_bytes) {
    if (n_threads > 1) pool_ = std::make_unique<ThreadPool>(n_threads);
  }
  ~RowStreamer() {
    if (pending_.valid()) pending_.wait();  // never free a buffer that is being written
  }

  void tensor(const GgufWriter::RowsFn& fill, int64_t row_bytes, int64_t rows) {
    const int64_t per_chunk = std::max<int64_t>(1, chunk_bytes_ / row_bytes);
    for (int64_t r0 = 0; r0 < rows; r0 += per_chunk) {
      const int64_t n = std::min(per_chunk, rows - r0);
      std::vector<uint8_t>& buf = bufs_[cur_];
      buf.resize(size_t(n * row_bytes));
      uint8_t* out = buf.data();
      if (pool_) {
        pool_->parallel_for(n, [&](int64_t b, int64_t e, int) {
          if (b < e) fill(r0 + b, r0 + e, out + b * row_bytes);
        });
      } else {
        fill(r0, r0 + n, out);
      }
      const bool last = r0 + n == rows;
      finish();
      pending_ = std::async(std::launch::async, [this, out, bytes = buf.size(), last] {
        o_.bytes(out, bytes);
        if (last) o_.pad_to(align_);
      });
      cur_ ^= 1;
    }
  }
  // Waits for the chunk being written (and rethrows its error).
  void finish() {
    if (pending_.valid()) pending_.get();
  }

 private:
  Out& o_;
  uint64_t align_;
  int64_t chunk_bytes_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<uint8_t> bufs_[2];
  int cur_ = 0;
  std::future<void> pending_;
};

}  // namespace

void GgufWriter::write(const std::string& path, int n_threads, int64_t chunk_bytes) const {
  uint64_t align = 32;
  for (const auto& kv : kvs_) {
    if (kv.key == "general.alignment") {
      if (kv.value.type != GgufType::UINT32 || kv.value.u64 == 0 ||
          (kv.value.u64 & (kv.value.u64 - 1)))
        throw Error("gguf writer: general.alignment must be a uint32 power of two");
      align = kv.value.u64;
    }
  }
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const bool streamed =
      std::any_of(tensors_.begin(), tensors_.end(), [](const Tensor& t) { return t.fill; });
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    Out o(tmp);
    o.bytes("GGUF", 4);
    o.put<uint32_t>(3);
    o.put<uint64_t>(tensors_.size());
    o.put<uint64_t>(kvs_.size());
    for (const auto& kv : kvs_) {
      o.str(kv.key);
      put_value(o, kv.key, kv.value);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      o.str(t.name);
      o.put<uint32_t>(uint32_t(t.ne.size()));
      for (int64_t d : t.ne) o.put<uint64_t>(uint64_t(d));
      o.put<uint32_t>(uint32_t(t.type));
      o.put<uint64_t>(offset);
      offset += (t.n_bytes + align - 1) / align * align;
    }
    o.pad_to(align);
    {
      RowStreamer rows(o, align, streamed ? n_threads : 1, chunk_bytes);
      for (const auto& t : tensors_) {
        if (t.fill) {
          const int64_t row_bytes = dtype_row_bytes(t.type, t.ne[0]);
          rows.tensor(t.fill, row_bytes, int64_t(t.n_bytes) / row_bytes);
        } else {
          rows.finish();
          o.bytes(t.data.data(), t.data.size());
          o.pad_to(align);
        }
      }
      rows.finish();
    }
    o.close();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw Error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
}

}  // namespace invar
