// Matrix product: the scalar reference of the canonical order, embedding rows, and the dispatch
// to the SIMD paths, which read every type in place (f32_act_simd.h).
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/activations.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/matmul/f32_act.h"
#include "kernels/matmul/q8_act.h"
#include "kernels/reduce.h"
#include "quant/dequant.h"

namespace invar {
namespace {

// Outputs a thread takes as a whole, in matmul() and matmul_jobs() alike: a multiple of every
// kernel's group of weight rows, so a thread split never changes which kernel computes an output.
constexpr int64_t kOutputGroup = 16;

// Rows of activations up to which a product streams its weights once and computes little beside
// them (decode): its threads are bound by memory, whose share of the bandwidth varies, so their
// outputs are balanced while they run (ThreadPool::parallel_balanced) instead of split in advance.
constexpr int64_t kStreamRows = 4;

// The pieces balanced products are cut into: about this many bytes of weights each, fewer than
// ~16 per thread only where the whole dispatch is small. A piece is one call of the kernel, which
// prefetches past its end, so a thread running its pieces in order reads one stream; a thread
// that finishes early waits at most one piece for the others.
constexpr double kPieceBytesMin = 64 * 1024, kPieceBytesMax = 256 * 1024;

// matmul_piece_bytes_min_set's minimum (0: kPieceBytesMin) and, while it is set, the counts.
std::atomic<double> piece_bytes_min_for_tests{0};
std::atomic<int64_t> pieces_by_caller{0}, pieces_by_workers{0}, pieces_moved{0};

// Weights of row n, k in [0, K), as exact F32 values, handed to `use(k, w)` in order of k.
template <class Use>
inline void row_each(const Matrix& w, int64_t n, Use&& use) {
  const int64_t K = w.k();
  const uint8_t* row = static_cast<const uint8_t*>(w.data()) + n * dtype_row_bytes(w.type(), K);
  switch (w.type()) {
    case DType::F32: {
      const float* r = reinterpret_cast<const float*>(row);
      for (int64_t k = 0; k < K; ++k) use(k, r[k]);
      return;
    }
    case DType::F16: {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
      for (int64_t k = 0; k < K; ++k) use(k, f16_to_f32(r[k]));
      return;
    }
    case DType::BF16: {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
      for (int64_t k = 0; k < K; ++k) use(k, bf16_to_f32(r[k]));
      return;
    }
    default:
      break;
  }
  INVAR_CHECK(false, "row_each on a quantised dtype");
}

QuantView quant_view(const Matrix& w) {
  return {w.type(), static_cast<const uint8_t*>(w.data()), w.k(), w.n(),
          dtype_row_bytes(w.type(), w.k())};
}

// The canonical order, scalar: lane k % 16 of each output accumulates fma(w[n][k], x[m][k], ·)
// in ascending k from +0, then the reduce.h tree. Outputs n in [n0, n1) of every row.
void matmul_scalar_range(const Matrix& w, const float* x, int64_t m, float* y, int64_t n0,
                         int64_t n1) {
  if (dtype_is_quantized(w.type())) return qmatmul_ref_range(quant_view(w), x, m, y, n0, n1);
  const int64_t K = w.k(), N = w.n();
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * K;
      float acc[16] = {};
      row_each(w, n, [&](int64_t k, float wk) { acc[k % 16] = std::fma(wk, xr[k], acc[k % 16]); });
      y[r * N + n] = reduce_lanes_tree(acc);
    }
  }
}

// The activation format a product with w uses under the active profile: none (F32 activations)
// unless the q8 profile is on and w's type has integer kernels.
Q8Format q8_format_now(const Matrix& w) {
  return activations_active() == ActivationProfile::q8 ? q8_format_of(w.type()) : Q8Format::none;
}

// The calling thread's buffer for quantised activations: grows to the largest call, then is
// reused, so a warm engine allocates nothing per step. 64-byte aligned.
uint8_t* q8_buffer(int64_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> mem;
  thread_local int64_t size = 0;
  if (bytes + 64 > size) {
    size = std::max(bytes + 64, size * 2);
    mem = std::make_unique<uint8_t[]>(size_t(size));
  }
  const auto at = reinterpret_cast<uintptr_t>(mem.get());
  return mem.get() + ((64 - at % 64) % 64);
}

// Rows [r0, r1) of x quantised into `out` by the active level's quantiser.
void q8_quantize(const float* x, const Q8Rows& out, int64_t r0, int64_t r1) {
  if (const Q8Kernels* k = q8_kernels()) return k->quantize(x, out, r0, r1);
  q8_quantize_ref(x, out, r0, r1);
}

void check_scratch(std::span<float> scratch, int n_threads) {
  INVAR_CHECK(int64_t(scratch.size()) >= matmul_scratch_floats(n_threads),
              "matmul: scratch of " + std::to_string(scratch.size()) + " floats, needs " +
                  std::to_string(matmul_scratch_floats(n_threads)));
}

}  // namespace

Matrix::Matrix(DType type, int64_t k, int64_t n, const void* data)
    : type_(type), k_(k), n_(n), data_(data) {
  INVAR_CHECK(k > 0 && n > 0,
              "matrix shape {" + std::to_string(k) + ", " + std::to_string(n) + "}");
  INVAR_CHECK(k % dtype_block_size(type) == 0, std::string(dtype_name(type)) +
                                                   " matrix with K = " + std::to_string(k) +
                                                   " not a multiple of its block size");
  INVAR_CHECK(data != nullptr);
}

void Matrix::row_to_f32(int64_t n, float* out) const {
  INVAR_CHECK(n >= 0 && n < n_, "row " + std::to_string(n) + " of " + std::to_string(n_));
  // Every type through ggml's dequantisation (quant/dequant.h): the exact values the matmul
  // paths use.
  dequant_row(type_, static_cast<const uint8_t*>(data_) + n * dtype_row_bytes(type_, k_), out, k_);
}

void matmul_ref(const Matrix& w, const float* x, int64_t m, float* y) {
  INVAR_CHECK(m >= 0);
  if (const Q8Format f = q8_format_now(w); f != Q8Format::none && m > 0) {
    const Q8Rows xq = q8_rows_at(q8_buffer(q8_rows_bytes(f, m, w.k())), f, m, w.k());
    q8_quantize_ref(x, xq, 0, m);
    return q8matmul_ref_range(quant_view(w), xq, y, 0, w.n());
  }
  matmul_scalar_range(w, x, m, y, 0, w.n());
}

int64_t matmul_scratch_floats(int n_threads) {
  return kQScratchFloats * n_threads;
}

void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool,
            std::span<float> scratch) {
  INVAR_CHECK(m >= 0);
  if (m == 0) return;
  const IsaKernels* isa = isa_kernels();
  if (q8_format_now(w) != Q8Format::none) {
    // The q8 profile: one job (its activations quantised once, its outputs split by cost).
    const MatmulJob job{&w, x, m, y};
    return matmul_jobs({&job, 1}, pool, scratch);
  }
  if (isa == nullptr) {
    pool.parallel_for(
        w.n(), [&](int64_t b, int64_t e, int) { matmul_scalar_range(w, x, m, y, b, e); },
        kOutputGroup);
    return;
  }
  if (m <= kStreamRows) {
    const MatmulJob job{&w, x, m, y};
    return matmul_jobs({&job, 1}, pool, scratch);
  }
  check_scratch(scratch, pool.size());
  const int64_t per_thread = matmul_scratch_floats(1);
  const QuantView q = quant_view(w);
  pool.parallel_for(
      w.n(),
      [&](int64_t b, int64_t e, int ti) {
        isa->qmatmul_rows(q, x, m, y, b, e, scratch.data() + ti * per_thread);
      },
      kOutputGroup);
}

namespace {

// Outputs [n0, n1) of one job (n0 on a group boundary), by the same kernels as matmul(); xq: the
// job's quantised activations under the q8 profile, else format none.
void job_range(const MatmulJob& j, const IsaKernels* isa, int64_t n0, int64_t n1, float* scratch,
               const Q8Rows& xq) {
  const Matrix& w = *j.w;
  if (xq.format != Q8Format::none) {
    if (const Q8Kernels* k = q8_kernels()) return k->rows(quant_view(w), xq, j.y, n0, n1, scratch);
    return q8matmul_ref_range(quant_view(w), xq, j.y, n0, n1);
  }
  if (!isa) return matmul_scalar_range(w, j.x, j.m, j.y, n0, n1);
  isa->qmatmul_rows(quant_view(w), j.x, j.m, j.y, n0, n1, scratch);
}

}  // namespace

// Under the q8 profile, the activations of every job that has integer kernels, quantised once per
// call (jobs reading the same rows share them); format none for the others. Rows are quantised
// in parallel when there are many (each row on its own: the split changes no bit).
void q8_quantize_jobs(std::span<const MatmulJob> jobs, ThreadPool& pool, std::vector<Q8Rows>& out) {
  out.assign(jobs.size(), Q8Rows{});
  int64_t bytes = 0;
  for (const MatmulJob& j : jobs) {
    const Q8Format f = q8_format_now(*j.w);
    if (f != Q8Format::none && j.m > 0) bytes += q8_rows_bytes(f, j.m, j.w->k());
  }
  if (bytes == 0) return;
  uint8_t* at = q8_buffer(bytes);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    const Q8Format f = q8_format_now(*j.w);
    if (f == Q8Format::none || j.m == 0) continue;
    const int64_t k = j.w->k();
    bool shared = false;
    for (size_t e = 0; e < i && !shared; ++e) {
      if (jobs[e].x == j.x && jobs[e].m == j.m && out[e].k == k && out[e].format == f) {
        out[i] = out[e];
        shared = true;
      }
    }
    if (shared) continue;
    out[i] = q8_rows_at(at, f, j.m, k);
    at += q8_rows_bytes(f, j.m, k);
    if (j.m * k < 64 * 1024) {
      q8_quantize(j.x, out[i], 0, j.m);
    } else {
      pool.parallel_for(j.m, [&](int64_t b, int64_t e, int) { q8_quantize(j.x, out[i], b, e); });
    }
  }
}

namespace {

// Counts pieces [p0, p1) of n run by thread t of n_threads (matmul_piece_counts); its starting
// share is the one parallel_balanced hands out: n / n_threads pieces, the first n % n_threads
// threads one more.
void pieces_count(int64_t n, int n_threads, int64_t p0, int64_t p1, int t) {
  (t == 0 ? pieces_by_caller : pieces_by_workers).fetch_add(p1 - p0, std::memory_order_relaxed);
  const int64_t per = n / n_threads, extra = n % n_threads;
  const int64_t s0 = t * per + std::min<int64_t>(t, extra), s1 = s0 + per + (t < extra);
  const int64_t inside = std::max<int64_t>(0, std::min(p1, s1) - std::max(p0, s0));
  pieces_moved.fetch_add(p1 - p0 - inside, std::memory_order_relaxed);
}

}  // namespace

void matmul_jobs(std::span<const MatmulJob> jobs, ThreadPool& pool, std::span<float> scratch) {
  const IsaKernels* isa = isa_kernels();
  if (isa) check_scratch(scratch, pool.size());
  // Named through a reference: the pool's threads must see the calling thread's vector, not their
  // own thread_local one.
  thread_local std::vector<Q8Rows> xq_of_thread;
  std::vector<Q8Rows>& xq = xq_of_thread;
  q8_quantize_jobs(jobs, pool, xq);
  // Cost of one output of each job: its weight bytes (decode streams them) plus one
  // multiply-add per row and k (prefill computes them).
  auto output_cost = [](const MatmulJob& j) {
    return j.m == 0 ? 0.0 : double(dtype_row_bytes(j.w->type(), j.w->k()) + j.m * j.w->k());
  };
  double total = 0;
  for (const MatmulJob& j : jobs) {
    INVAR_CHECK(j.w != nullptr && j.m >= 0);
    total += double(j.w->n()) * output_cost(j);
  }
  if (total == 0) return;
  const int n_threads = pool.size();
  const int64_t per_thread = matmul_scratch_floats(1);
  const bool streaming = isa && std::all_of(jobs.begin(), jobs.end(),
                                            [](const MatmulJob& j) { return j.m <= kStreamRows; });
  if (streaming) {
    // Job j is cut into pieces of group_of(j) output groups of about `piece` cost each; the pieces
    // of all jobs, in job order, are the units the threads balance.
    const double min_for_tests = piece_bytes_min_for_tests.load(std::memory_order_relaxed);
    const double piece =
        std::clamp(total / (16.0 * n_threads), min_for_tests > 0 ? min_for_tests : kPieceBytesMin,
                   kPieceBytesMax);
    auto group_of = [&](const MatmulJob& j) {
      const int64_t groups = (j.w->n() + kOutputGroup - 1) / kOutputGroup;
      const auto g = int64_t(piece / (output_cost(j) * double(kOutputGroup)));
      return std::clamp<int64_t>(g, 1, groups);
    };
    auto pieces_of = [&](const MatmulJob& j) {
      if (j.m == 0) return int64_t(0);
      const int64_t span = group_of(j) * kOutputGroup;
      return (j.w->n() + span - 1) / span;
    };
    int64_t n_pieces = 0;
    for (const MatmulJob& j : jobs) n_pieces += pieces_of(j);
    pool.parallel_balanced(n_pieces, 1, [&](int64_t p0, int64_t p1, int thread_index) {
      if (min_for_tests > 0) pieces_count(n_pieces, n_threads, p0, p1, thread_index);
      float* thread_scratch = scratch.data() + thread_index * per_thread;
      int64_t first = 0;  // the first piece of job j
      for (size_t i = 0; i < jobs.size(); ++i) {
        const MatmulJob& j = jobs[i];
        const int64_t count = pieces_of(j);
        const int64_t a = std::max(p0, first), b = std::min(p1, first + count);
        if (a < b) {
          const int64_t span = group_of(j) * kOutputGroup;
          job_range(j, isa, (a - first) * span, std::min(j.w->n(), (b - first) * span),
                    thread_scratch, xq[i]);
        }
        first += count;
        if (first >= p1) break;
      }
    });
    return;
  }
  // Thread ti takes the groups whose first output's cumulative cost falls in its share
  // [ti, ti+1)·total/n_threads: contiguous, disjoint, covering every output.
  pool.parallel_for(n_threads, [&](int64_t ti, int64_t, int thread_index) {
    const double lo = total * double(ti) / n_threads, hi = total * double(ti + 1) / n_threads;
    float* thread_scratch = isa ? scratch.data() + thread_index * per_thread : nullptr;
    double at = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const MatmulJob& j = jobs[i];
      const int64_t n = j.w->n(), group = kOutputGroup;
      const double unit = output_cost(j);
      const double end = at + double(n) * unit;
      if (j.m > 0 && end > lo && at < hi) {
        // First group whose start is at or past the cost c: ceil((c - at) / (unit·group)).
        auto first_group = [&](double c) {
          if (c <= at) return int64_t(0);
          const auto g = int64_t((c - at) / (unit * double(group)));
          return at + double(g * group) * unit < c ? g + 1 : g;
        };
        const int64_t n0 = std::min(n, first_group(lo) * group);
        const int64_t n1 = ti + 1 == n_threads ? n : std::min(n, first_group(hi) * group);
        if (n0 < n1) job_range(j, isa, n0, n1, thread_scratch, xq[i]);
      }
      at = end;
    }
  });
}

void matmul_piece_bytes_min_set(double bytes) {
  INVAR_CHECK(bytes >= 0 && bytes <= kPieceBytesMax,
              "matmul piece minimum " + std::to_string(bytes) + " B");
  pieces_by_caller = 0;
  pieces_by_workers = 0;
  pieces_moved = 0;
  piece_bytes_min_for_tests = bytes;
}

MatmulPieceCounts matmul_piece_counts() {
  return {pieces_by_caller.load(), pieces_by_workers.load(), pieces_moved.load()};
}

void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  // Uninitialised: the kernels write scratch before they read it. Zero-filling ~1 MiB per thread
  // on every call was most of the bit-exactness tests' time under ASan.
  const size_t n = size_t(matmul_scratch_floats(pool.size()));
  const auto scratch = std::make_unique_for_overwrite<float[]>(n);
  matmul(w, x, m, y, pool, std::span<float>(scratch.get(), n));
}

}  // namespace invar
