// Attention: SIMD levels equal the reference bit for bit; the reference matches float64; and the
// output of a query depends only on its position and the keys 0..p — not on which other queries
// share the call, the chunking, the KV block size, or the thread count.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <span>

#include "kernel_test_util.h"

namespace invar {
namespace {

using test::bit_diff;

// A KV history of n_pos positions stored in blocks of `bs` rows, each block its own allocation
// (rows padded to row_stride), so paging is really exercised.
struct PagedKv {
  int64_t bs, stride;
  std::vector<std::vector<float>> kb, vb;
  std::vector<const float*> kp, vp;
  PagedKv(const std::vector<float>& k, const std::vector<float>& v, int64_t n_pos, int64_t row,
          int64_t bs_, int64_t pad)
      : bs(bs_), stride(row + pad) {
    const int64_t nb = (n_pos + bs - 1) / bs;
    kb.assign(size_t(nb), std::vector<float>(size_t(bs * stride), NAN));
    vb.assign(size_t(nb), std::vector<float>(size_t(bs * stride), NAN));
    for (int64_t p = 0; p < n_pos; ++p)
      for (int64_t i = 0; i < row; ++i) {
        kb[size_t(p / bs)][size_t((p % bs) * stride + i)] = k[size_t(p * row + i)];
        vb[size_t(p / bs)][size_t((p % bs) * stride + i)] = v[size_t(p * row + i)];
      }
    for (auto& b : kb) kp.push_back(b.data());
    for (auto& b : vb) vp.push_back(b.data());
  }
  KvView view() const { return KvView{kp.data(), vp.data(), bs, stride}; }
};

struct Case {
  int64_t h, hkv, d, n_pos;
};
const Case kCases[] = {
    {4, 2, 16, 37}, {2, 1, 24, 20}, {8, 2, 64, 70}, {2, 2, 256, 33}, {3, 1, 5, 9}};

// Random K and V histories and queries of a case, from seeds seed, seed + 1 and seed + 2.
struct Inputs {
  std::vector<float> k, v, q;
};
Inputs random_inputs(const Case& c, uint32_t seed) {
  return {test::randn(size_t(c.n_pos * c.hkv * c.d), seed),
          test::randn(size_t(c.n_pos * c.hkv * c.d), seed + 1),
          test::randn(size_t(c.n_pos * c.h * c.d), seed + 2, 2.0f)};
}

TEST(Attention, SimdEqualsReferenceBits) {
  ThreadPool pool(2);
  for (const auto& c : kCases) {
    const auto k = test::randn(size_t(c.n_pos * c.hkv * c.d), 1);
    const auto v = test::randn(size_t(c.n_pos * c.hkv * c.d), 2);
    const auto q = test::randn(size_t(c.n_pos * c.h * c.d), 3, 2.0f);
    PagedKv kv(k, v, c.n_pos, c.hkv * c.d, 16, 3);
    const AttentionShape s{c.n_pos, 0, c.h, c.hkv, c.d, 1.0f / std::sqrt(float(c.d))};
    std::vector<float> ref(q.size()), got(q.size());
    attention_ref(s, kv.view(), q.data(), ref.data());
    test::for_each_simd_level([&](SimdLevel) {
      attention(s, kv.view(), q.data(), got.data(), pool);
      EXPECT_EQ(bit_diff(got, ref), "") << "H=" << c.h << " D=" << c.d;
    });
  }
}

// Bidirectional attention (n_keys > 0): every query gets the bits the causal kernel gives a
// query at the last key's position, at every SIMD level and thread count.
TEST(Attention, BidirectionalEqualsCausalAtLastPosition) {
  for (const auto& c : kCases) {
    const auto [k, v, q] = random_inputs(c, 21);
    PagedKv kv(k, v, c.n_pos, c.hkv * c.d, 16, 0);
    const float scale = 1.0f / std::sqrt(float(c.d));
    std::vector<float> want(q.size());
    for (int64_t t = 0; t < c.n_pos; ++t)
      attention_ref(AttentionShape{1, c.n_pos - 1, c.h, c.hkv, c.d, scale}, kv.view(),
                    q.data() + t * c.h * c.d, want.data() + t * c.h * c.d);
    AttentionShape all{c.n_pos, 0, c.h, c.hkv, c.d, scale};
    all.n_keys = c.n_pos;
    test::for_each_simd_level([&](SimdLevel) {
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> got(q.size());
        attention(all, kv.view(), q.data(), got.data(), pool);
        EXPECT_EQ(bit_diff(got, want), "") << "H=" << c.h << " D=" << c.d << " " << threads;
      }
    });
  }
}

// The caller's scratch: one buffer sized once for the longest context serves every call, its
// leftovers (NaN here, then the previous call's data) never reach the output, and a buffer too
// small for the call is a caller's bug that stops the process.
TEST(Attention, CallerScratch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ThreadPool pool(2);
  const Case c{8, 2, 64, 70};
  const auto k = test::randn(size_t(c.n_pos * c.hkv * c.d), 11);
  const auto v = test::randn(size_t(c.n_pos * c.hkv * c.d), 12);
  const auto q = test::randn(size_t(c.n_pos * c.h * c.d), 13, 2.0f);
  PagedKv kv(k, v, c.n_pos, c.hkv * c.d, 16, 0);
  const float scale = 1.0f / std::sqrt(float(c.d));
  std::vector<float> scratch(size_t(attention_scratch_floats(c.n_pos, c.d, pool.size())), NAN);
  test::for_each_simd_level([&](SimdLevel) {
    for (int64_t n : {c.n_pos, int64_t(1), int64_t(30)}) {
      const AttentionShape s{n, c.n_pos - n, c.h, c.hkv, c.d, scale};
      const float* qs = q.data() + (c.n_pos - n) * c.h * c.d;
      std::vector<float> ref(size_t(n * c.h * c.d)), got(ref.size());
      attention_ref(s, kv.view(), qs, ref.data());
      attention(s, kv.view(), qs, got.data(), pool, scratch);
      EXPECT_EQ(bit_diff(got, ref), "") << "T=" << n;
    }
    const AttentionShape all{c.n_pos, 0, c.h, c.hkv, c.d, scale};
    std::vector<float> out(q.size());
    const std::span<float> small(scratch.data(), scratch.size() - 1);
    EXPECT_DEATH(attention(all, kv.view(), q.data(), out.data(), pool, small), "scratch of");
  });
}

TEST(Attention, ReferenceCloseToFloat64) {
  for (const auto& c : kCases) {
    const auto [k, v, q] = random_inputs(c, 4);
    PagedKv kv(k, v, c.n_pos, c.hkv * c.d, 7, 0);
    const double scale = 1.0 / std::sqrt(double(c.d));
    const AttentionShape s{c.n_pos, 0, c.h, c.hkv, c.d, float(scale)};
    std::vector<float> got(q.size());
    attention_ref(s, kv.view(), q.data(), got.data());
    std::vector<double> expect(q.size());
    const int64_t group = c.h / c.hkv;
    for (int64_t t = 0; t < c.n_pos; ++t)
      for (int64_t h = 0; h < c.h; ++h) {
        const int64_t g = h / group;
        std::vector<double> sc(size_t(t + 1));
        double mx = -1e300;
        for (int64_t p = 0; p <= t; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < c.d; ++i)
            dot +=
                double(q[size_t((t * c.h + h) * c.d + i)]) * k[size_t((p * c.hkv + g) * c.d + i)];
          sc[size_t(p)] = dot * scale;
          mx = std::max(mx, sc[size_t(p)]);
        }
        double sum = 0;
        for (auto& e : sc) sum += (e = std::exp(e - mx));
        for (int64_t i = 0; i < c.d; ++i) {
          double o = 0;
          for (int64_t p = 0; p <= t; ++p)
            o += sc[size_t(p)] * v[size_t((p * c.hkv + g) * c.d + i)];
          expect[size_t((t * c.h + h) * c.d + i)] = o / sum;
        }
      }
    EXPECT_LE(test::max_abs_diff(got, expect), 2e-6) << "H=" << c.h << " D=" << c.d;
  }
}

// The same queries computed all at once, one position per call, in chunks of 7, with blocks of
// 1, 16 and 64 rows, and with 1 or 2 threads: identical bits.
TEST(Attention, InvariantToChunkingPagingAndThreads) {
  const Case c{4, 2, 32, 50};
  const auto k = test::randn(size_t(c.n_pos * c.hkv * c.d), 7);
  const auto v = test::randn(size_t(c.n_pos * c.hkv * c.d), 8);
  const auto q = test::randn(size_t(c.n_pos * c.h * c.d), 9, 2.0f);
  const float scale = 1.0f / std::sqrt(float(c.d));
  const int64_t qrow = c.h * c.d;
  ThreadPool pool1(1), pool2(2);
  test::for_each_simd_level([&](SimdLevel) {
    PagedKv kv16(k, v, c.n_pos, c.hkv * c.d, 16, 0);
    std::vector<float> all(q.size());
    attention(AttentionShape{c.n_pos, 0, c.h, c.hkv, c.d, scale}, kv16.view(), q.data(), all.data(),
              pool1);
    for (int64_t bs : {1, 16, 64}) {
      PagedKv kv(k, v, c.n_pos, c.hkv * c.d, bs, 5);
      for (int64_t chunk : {1, 7, 50}) {
        for (ThreadPool* pool : {&pool1, &pool2}) {
          std::vector<float> out(q.size(), -1.0f);
          for (int64_t p0 = 0; p0 < c.n_pos; p0 += chunk) {
            const int64_t n = std::min(chunk, c.n_pos - p0);
            attention(AttentionShape{n, p0, c.h, c.hkv, c.d, scale}, kv.view(),
                      q.data() + p0 * qrow, out.data() + p0 * qrow, *pool);
          }
          EXPECT_EQ(bit_diff(out, all), "")
              << "block " << bs << " chunk " << chunk << " threads " << pool->size();
        }
      }
    }
  });
  // The condition really matters: the outputs differ between positions and are causal — a key
  // changed at position 30 changes position 30's output but not position 29's.
  auto k2 = k;
  k2[size_t(30 * c.hkv * c.d)] += 1.0f;
  PagedKv kv_a(k, v, c.n_pos, c.hkv * c.d, 16, 0), kv_b(k2, v, c.n_pos, c.hkv * c.d, 16, 0);
  std::vector<float> a(q.size()), b(q.size());
  attention_ref(AttentionShape{c.n_pos, 0, c.h, c.hkv, c.d, scale}, kv_a.view(), q.data(),
                a.data());
  attention_ref(AttentionShape{c.n_pos, 0, c.h, c.hkv, c.d, scale}, kv_b.view(), q.data(),
                b.data());
  EXPECT_EQ(bit_diff(a.data() + 29 * qrow, b.data() + 29 * qrow, size_t(qrow)), "");
  EXPECT_NE(bit_diff(a.data() + 30 * qrow, b.data() + 30 * qrow, size_t(qrow)), "");
}

}  // namespace
}  // namespace invar
