// The product with quantised weights keeps the contract (DESIGN N1, N2, N7, C7): for every type,
// every SIMD level, thread count and number of rows, the result has the bits of the scalar
// reference of the canonical order (16 lanes over k, then the reduce.h tree) over dequant_row's
// weights; that reference is checked against a direct evaluation and float64; and a quantised
// matrix is read in place (no packed or F32 copy).
#include "kernels/matmul/f32_act.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "kernels/reduce.h"
#include "matmul_test_util.h"
#include "quant/dequant.h"

namespace invar::test {
namespace qmatmul_test {

// K for each type: one block, then several 512-weight chunks of the prefill path, ending
// on a partial one; for 32-weight blocks a K that is not a multiple of 256 either.
std::vector<int64_t> quant_ks(DType t) {
  if (dtype_block_size(t) == 256) return {256, 2304};
  return {96, 2080};
}

// True if a pool of `threads` gives work to its last thread for n outputs in groups of 16.
bool last_thread_works(ThreadPool& pool, int64_t n) {
  std::atomic<bool> worked{false};
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e, int t) {
        if (t == pool.size() - 1 && b < e) worked = true;
      },
      16);
  return worked;
}

TEST(QuantMatmul, EveryPathEqualsReferenceBitExact) {
  SimdRestore restore;
  ThreadPool p1(1), p2(2), p3(3);
  ThreadPool* pools[] = {&p1, &p2, &p3};
  const int64_t n = 37;  // not a multiple of 16, nor of the 4-row groups
  ASSERT_TRUE(last_thread_works(p3, n));
  for (DType t : kQuantTypes) {
    for (int64_t k : quant_ks(t)) {
      OwnedMatrix w = random_matrix(t, k, n, uint32_t(k + 31 * int(t)));
      for (int64_t m : {1, 2, 3, 4, 7, 12, 16, 33, 64, 97, 512}) {
        // Long rows: the chunked path with accumulators parked, over two row blocks, is
        // covered by m = 97 (PrefillCasesEqualReference covers the rest of the prefill plans).
        if (k > 256 && m > 97) continue;
        const auto x = random_activations(m * k, uint32_t(m + k));
        std::vector<float> ref(size_t(m * n));
        matmul_ref(w.m, x.data(), m, ref.data());
        for (SimdLevel level : available_levels()) {
          simd_set(level);
          for (ThreadPool* pool : pools) {
            // The scalar level runs the reference itself per thread's range of outputs: the
            // 3-thread split is the case there (CI time: the reference is most of this test
            // under ASan).
            if (level == SimdLevel::scalar && pool != &p3) continue;
            std::vector<float> y(size_t(m * n), std::numeric_limits<float>::quiet_NaN());
            matmul(w.m, x.data(), m, y.data(), *pool);
            EXPECT_EQ(bits_diff(y.data(), ref.data(), m * n, n), "")
                << case_name(t, level) << " K=" << k << " M=" << m << " threads=" << pool->size();
          }
        }
      }
    }
  }
}

// Every case of the prefill path's plan (qprefill_plan), for the register tiles' 4 rows (AVX-512
// and AVX2), the activation budget of this CPU's L2 and the largest one, and every weight type: K
// within one chunk (12-row groups, nothing parked) or over several (6-row groups, accumulators
// parked), one row block or several, packed activations or (K > 6144) activations read in place,
// and row counts that are not a multiple of the tile's rows (tiles of R and R − 1 rows). Each shape
// equals the scalar reference bit for bit, and the shapes are checked to reach each case.
TEST(QuantMatmul, PrefillCasesEqualReference) {
  SimdRestore restore;
  ThreadPool p1(1), p2(2);
  struct Shape {
    int64_t k, m;
  };
  const Shape shapes[] = {{512, 37}, {512, 300}, {1536, 160}, {4608, 37}, {4608, 64}, {6400, 64}};
  // The plan this CPU runs (its L2 sets the activation budget) and the largest one.
  for (int64_t panel : {qprefill_panel_floats(), kQPanelFloats}) {
    const int64_t tile_rows = 4;
    bool one_chunk = false, parked = false, blocks = false, packed = false, in_place = false;
    bool odd = false;
    for (const Shape& s : shapes) {
      const QPrefillPlan p = qprefill_plan(s.m, s.k, tile_rows, panel);
      one_chunk |= s.k <= p.k_chunk && p.group_rows == kQGroupRowsMax;
      parked |= s.k > p.k_chunk && p.group_rows == kQGroupRowsLargeK;
      blocks |= s.m > p.block_rows;
      packed |= p.packed && s.m > p.block_rows;
      in_place |= !p.packed;
      odd |= p.block_rows % tile_rows == 0 && s.m % tile_rows != 0;
    }
    EXPECT_TRUE(one_chunk && parked && blocks && packed && in_place && odd)
        << "panel " << panel << ": " << one_chunk << parked << blocks << packed << in_place << odd;
  }
  const int64_t n = 37;
  std::vector<DType> types(std::begin(kQuantTypes), std::end(kQuantTypes));
  types.insert(types.end(), {DType::F32, DType::F16, DType::BF16});
  for (DType t : types) {
    for (const Shape& s : shapes) {
      OwnedMatrix w = random_matrix(t, s.k, n, uint32_t(s.k + s.m + 7 * int(t)));
      const auto x = random_activations(s.m * s.k, uint32_t(s.m * 3 + s.k));
      std::vector<float> ref(size_t(s.m * n));
      matmul_ref(w.m, x.data(), s.m, ref.data());
      for (SimdLevel level : available_levels()) {
        if (level == SimdLevel::scalar) continue;  // matmul is the reference itself
        simd_set(level);
        for (ThreadPool* pool : {&p1, &p2}) {
          std::vector<float> y(size_t(s.m * n), std::numeric_limits<float>::quiet_NaN());
          matmul(w.m, x.data(), s.m, y.data(), *pool);
          EXPECT_EQ(bits_diff(y.data(), ref.data(), s.m * n, n), "")
              << case_name(t, level) << " K=" << s.k << " M=" << s.m << " threads=" << pool->size();
        }
      }
    }
  }
}

// The reference, evaluated here straight from its definition over dequant_row's rows, and its
// distance to float64: |y − exact| ≤ γ_(K/16+4) · Σ|w·x| (16 lanes of K/16 FMAs, then 4 levels
// of the tree). Some outputs must be far from zero so that the check bites.
TEST(QuantMatmul, ReferenceIsTheLaneOrderAndCloseToFloat64) {
  for (DType t : kQuantTypes) {
    const int64_t k = 512, n = 6, m = 3;
    OwnedMatrix w = random_matrix(t, k, n, 77);
    const auto x = random_activations(m * k, 78);
    std::vector<float> y(static_cast<size_t>(m * n)), row(static_cast<size_t>(k));
    matmul_ref(w.m, x.data(), m, y.data());
    const double u = std::ldexp(1.0, -24), len = double(k / 16 + 4);
    const double gamma = len * u / (1 - len * u);
    int nonzero = 0;
    for (int64_t j = 0; j < n; ++j) {
      dequant_row(t, static_cast<const uint8_t*>(w.m.data()) + j * dtype_row_bytes(t, k),
                  row.data(), k);
      for (int64_t r = 0; r < m; ++r) {
        float lanes[16] = {};
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          lanes[i % 16] = std::fma(row[size_t(i)], x[size_t(r * k + i)], lanes[i % 16]);
          exact += double(row[size_t(i)]) * double(x[size_t(r * k + i)]);
          mag += std::fabs(double(row[size_t(i)]) * double(x[size_t(r * k + i)]));
        }
        const float want = reduce_lanes_tree(lanes);
        EXPECT_EQ(float_bits(y[size_t(r * n + j)]), float_bits(want))
            << dtype_name(t) << " m=" << r << " n=" << j;
        EXPECT_LE(std::fabs(double(y[size_t(r * n + j)]) - exact), gamma * mag)
            << dtype_name(t) << " m=" << r << " n=" << j;
        nonzero += mag > 0;
      }
    }
    EXPECT_GT(nonzero, 0) << dtype_name(t);
  }
}

// Every F16 value as a Q8_0 scale (zero, subnormal, normal, negative, Inf, NaN) through every
// path at M = 1 and M = 4, against dequant_row's bits: the few-rows kernels convert a step's
// scales in their own ways (AVX-512: the words of a row packed by integer instructions, then one
// vcvtph2ps), and any faster conversion must agree for all 65536. Row r holds scale s(r) in
// block r % 8 of its one kernel step and ordinary scales elsewhere, so an Inf or NaN output has
// a single origin. s(r) = r keeps the kinds apart (whole groups of 8 rows of one kind);
// s(r) = 40503·r mod 2^16 mixes them within a group.
TEST(QuantMatmul, Q8_0EveryF16Scale) {
  SimdRestore restore;
  ThreadPool pool(2);
  const int64_t k = 256, n = 65536;
  const int64_t row_bytes = dtype_row_bytes(DType::Q8_0, k);
  for (uint32_t mul : {1u, 40503u}) {
    OwnedMatrix w = random_matrix(DType::Q8_0, k, n, mul);
    std::mt19937 rng(mul);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t b = 0; b < k / kQ8Block; ++b) {
        const uint16_t h =
            b == r % 8 ? uint16_t(uint32_t(r) * mul) : f32_to_f16(uniform(rng, 1e-3f, 2e-2f));
        std::memcpy(w.bytes.data() + r * row_bytes + b * kQ8BlockBytes, &h, 2);
      }
    }
    for (int64_t m : {1, 4}) {
      const auto x = random_activations(m * k, uint32_t(m + mul));
      std::vector<float> ref(size_t(m * n));
      matmul_ref(w.m, x.data(), m, ref.data());
      for (SimdLevel level : available_levels()) {
        if (level == SimdLevel::scalar) continue;  // matmul is the reference itself
        simd_set(level);
        std::vector<float> y(size_t(m * n), 7.0f);
        matmul(w.m, x.data(), m, y.data(), pool);
        EXPECT_EQ(bits_diff(y.data(), ref.data(), m * n, n), "")
            << simd_name(level) << " M=" << m << " scale multiplier " << mul;
      }
    }
  }
}

// Weights stay where the file has them. Embedding rows decode too.
TEST(QuantMatmul, ReadsWeightsInPlace) {
  for (DType t : kQuantTypes) {
    const int64_t k = dtype_block_size(t) == 256 ? 512 : 64;
    OwnedMatrix w = random_matrix(t, k, 20, 2);
    EXPECT_EQ(w.m.data(), w.bytes.data()) << dtype_name(t);
    std::vector<float> row(static_cast<size_t>(k)), want(static_cast<size_t>(k));
    w.m.row_to_f32(19, row.data());
    dequant_row(t, w.bytes.data() + 19 * dtype_row_bytes(t, k), want.data(), k);
    EXPECT_EQ(bits_diff(row.data(), want.data(), k, k), "") << dtype_name(t);
  }
}

// One buffer serves every call whatever it held (NaN first), and a buffer too small stops the
// process with a clear message.
TEST(QuantMatmul, CallerScratch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SimdRestore restore;
  ThreadPool pool(2);
  std::vector<float> scratch(size_t(matmul_scratch_floats(pool.size())),
                             std::numeric_limits<float>::quiet_NaN());
  const int64_t k = 2304, n = 40, m = 9;
  const auto x = random_activations(m * k, 5);
  OwnedMatrix w = random_matrix(DType::Q4_K, k, n, 17);
  std::vector<float> ref(size_t(m * n));
  matmul_ref(w.m, x.data(), m, ref.data());
  for (SimdLevel level : available_levels()) {
    if (level == SimdLevel::scalar) continue;  // the scalar reference needs no scratch
    simd_set(level);
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<float> y(size_t(m * n), 7.0f);
      matmul(w.m, x.data(), m, y.data(), pool, scratch);
      EXPECT_EQ(bits_diff(y.data(), ref.data(), m * n, n), "") << simd_name(level);
    }
    const std::span<float> small(scratch.data(), scratch.size() - 1);
    std::vector<float> y(size_t(m * n));
    EXPECT_DEATH(matmul(w.m, x.data(), m, y.data(), pool, small), "scratch of");
  }
}

}  // namespace qmatmul_test
}  // namespace invar::test
