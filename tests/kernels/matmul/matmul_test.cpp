// The matrix product keeps its canonical order (DESIGN N1/N2/C7): the SIMD paths equal the scalar
// reference bit for bit, a row's bits do not depend on the batch it is in or on the thread count,
// and the reference is close to a float64 dot product.
#include <atomic>
#include <cmath>
#include <limits>
#include <span>

#include "core/thread_pool.h"
#include "kernels/reduce.h"
#include "matmul_test_util.h"

namespace invar::test {
namespace matmul_test {

// K where the type allows any K (not a multiple of 16: the few-rows kernels at every M; whole
// 16-weight blocks: the many-rows tiles), else the Q8_0 sizes (one block; several).
std::vector<int64_t> test_ks(DType t) {
  if (t == DType::Q8_0) return {32, 288};
  return {1, 37, 64, 300};
}

TEST(Matmul, FastEqualsReferenceBitExact) {
  SimdRestore restore;
  ThreadPool pool(1);
  for (DType t : kAllTypes) {
    for (int64_t k : test_ks(t)) {
      for (int64_t n : {int64_t(1), int64_t(21), int64_t(70)}) {  // 70 = 4 groups of 16 + 6
        OwnedMatrix w = random_matrix(t, k, n, uint32_t(k * 1000 + n));
        // Rows: every direct-path count, tile multiples and tile remainders of both ISAs.
        for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 13, 19}) {
          const auto x = random_activations(m * k, uint32_t(m));
          std::vector<float> ref(static_cast<size_t>(m * n));
          matmul_ref(w.m, x.data(), m, ref.data());
          for (SimdLevel level : available_levels()) {
            simd_set(level);
            std::vector<float> y(static_cast<size_t>(m * n),
                                 std::numeric_limits<float>::quiet_NaN());
            matmul(w.m, x.data(), m, y.data(), pool);
            EXPECT_EQ(bits_diff(y.data(), ref.data(), m * n, n), "")
                << case_name(t, level) << " K=" << k << " N=" << n << " M=" << m;
          }
        }
      }
    }
  }
}

// A row computed alone (M=1, the decode path) has the same bits as inside batches of 2..512 rows
// (the many-rows tiles), at every level; the levels agree with each other too.
TEST(Matmul, RowBitsIndependentOfBatch) {
  SimdRestore restore;
  ThreadPool pool(1);
  const int64_t n = 70, max_m = 512;
  for (DType t : kAllTypes) {
    const int64_t k = t == DType::Q8_0 ? 288 : 300;
    OwnedMatrix w = random_matrix(t, k, n, 7);
    const auto x = random_activations(max_m * k, 11);
    std::vector<float> alone(static_cast<size_t>(max_m * n));
    {
      simd_set(SimdLevel::scalar);
      for (int64_t r = 0; r < max_m; ++r) matmul(w.m, &x[r * k], 1, &alone[r * n], pool);
    }
    for (SimdLevel level : available_levels()) {
      simd_set(level);
      for (int64_t m : {1, 2, 4, 5, 9, 64, 100, 512}) {
        // Batches placed at different offsets so every row sits at several tile positions.
        for (int64_t first : {int64_t(0), int64_t(3)}) {
          if (first + m > max_m) continue;
          std::vector<float> y(static_cast<size_t>(m * n));
          matmul(w.m, &x[first * k], m, y.data(), pool);
          EXPECT_EQ(bits_diff(y.data(), &alone[first * n], m * n, n), "")
              << case_name(t, level) << " M=" << m << " first row " << first;
        }
      }
    }
  }
}

// The caller's scratch (weights widened to F32 in the many-rows path): one buffer serves every
// call, whatever it holds before (NaN here, then the previous call's weights), and a buffer too
// small is a caller's bug that stops the process.
TEST(Matmul, CallerScratch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SimdRestore restore;
  ThreadPool pool(2);
  std::vector<float> scratch(size_t(matmul_scratch_floats(pool.size())),
                             std::numeric_limits<float>::quiet_NaN());
  const int64_t k = 288, n = 70, m = 19;
  const auto x = random_activations(m * k, 5);
  for (DType t : kAllTypes) {
    OwnedMatrix w = random_matrix(t, k, n, 17);
    std::vector<float> ref(size_t(m * n));
    matmul_ref(w.m, x.data(), m, ref.data());
    for (SimdLevel level : available_levels()) {
      simd_set(level);
      std::vector<float> y(size_t(m * n), 7.0f);
      matmul(w.m, x.data(), m, y.data(), pool, scratch);
      EXPECT_EQ(bits_diff(y.data(), ref.data(), m * n, n), "") << case_name(t, level);
      if (level == SimdLevel::scalar) continue;  // the scalar chain needs no scratch
      const std::span<float> small(scratch.data(), scratch.size() - 1);
      EXPECT_DEATH(matmul(w.m, x.data(), m, y.data(), pool, small), "scratch of")
          << case_name(t, level);
    }
  }
}

TEST(Matmul, ThreadCountDoesNotChangeBits) {
  SimdRestore restore;
  ThreadPool one(1), two(2);
  // N = 300: outputs split in groups of 16, so both threads get outputs (checked below), the
  // last group partial.
  const int64_t n = 300, m = 37;
  std::atomic<bool> second_thread_worked{false};
  two.parallel_for(
      n,
      [&](int64_t b, int64_t e, int t) {
        if (t == 1 && b < e) second_thread_worked = true;
      },
      16);
  ASSERT_TRUE(second_thread_worked);
  for (DType t : kAllTypes) {
    // Dense: K = 64 takes the many-rows tiles at M = 37, K = 45 the few-rows kernels.
    for (int64_t k : {int64_t(64), int64_t(45)}) {
      if (t == DType::Q8_0 && k % 32 != 0) continue;
      OwnedMatrix w = random_matrix(t, k, n, 3);
      for (SimdLevel level : available_levels()) {
        simd_set(level);
        for (int64_t rows : {int64_t(1), m}) {
          const auto x = random_activations(rows * k, 5);
          std::vector<float> y1(static_cast<size_t>(rows * n)), y2(static_cast<size_t>(rows * n));
          matmul(w.m, x.data(), rows, y1.data(), one);
          matmul(w.m, x.data(), rows, y2.data(), two);
          EXPECT_EQ(bits_diff(y2.data(), y1.data(), rows * n, n), "")
              << case_name(t, level) << " K=" << k << " M=" << rows;
        }
      }
    }
  }
}

// The reference, evaluated here from its definition (lane k % 16 accumulates in ascending k, then
// the reduce.h tree; K = 1000 leaves lanes 8..15 one term short), and its distance to float64:
// |y − exact| ≤ γ_(⌈K/16⌉+4) · Σ|w·x|. The one sequential chain over k (the order before
// invar-numerics-3) must differ somewhere, or this test could not tell the orders apart.
TEST(Matmul, ReferenceIsTheLaneOrderAndCloseToFloat64) {
  for (DType t : kAllTypes) {
    const int64_t k = t == DType::Q8_0 ? 1024 : 1000, n = 9, m = 3;
    OwnedMatrix w = random_matrix(t, k, n, 21);
    const auto x = random_activations(m * k, 22);
    std::vector<float> y(static_cast<size_t>(m * n)), row(static_cast<size_t>(k));
    matmul_ref(w.m, x.data(), m, y.data());
    const double u = std::ldexp(1.0, -24), len = double((k + 15) / 16 + 4);
    const double gamma = len * u / (1 - len * u);
    int chain_differs = 0;
    for (int64_t j = 0; j < n; ++j) {
      w.m.row_to_f32(j, row.data());
      for (int64_t r = 0; r < m; ++r) {
        float lanes[16] = {}, chain = 0.0f;
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          const float wi = row[size_t(i)], xi = x[size_t(r * k + i)];
          lanes[i % 16] = std::fma(wi, xi, lanes[i % 16]);
          chain = std::fma(wi, xi, chain);
          exact += double(wi) * double(xi);
          mag += std::fabs(double(wi) * double(xi));
        }
        const float got = y[size_t(r * n + j)];
        EXPECT_EQ(float_bits(got), float_bits(reduce_lanes_tree(lanes)))
            << dtype_name(t) << " m=" << r << " n=" << j;
        EXPECT_LE(std::fabs(double(got) - exact), gamma * mag)
            << dtype_name(t) << " m=" << r << " n=" << j;
        EXPECT_GT(mag, 0.0);
        chain_differs += float_bits(chain) != float_bits(got);
      }
    }
    EXPECT_GT(chain_differs, 0) << dtype_name(t);
  }
}

// F32/F16/BF16 at every row count 1..512 (the few-rows kernels up to kDirectRows rows, the tiles
// above, every tile remainder), K a multiple of 16 (the tiles) and not (the few-rows kernels for
// any M), odd N split over 1..3 threads: the bits of the scalar reference at every level.
TEST(Matmul, DenseEveryRowCountEqualsReference) {
  SimdRestore restore;
  ThreadPool p1(1), p2(2), p3(3);
  ThreadPool* pools[] = {&p1, &p2, &p3};
  const int64_t n = 37;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t k : {int64_t(64), int64_t(2080), int64_t(45)}) {
      OwnedMatrix w = random_matrix(t, k, n, uint32_t(k + int(t)));
      const int64_t max_m = 512;
      const auto x = random_activations(max_m * k, uint32_t(k));
      std::vector<float> ref(size_t(max_m * n));
      matmul_ref(w.m, x.data(), max_m, ref.data());
      for (int64_t m = 1; m <= max_m; ++m) {
        // Every M for K = 64; for the long and the ragged K a spread of them.
        if (k != 64 && !(m <= 20 || m % 61 == 0 || m == max_m)) continue;
        for (SimdLevel level : available_levels()) {
          if (level == SimdLevel::scalar) continue;
          simd_set(level);
          ThreadPool& pool = *pools[m % 3];
          std::vector<float> y(size_t(m * n), std::numeric_limits<float>::quiet_NaN());
          matmul(w.m, x.data(), m, y.data(), pool);
          ASSERT_EQ(bits_diff(y.data(), ref.data(), m * n, n), "")
              << case_name(t, level) << " K=" << k << " M=" << m << " threads=" << pool.size();
        }
      }
    }
  }
}

// Outputs are written exactly once each and nothing past y[M][N] (partial last group of 16,
// thread split).
TEST(Matmul, WritesOnlyItsOutputs) {
  SimdRestore restore;
  ThreadPool two(2);
  const int64_t k = 50, n = 83, m = 10, guard = 64;
  OwnedMatrix w = random_matrix(DType::F32, k, n, 4);
  const auto x = random_activations(m * k, 6);
  std::vector<float> ref(static_cast<size_t>(m * n));
  matmul_ref(w.m, x.data(), m, ref.data());
  for (SimdLevel level : available_levels()) {
    simd_set(level);
    for (int64_t rows : {int64_t(1), m}) {
      std::vector<float> y(static_cast<size_t>(rows * n + guard), -7.0f);
      matmul(w.m, x.data(), rows, y.data(), two);
      EXPECT_EQ(bits_diff(y.data(), ref.data(), rows * n, n), "") << simd_name(level);
      for (int64_t i = rows * n; i < rows * n + guard; ++i) {
        ASSERT_EQ(y[i], -7.0f) << simd_name(level) << " wrote past y at " << i;
      }
    }
  }
}

// Weights are used where they lie, in every type: a weight changed in the caller's bytes after
// the Matrix is made changes exactly its own output, on the decode and the many-rows paths (a
// copy taken at construction or on first use would not see it).
TEST(Matmul, ReadsWeightsInPlace) {
  SimdRestore restore;
  ThreadPool pool(1);
  const int64_t k = 48, n = 40;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    OwnedMatrix w = random_matrix(t, k, n, 8);
    EXPECT_EQ(w.m.data(), w.bytes.data()) << dtype_name(t);
    for (SimdLevel level : available_levels()) {
      simd_set(level);
      for (int64_t m : {int64_t(1), int64_t(9)}) {
        const auto x = random_activations(m * k, 9);
        std::vector<float> before(size_t(m * n)), after(size_t(m * n));
        matmul(w.m, x.data(), m, before.data(), pool);
        const int64_t row = 37, elem = dtype_row_bytes(t, k) / k;
        uint8_t* byte = w.bytes.data() + row * dtype_row_bytes(t, k) + 5 * elem + elem - 1;
        *byte ^= 0x40;  // an exponent bit of w[37][5]
        matmul(w.m, x.data(), m, after.data(), pool);
        *byte ^= 0x40;
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            const bool same = bits_diff(&before[r * n + j], &after[r * n + j], 1, 1).empty();
            EXPECT_EQ(same, j != row) << case_name(t, level) << " M=" << m << " n=" << j;
          }
        }
      }
    }
  }
}

TEST(Matmul, RowToF32DecodesEveryType) {
  const float vals[] = {1.5f, -0.25f, 0.0f, 3.0f};
  std::vector<float> out(4);
  {
    Matrix m(DType::F32, 2, 2, vals);
    m.row_to_f32(1, out.data());
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], 3.0f);
  }
  {
    const uint16_t h[] = {f32_to_f16(1.5f), f32_to_f16(-0.25f), f32_to_f16(65504.0f),
                          f32_to_f16(3.0f)};
    Matrix m(DType::F16, 2, 2, h);
    m.row_to_f32(0, out.data());
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[1], -0.25f);
    m.row_to_f32(1, out.data());
    EXPECT_EQ(out[0], 65504.0f);
  }
  {
    const uint16_t b[] = {f32_to_bf16(1.5f), f32_to_bf16(-0.25f), f32_to_bf16(-3.0f),
                          f32_to_bf16(256.0f)};
    Matrix m(DType::BF16, 2, 2, b);
    m.row_to_f32(1, out.data());
    EXPECT_EQ(out[0], -3.0f);
    EXPECT_EQ(out[1], 256.0f);
  }
  {
    std::vector<uint8_t> blocks(2 * kQ8BlockBytes);
    for (int r = 0; r < 2; ++r) {
      const uint16_t d = f32_to_f16(r == 0 ? 0.5f : 0.125f);
      std::memcpy(&blocks[r * kQ8BlockBytes], &d, 2);
      for (int j = 0; j < 32; ++j) blocks[r * kQ8BlockBytes + 2 + j] = uint8_t(int8_t(j - 16));
    }
    Matrix m(DType::Q8_0, 32, 2, blocks.data());
    std::vector<float> row(32);
    m.row_to_f32(1, row.data());
    for (int j = 0; j < 32; ++j) EXPECT_EQ(row[j], 0.125f * float(j - 16)) << j;
  }
}

}  // namespace matmul_test
}  // namespace invar::test

namespace invar::test {
namespace matmul_test {

// Several products in one dispatch (matmul_jobs) give the bits of separate matmul() calls, for
// one row (decode) and many, on 1 and 2 threads, at every level; a job with no rows writes
// nothing and no job writes past its outputs. The jobs mix types and sizes so the cost split of
// two threads falls inside a job, not only between jobs.
TEST(Matmul, JobsEqualSeparateCalls) {
  SimdRestore restore;
  ThreadPool one(1), two(2);
  struct Shape {
    DType t;
    int64_t k, n, m_scale;  // job rows: m × m_scale (0: a job with no rows)
  };
  const Shape shapes[] = {{DType::F32, 45, 300, 1},  {DType::BF16, 64, 83, 2},
                          {DType::Q4_K, 256, 70, 1}, {DType::Q6_K, 512, 40, 1},
                          {DType::Q8_0, 64, 33, 0},  {DType::Q8_0, 96, 130, 1}};
  std::vector<OwnedMatrix> ws;
  for (const Shape& s : shapes) ws.push_back(random_matrix(s.t, s.k, s.n, uint32_t(s.k + s.n)));
  const int64_t guard = 16;
  for (SimdLevel level : available_levels()) {
    simd_set(level);
    for (int64_t m : {int64_t(1), int64_t(9)}) {
      std::vector<std::vector<float>> xs, want;
      for (size_t i = 0; i < ws.size(); ++i) {
        const int64_t rows = m * shapes[i].m_scale;
        xs.push_back(random_activations(std::max<int64_t>(rows, 1) * shapes[i].k, uint32_t(i)));
        want.emplace_back(size_t(rows * shapes[i].n + guard), -7.0f);
        matmul(ws[i].m, xs[i].data(), rows, want[i].data(), one);
      }
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<std::vector<float>> got;
        std::vector<MatmulJob> jobs;
        for (size_t i = 0; i < ws.size(); ++i) {
          const int64_t rows = m * shapes[i].m_scale;
          got.emplace_back(want[i].size(), -7.0f);
          jobs.push_back({&ws[i].m, xs[i].data(), rows, got.back().data()});
        }
        std::vector<float> scratch(size_t(matmul_scratch_floats(pool->size())));
        matmul_jobs(jobs, *pool, scratch);
        for (size_t i = 0; i < ws.size(); ++i) {
          EXPECT_EQ(bits_diff(got[i].data(), want[i].data(), int64_t(want[i].size()), shapes[i].n),
                    "")
              << case_name(shapes[i].t, level) << " job " << i << " M=" << m << " threads "
              << pool->size();
        }
      }
    }
  }
}

// A decode product whose pieces both threads run, and take over from each other, while they run
// (ThreadPool::parallel_balanced): the piece minimum lowered to one byte cuts it into 512 pieces
// of 16 outputs, long enough together for the worker to join. Repeated until the worker ran
// pieces and some were taken over (at most 200 times: a worker kept off the CPU that long is a
// broken machine), each run equal to one thread's bits.
TEST(Matmul, BalancedPiecesOnBothThreadsEqualOneThread) {
  ThreadPool one(1), two(2);
  const int64_t k = 256, n = 8192;
  OwnedMatrix w = random_matrix(DType::F32, k, n, 11);
  const auto x = random_activations(k, 12);
  std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  matmul(w.m, x.data(), 1, want.data(), one);
  matmul_piece_bytes_min_set(1);
  MatmulPieceCounts c;
  for (int run = 0; run < 200 && (c.by_workers == 0 || c.moved == 0); ++run) {
    std::fill(got.begin(), got.end(), -7.0f);
    matmul(w.m, x.data(), 1, got.data(), two);
    ASSERT_EQ(bits_diff(got.data(), want.data(), n, n), "") << "run " << run;
    c = matmul_piece_counts();
  }
  matmul_piece_bytes_min_set(0);
  std::printf("pieces: %lld on the calling thread, %lld on the worker, %lld taken over\n",
              static_cast<long long>(c.by_caller), static_cast<long long>(c.by_workers),
              static_cast<long long>(c.moved));
  EXPECT_GT(c.by_workers, 0) << "the worker never ran a piece";
  EXPECT_GT(c.moved, 0) << "no piece was taken over";
}

}  // namespace matmul_test
}  // namespace invar::test
