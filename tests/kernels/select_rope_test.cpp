// log-softmax / softmax / top-k / MoE router and RoPE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "kernel_test_util.h"
#include "kernels/rope.h"
#include "kernels/select.h"

namespace invar {
namespace {

using test::bit_diff;

TEST(LogSoftmax, SimdEqualsReferenceBits) {
  for (int64_t n : {1, 7, 16, 33, 1000, 151936}) {
    const auto x = test::randn(size_t(n), uint32_t(n), 4.0f);
    std::vector<float> ref(x.size()), got(x.size());
    log_softmax_ref(x.data(), n, ref.data());
    test::for_each_simd_level([&](SimdLevel) {
      log_softmax(x.data(), n, got.data());
      EXPECT_EQ(bit_diff(got, ref), "") << "n=" << n;
    });
  }
}

TEST(LogSoftmax, ReferenceCloseToFloat64) {
  for (int64_t n : {1, 5, 100, 50000}) {
    const auto x = test::randn(size_t(n), uint32_t(n) + 9, 4.0f);
    std::vector<float> y(x.size()), p(x.size());
    log_softmax_ref(x.data(), n, y.data());
    softmax(x.data(), n, p.data());
    const double mx = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (float v : x) sum += std::exp(v - mx);
    std::vector<double> e(x.size()), ep(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      e[i] = x[i] - mx - std::log(sum);
      ep[i] = std::exp(e[i]);
    }
    // The canonical sum's error bound (reduce.h: n/16 sequential adds per lane, then the tree)
    // is a relative error of the sum: it shifts every log-probability by the same amount.
    const double sum_rel = (double(n) / 16 + 5) * 0x1p-24;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::fabs(y[i] - e[i]), sum_rel + 4e-7 * std::fabs(e[i]) + 1e-7) << n << " " << i;
      ASSERT_LE(std::fabs(p[i] - ep[i]), ep[i] * (sum_rel + 4e-7) + 1e-30) << n << " " << i;
    }
  }
}

TEST(TopK, OrdersByValueThenId) {
  const std::vector<float> x = {1.0f, 3.0f, NAN, 3.0f, -1.0f, 2.0f, 3.0f, NAN, 2.0f};
  int32_t ids[9];
  float vals[9];
  top_k(x.data(), 9, 9, ids, vals);
  const int32_t expect[9] = {1, 3, 6, 5, 8, 0, 4, 2, 7};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(ids[i], expect[i]) << i;
  top_k(x.data(), 9, 2, ids, vals);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(vals[1], 3.0f);
}

TEST(TopK, MatchesFullSortOnRandomTies) {
  // Values from a small set so ties are frequent.
  std::mt19937 rng(5);
  std::vector<float> x(5000);
  for (auto& v : x) v = rng() % 97 == 0 ? NAN : float(int(rng() % 50)) * 0.25f;
  std::vector<int32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const bool na = std::isnan(x[size_t(a)]), nb = std::isnan(x[size_t(b)]);
    if (na != nb) return nb;
    return !na && x[size_t(a)] > x[size_t(b)];
  });
  for (int64_t k : {1, 20, 32, 33, 64, 4999, 5000}) {
    std::vector<int32_t> ids(static_cast<size_t>(k));
    std::vector<float> vals(static_cast<size_t>(k));
    top_k(x.data(), int64_t(x.size()), k, ids.data(), vals.data());
    for (int64_t i = 0; i < k; ++i) {
      ASSERT_EQ(ids[size_t(i)], order[size_t(i)]) << "k=" << k << " i=" << i;
      ASSERT_EQ(test::float_bits(vals[size_t(i)]), test::float_bits(x[size_t(order[size_t(i)])]));
    }
  }
}

TEST(MoeRoute, SoftmaxTopKRenormalised) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  int32_t sel[3];
  float w[3];
  moe_route(logits.data(), 6, 3, sel, w);
  EXPECT_EQ(sel[0], 1);  // tie with expert 3: smaller id first
  EXPECT_EQ(sel[1], 3);
  EXPECT_EQ(sel[2], 4);
  const double e1 = std::exp(2.0), e4 = std::exp(1.0);
  EXPECT_NEAR(w[0], e1 / (2 * e1 + e4), 1e-7);
  EXPECT_NEAR(w[2], e4 / (2 * e1 + e4), 1e-7);
  EXPECT_EQ(w[0], w[1]);
  // Every level gives the same bits.
  test::for_each_simd_level([&](SimdLevel) {
    int32_t s2[3];
    float w2[3];
    moe_route(logits.data(), 6, 3, s2, w2);
    EXPECT_EQ(bit_diff(w2, w, 3), "");
  });
  // The floor 6.1035e-5 on the sum: the selected probabilities are divided by it, not by their
  // tiny sum, so the weights stay tiny.
  std::vector<float> skew(64, -30.0f);
  skew[7] = 0.0f;
  moe_route(skew.data(), 64, 2, sel, w);
  EXPECT_EQ(sel[0], 7);
  EXPECT_EQ(sel[1], 0);
  EXPECT_GT(w[0], 0.99f);
  EXPECT_LT(w[1], 1e-8f);
}

// NEOX rotation against the float64 formula; dims past n_rot untouched.
TEST(Rope, NeoxMatchesFloat64) {
  const RopeConfig cfg{64, 16, 10000.0, false, {}};
  const RopeFreqs f = rope_freqs_build(cfg);
  for (int64_t pos : {0, 1, 17, 4095, 200000}) {
    auto x = test::randn(3 * 64, uint32_t(pos) + 1);
    const auto x0 = x;
    rope_apply(f, x.data(), 3, pos);
    for (int64_t h = 0; h < 3; ++h) {
      for (int64_t j = 0; j < 8; ++j) {
        const double th = double(pos) * std::pow(10000.0, -2.0 * j / 16);
        const double a = x0[size_t(h * 64 + j)], b = x0[size_t(h * 64 + j + 8)];
        EXPECT_NEAR(x[size_t(h * 64 + j)], a * std::cos(th) - b * std::sin(th), 2e-6) << pos;
        EXPECT_NEAR(x[size_t(h * 64 + j + 8)], a * std::sin(th) + b * std::cos(th), 2e-6) << pos;
      }
      for (int64_t i = 16; i < 64; ++i) EXPECT_EQ(x[size_t(h * 64 + i)], x0[size_t(h * 64 + i)]);
    }
  }
}

// IMROPE: sections covering every pair equal NEOX bit for bit; [4,2,2,0] with n_rot 16 leaves
// pair 7 (the e component, 0 for text) unrotated (qwen3next-math.md).
TEST(Rope, ImropeSections) {
  RopeConfig neox{32, 16, 100.0, false, {}};
  RopeConfig full = neox;
  full.imrope = true;
  full.sections = {3, 3, 2, 0};
  RopeConfig partial = full;
  partial.sections = {4, 2, 2, 0};
  const RopeFreqs fn = rope_freqs_build(neox), ff = rope_freqs_build(full),
                  fp = rope_freqs_build(partial);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(ff.rotated[size_t(j)], 1) << j;
  for (int j = 0; j < 8; ++j) EXPECT_EQ(fp.rotated[size_t(j)], j == 7 ? 0 : 1) << j;
  const auto x0 = test::randn(2 * 32, 3);
  auto a = x0, b = x0, c = x0;
  rope_apply(fn, a.data(), 2, 123);
  rope_apply(ff, b.data(), 2, 123);
  rope_apply(fp, c.data(), 2, 123);
  EXPECT_EQ(bit_diff(a, b), "");
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(c[size_t(h * 32 + 7)], x0[size_t(h * 32 + 7)]);
    EXPECT_EQ(c[size_t(h * 32 + 15)], x0[size_t(h * 32 + 15)]);
    EXPECT_NE(c[size_t(h * 32 + 6)], x0[size_t(h * 32 + 6)]);
    EXPECT_EQ(c[size_t(h * 32 + 6)], a[size_t(h * 32 + 6)]);
  }
}

// IMROPE positions (t, h, w) of image tokens: with sections {2, 1, 1, 0} (qwen35-tiny) the pairs
// take t, h, w, t by sector mod 3 (ggml's imrope); (p, p, p) is the text rotation bit for bit, and
// changing h or w moves only the pairs of that axis.
TEST(Rope, ImropeAxes) {
  RopeConfig cfg{16, 8, 1e7, true, {}};
  cfg.sections = {2, 1, 1, 0};
  const RopeFreqs f = rope_freqs_build(cfg);
  const std::vector<uint8_t> want_axis = {0, 1, 2, 0};
  EXPECT_EQ(f.axis, want_axis);
  const auto q0 = test::randn(2 * 16, 5), k0 = test::randn(16, 6);
  auto qa = q0, ka = k0, qb = q0, kb = k0;
  rope_apply_qk(f, qa.data(), 2, ka.data(), 1, int64_t(41));
  rope_apply_qk(f, qb.data(), 2, kb.data(), 1, RopePos{41, 41, 41});
  EXPECT_EQ(bit_diff(qa, qb), "");
  EXPECT_EQ(bit_diff(ka, kb), "");
  for (int axis = 1; axis <= 2; ++axis) {
    RopePos p{41, 41, 41};
    p[size_t(axis)] = 45;
    auto qc = q0, kc = k0;
    rope_apply_qk(f, qc.data(), 2, kc.data(), 1, p);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < 4; ++j) {
        const bool moved = want_axis[size_t(j)] == axis;
        for (int64_t d : {j, j + 4}) {
          const size_t i = size_t(h * 16 + d);
          if (moved)
            EXPECT_NE(qc[i], qa[i]) << "axis " << axis << " pair " << j;
          else
            EXPECT_EQ(qc[i], qa[i]) << "axis " << axis << " pair " << j;
        }
      }
  }
}

// A head's rotation depends on (pos, values) only: every SIMD level, and rotating heads one at a
// time or together, give the same bits.
TEST(Rope, PositionOnly) {
  const RopeFreqs f = rope_freqs_build(RopeConfig{128, 32, 1e7, false, {}});
  const auto x0 = test::randn(4 * 128, 8);
  auto together = x0;
  rope_apply_ref(f, together.data(), 4, 777);
  // RoPE has no per-ISA kernel (rope.cpp): one run covers every level.
  auto one = x0;
  for (int64_t h = 0; h < 4; ++h) rope_apply(f, one.data() + h * 128, 1, 777);
  EXPECT_EQ(bit_diff(one, together), "");
}

// q and k heads rotated in one call (one sincos per pair) equal rope_apply on each, IMROPE too.
TEST(Rope, QkTogetherEqualsEach) {
  RopeConfig im{64, 32, 1e7, true, {}};
  im.sections = {6, 5, 3, 0};
  for (const RopeConfig& cfg : {RopeConfig{64, 32, 1e7, false, {}}, im}) {
    const RopeFreqs f = rope_freqs_build(cfg);
    const auto q0 = test::randn(3 * 64, 21), k0 = test::randn(2 * 64, 22);
    auto q = q0, k = k0, qe = q0, ke = k0;
    rope_apply_qk(f, q.data(), 3, k.data(), 2, 4321);
    rope_apply_ref(f, qe.data(), 3, 4321);
    rope_apply_ref(f, ke.data(), 2, 4321);
    EXPECT_EQ(bit_diff(q, qe), "");
    EXPECT_EQ(bit_diff(k, ke), "");
  }
}

// 2-D RoPE of the vision tower: pairs (j, j + D/2); the first D/4 rotate by the row y, the next
// D/4 by the column x, each section with frequencies base^(−4i/D) from i = 0.
TEST(Rope, TwoDimensionalMatchesFloat64) {
  const int64_t D = 16;
  const Rope2d f = rope_2d_build(D, 10000.0);
  for (auto [y, x] : {std::pair<int64_t, int64_t>{0, 0}, {3, 5}, {40, 2}, {17, 63}}) {
    auto q = test::randn(2 * D, uint32_t(y * 100 + x + 1));
    auto k = test::randn(3 * D, uint32_t(y * 100 + x + 2));
    const auto q0 = q, k0 = k;
    rope_2d_apply_qk(f, q.data(), 2, k.data(), 3, y, x);
    auto check = [&](const std::vector<float>& got, const std::vector<float>& in, int64_t heads) {
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < D / 2; ++j) {
          const int64_t i = j < D / 4 ? j : j - D / 4;
          const double th = double(j < D / 4 ? y : x) * std::pow(10000.0, -4.0 * double(i) / D);
          const double a = in[size_t(h * D + j)], b = in[size_t(h * D + j + D / 2)];
          EXPECT_NEAR(got[size_t(h * D + j)], a * std::cos(th) - b * std::sin(th), 2e-6);
          EXPECT_NEAR(got[size_t(h * D + j + D / 2)], a * std::sin(th) + b * std::cos(th), 2e-6);
        }
    };
    check(q, q0, 2);
    check(k, k0, 3);
  }
}

}  // namespace
}  // namespace invar
