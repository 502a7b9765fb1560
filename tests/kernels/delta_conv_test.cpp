// Delta rule and causal conv: SIMD levels equal the references bit for bit; the references match
// float64; splitting the tokens into chunks (state carried) and the thread count change no bit.
#include <gtest/gtest.h>

#include <cmath>

#include "core/detmath.h"
#include "kernel_test_util.h"
#include "kernels/conv.h"
#include "kernels/delta_rule.h"
#include "kernels/norm.h"

namespace invar {
namespace {

using test::bit_diff;

struct DeltaInputs {
  DeltaRuleShape s;
  std::vector<float> q, k, v, g, beta, state0;
  DeltaInputs(const DeltaRuleShape& sh, uint32_t seed) : s(sh) {
    const int64_t t = s.n_tokens;
    q = test::randn(size_t(t * s.hk * s.dk), seed);
    k = test::randn(size_t(t * s.hk * s.dk), seed + 1);
    // q and k arrive L2-normalised in the model.
    l2norm_rows(q.data(), t * s.hk, s.dk, 1e-6f, q.data());
    l2norm_rows(k.data(), t * s.hk, s.dk, 1e-6f, k.data());
    v = test::randn(size_t(t * s.hv * s.dv), seed + 2);
    g = test::uniform(size_t(t * s.hv), seed + 3, -2.0f, 0.0f);
    beta = test::uniform(size_t(t * s.hv), seed + 4, 0.0f, 1.0f);
    state0 = test::randn(size_t(s.hv * s.dv * s.dk), seed + 5, 0.1f);
  }
  // Runs tokens [t0, t0 + n) with the fast kernel into o (full [T][Hv][Dv]) and state.
  void run(int64_t t0, int64_t n, std::vector<float>& state, std::vector<float>& o,
           ThreadPool& pool) const {
    DeltaRuleShape c = s;
    c.n_tokens = n;
    delta_rule(c, state.data(), q.data() + t0 * s.hk * s.dk, k.data() + t0 * s.hk * s.dk,
               v.data() + t0 * s.hv * s.dv, g.data() + t0 * s.hv, beta.data() + t0 * s.hv,
               o.data() + t0 * s.hv * s.dv, pool);
  }
};

const DeltaRuleShape kShapes[] = {{9, 2, 4, 16, 16, false},   {9, 2, 4, 16, 16, true},
                                  {5, 1, 2, 128, 128, false}, {6, 2, 6, 24, 20, true},
                                  {4, 3, 3, 5, 7, false},     {3, 2, 4, 128, 128, true}};

TEST(DeltaRule, SimdEqualsReferenceBits) {
  ThreadPool pool(2);
  for (const auto& sh : kShapes) {
    const DeltaInputs in(sh, 100);
    std::vector<float> ref_state = in.state0, ref_o(size_t(sh.n_tokens * sh.hv * sh.dv));
    delta_rule_ref(sh, ref_state.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                   in.beta.data(), ref_o.data());
    test::for_each_simd_level([&](SimdLevel) {
      std::vector<float> state = in.state0, o(ref_o.size());
      in.run(0, sh.n_tokens, state, o, pool);
      EXPECT_EQ(bit_diff(o, ref_o), "") << "Dk=" << sh.dk << " tiled=" << sh.tiled;
      EXPECT_EQ(bit_diff(state, ref_state), "") << "state Dk=" << sh.dk;
    });
  }
}

// float64 recurrence straight from delta_rule.h.
TEST(DeltaRule, ReferenceCloseToFloat64) {
  for (const auto& sh : kShapes) {
    const DeltaInputs in(sh, 200);
    std::vector<float> state = in.state0, o(size_t(sh.n_tokens * sh.hv * sh.dv));
    delta_rule_ref(sh, state.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                   in.beta.data(), o.data());
    std::vector<double> S(in.state0.begin(), in.state0.end()), eo(o.size());
    const int64_t r = sh.hv / sh.hk;
    for (int64_t t = 0; t < sh.n_tokens; ++t)
      for (int64_t h = 0; h < sh.hv; ++h) {
        const int64_t kh = sh.tiled ? h % sh.hk : h / r;
        const float* kt = &in.k[size_t((t * sh.hk + kh) * sh.dk)];
        const float* qt = &in.q[size_t((t * sh.hk + kh) * sh.dk)];
        const double decay = std::exp(double(in.g[size_t(t * sh.hv + h)]));
        const double b = in.beta[size_t(t * sh.hv + h)];
        for (int64_t j = 0; j < sh.dv; ++j) {
          double* row = &S[size_t((h * sh.dv + j) * sh.dk)];
          double kv = 0;
          for (int64_t i = 0; i < sh.dk; ++i) kv += (row[i] *= decay) * kt[i];
          const double d = b * (in.v[size_t((t * sh.hv + h) * sh.dv + j)] - kv);
          double out = 0;
          for (int64_t i = 0; i < sh.dk; ++i) out += (row[i] += d * kt[i]) * qt[i];
          eo[size_t((t * sh.hv + h) * sh.dv + j)] = out / std::sqrt(double(sh.dk));
        }
      }
    EXPECT_LE(test::max_abs_diff(o, eo), 2e-6) << "Dk=" << sh.dk;
    EXPECT_LE(test::max_abs_diff(state, S), 1e-5) << "Dk=" << sh.dk;
  }
}

// One call over T tokens == T one-token calls == chunks of 4 (state carried) == 2 threads.
TEST(DeltaRule, InvariantToChunkingAndThreads) {
  const DeltaRuleShape sh{13, 2, 4, 32, 32, false};
  const DeltaInputs in(sh, 300);
  ThreadPool pool1(1), pool2(2);
  test::for_each_simd_level([&](SimdLevel) {
    std::vector<float> st_all = in.state0, o_all(size_t(sh.n_tokens * sh.hv * sh.dv));
    in.run(0, sh.n_tokens, st_all, o_all, pool1);
    for (int64_t chunk : {1, 4, 13}) {
      for (ThreadPool* pool : {&pool1, &pool2}) {
        std::vector<float> st = in.state0, o(o_all.size(), -7.0f);
        for (int64_t t0 = 0; t0 < sh.n_tokens; t0 += chunk)
          in.run(t0, std::min(chunk, sh.n_tokens - t0), st, o, *pool);
        EXPECT_EQ(bit_diff(o, o_all), "") << "chunk " << chunk << " threads " << pool->size();
        EXPECT_EQ(bit_diff(st, st_all), "") << "state, chunk " << chunk;
      }
    }
    // The state really carries information between chunks: a fresh state gives other outputs.
    std::vector<float> st0(in.state0.size(), 0.0f), o0(o_all.size());
    in.run(0, sh.n_tokens, st0, o0, pool1);
    EXPECT_NE(bit_diff(o0, o_all), "");
  });
  // And the head mapping is not a no-op: tiled and grouped differ when Hk > 1 and Hv/Hk > 1.
  DeltaRuleShape tiled = sh;
  tiled.tiled = true;
  std::vector<float> a = in.state0, b = in.state0, oa(size_t(sh.n_tokens * sh.hv * sh.dv)),
                     ob(oa.size());
  delta_rule_ref(sh, a.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                 oa.data());
  delta_rule_ref(tiled, b.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                 in.beta.data(), ob.data());
  EXPECT_NE(bit_diff(oa, ob), "");
}

struct ConvCase {
  int64_t t, c, kc;
};
const ConvCase kConv[] = {{11, 40, 4}, {5, 16, 4}, {3, 7, 1}, {9, 33, 2}, {6, 100, 5}};

TEST(Conv, SimdEqualsReferenceBits) {
  for (const auto& cc : kConv) {
    const auto x = test::randn(size_t(cc.t * cc.c), 1);
    const auto w = test::randn(size_t(cc.c * cc.kc), 2);
    const auto st0 = test::randn(size_t((cc.kc - 1) * cc.c), 3);
    std::vector<float> ref_st = st0, ref_y(x.size());
    conv1d_silu_ref(x.data(), w.data(), ref_st.data(), cc.t, cc.c, cc.kc, ref_y.data());
    test::for_each_simd_level([&](SimdLevel) {
      std::vector<float> st = st0, y(x.size());
      conv1d_silu(x.data(), w.data(), st.data(), cc.t, cc.c, cc.kc, y.data());
      EXPECT_EQ(bit_diff(y, ref_y), "") << "C=" << cc.c << " Kc=" << cc.kc;
      EXPECT_EQ(bit_diff(st, ref_st), "") << "state C=" << cc.c;
    });
  }
}

// Channels split across 1-3 threads (runs of 16, a tail of 8 or 4): each channel's bits and state
// as one thread computes them alone. T ≥ 8 so that the pool really splits.
TEST(Conv, ThreadsSplitChannelsBitIdentical) {
  for (const ConvCase cc : {ConvCase{64, 72, 4}, ConvCase{40, 132, 3}}) {
    const auto x = test::randn(size_t(cc.t * cc.c), 11);
    const auto w = test::randn(size_t(cc.c * cc.kc), 12);
    const auto st0 = test::randn(size_t((cc.kc - 1) * cc.c), 13);
    std::vector<float> ref_st = st0, ref_y(x.size());
    conv1d_silu_ref(x.data(), w.data(), ref_st.data(), cc.t, cc.c, cc.kc, ref_y.data());
    test::for_each_simd_level([&](SimdLevel) {
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> st = st0, y(x.size(), -1.0f);
        conv1d_silu(x.data(), w.data(), st.data(), cc.t, cc.c, cc.kc, y.data(), pool);
        EXPECT_EQ(bit_diff(y, ref_y), "") << "C=" << cc.c << " threads " << threads;
        EXPECT_EQ(bit_diff(st, ref_st), "") << "state C=" << cc.c << " threads " << threads;
      }
    });
  }
}

TEST(Conv, ReferenceCloseToFloat64) {
  for (const auto& cc : kConv) {
    const auto x = test::randn(size_t(cc.t * cc.c), 4);
    const auto w = test::randn(size_t(cc.c * cc.kc), 5);
    const auto st0 = test::randn(size_t((cc.kc - 1) * cc.c), 6);
    std::vector<float> st = st0, y(x.size());
    conv1d_silu_ref(x.data(), w.data(), st.data(), cc.t, cc.c, cc.kc, y.data());
    // Window of channel ch at token t: inputs t−Kc+1 .. t, earlier ones from the initial state.
    std::vector<double> e(y.size());
    for (int64_t t = 0; t < cc.t; ++t)
      for (int64_t ch = 0; ch < cc.c; ++ch) {
        double acc = 0;
        for (int64_t j = 0; j < cc.kc; ++j) {
          const int64_t src = t - (cc.kc - 1) + j;  // token index; < 0 → state row kc−1+src
          const double in =
              src >= 0 ? x[size_t(src * cc.c + ch)] : st0[size_t((cc.kc - 1 + src) * cc.c + ch)];
          acc += in * w[size_t(ch * cc.kc + j)];
        }
        e[size_t(t * cc.c + ch)] = acc / (1.0 + std::exp(-acc));
      }
    EXPECT_LE(test::max_abs_diff(y, e), 5e-6) << "C=" << cc.c;
    // The final state holds the last Kc−1 inputs.
    if (cc.kc > 1 && cc.t >= cc.kc - 1) {
      EXPECT_EQ(st[0], x[size_t((cc.t - (cc.kc - 1)) * cc.c)]);
    }
  }
}

TEST(Conv, InvariantToChunking) {
  const ConvCase cc{11, 40, 4};
  const auto x = test::randn(size_t(cc.t * cc.c), 7);
  const auto w = test::randn(size_t(cc.c * cc.kc), 8);
  test::for_each_simd_level([&](SimdLevel) {
    std::vector<float> st_all((cc.kc - 1) * cc.c, 0.0f), y_all(x.size());
    conv1d_silu(x.data(), w.data(), st_all.data(), cc.t, cc.c, cc.kc, y_all.data());
    for (int64_t chunk : {1, 2, 5}) {
      std::vector<float> st((cc.kc - 1) * cc.c, 0.0f), y(x.size());
      for (int64_t t0 = 0; t0 < cc.t; t0 += chunk) {
        const int64_t n = std::min(chunk, cc.t - t0);
        conv1d_silu(x.data() + t0 * cc.c, w.data(), st.data(), n, cc.c, cc.kc,
                    y.data() + t0 * cc.c);
      }
      EXPECT_EQ(bit_diff(y, y_all), "") << "chunk " << chunk;
      EXPECT_EQ(bit_diff(st, st_all), "") << "state chunk " << chunk;
    }
  });
}

}  // namespace
}  // namespace invar
