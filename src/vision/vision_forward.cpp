#include "vision/vision_forward.h"

#include <algorithm>

#include "core/detmath.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace invar {
namespace {

// y[M][N] = x[M][K]·Wᵀ + b[N].
void linear(const Matrix& w, const std::vector<float>& b, const float* x, int64_t m, float* y,
            ThreadPool& pool, std::span<float> scratch) {
  matmul(w, x, m, y, pool, scratch);
  for (int64_t r = 0; r < m; ++r) add_inplace(y + r * w.n(), b.data(), w.n());
}

// Bidirectional attention of every patch over all T patches of the image, keys in patch order,
// through the canonical reductions of the text model's attention (kernels/attention.h, n_keys).
// qkv[T][3C] holds q, k, v per patch (heads of D). They are regrouped by head, heads[3][H][T][D],
// and each head attends on its own: its K and V (T·D floats each) then stay in cache while every
// query sweeps them, where rows of 3C floats interleaving all heads would be fetched from memory
// once per query and head. ho[H][T][D] receives the heads' outputs, out[T][C] the result.
void attention_all(const VisionHparams& hp, int64_t T, const float* qkv, float* heads, float* ho,
                   float* out, ThreadPool& pool, std::span<float> scratch) {
  const int64_t C = hp.n_embd, D = hp.head_dim, H = hp.n_head;
  for (int64_t part = 0; part < 3; ++part)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const float* src = qkv + t * 3 * C + part * C + h * D;
        std::copy(src, src + D, heads + ((part * H + h) * T + t) * D);
      }
  AttentionShape s{T, 0, 1, 1, D, det_rsqrt(float(D))};
  s.n_keys = T;
  for (int64_t h = 0; h < H; ++h) {
    const float* k = heads + (H + h) * T * D;
    const float* v = heads + (2 * H + h) * T * D;
    const KvView kv{&k, &v, T, D};
    attention(s, kv, heads + h * T * D, ho + h * T * D, pool, scratch);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      std::copy(ho + (h * T + t) * D, ho + (h * T + t + 1) * D, out + t * C + h * D);
}

// An element-wise op over x[rows][width] in place, rows split across the pool: each element's
// operations are the same whoever computes it, so the bits do not depend on the thread count.
template <typename Op>
void rows_parallel(float* x, int64_t rows, int64_t width, ThreadPool& pool, Op op) {
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1, int) {
    op(x + r0 * width, (r1 - r0) * width, x + r0 * width);
  });
}

// Merger of 2 × 2 patches: fc2(gelu_erf(fc1(x[n][M]) + b1) + b2 → y[n][P].
void merger_mlp(const Matrix& fc1, const std::vector<float>& b1, const Matrix& fc2,
                const std::vector<float>& b2, const float* x, int64_t n, float* y,
                VisionBuffers& buf, ThreadPool& pool) {
  float* mid = buf.mid.data();
  linear(fc1, b1, x, n, mid, pool, buf.scratch);
  rows_parallel(mid, n, fc1.n(), pool, gelu_erf);
  linear(fc2, b2, mid, n, y, pool, buf.scratch);
}

// Column block `slot` of out[n][width] = y[n][P].
void place(const float* y, int64_t n, int64_t P, int64_t slot, int64_t width, float* out) {
  for (int64_t r = 0; r < n; ++r) std::copy(y + r * P, y + (r + 1) * P, out + r * width + slot * P);
}

}  // namespace

void VisionBuffers::reserve(const VisionHparams& hp, int64_t patches, int n_threads) {
  if (patches <= capacity && n_threads <= threads) return;
  capacity = std::max(capacity, patches);
  threads = std::max(threads, n_threads);
  const int64_t T = capacity, C = hp.n_embd, K = 3 * hp.patch * hp.patch;
  const int64_t group = hp.merge * hp.merge, M = C * group, N = T / group;
  h.resize(size_t(T * C));
  cur.resize(size_t(T * std::max(C, K)));
  qkv.resize(size_t(T * 3 * C));
  heads.resize(size_t(T * 3 * C));
  attn.resize(size_t(T * C));
  tmp.resize(size_t(T * C));
  ff.resize(size_t(T * hp.n_ff));
  merged.resize(size_t(N * M));
  mid.resize(size_t(N * M));
  y.resize(size_t(N * hp.n_out));
  scratch.resize(size_t(
      std::max(matmul_scratch_floats(threads), attention_scratch_floats(T, hp.head_dim, threads))));
}

std::vector<float> vision_encode(const VisionModel& m, const VisionImage& img, ThreadPool& pool) {
  VisionBuffers buf;
  std::vector<float> out;
  vision_encode(m, img, pool, buf, out);
  return out;
}

void vision_encode(const VisionModel& m, const VisionImage& img, ThreadPool& pool,
                   VisionBuffers& buf, std::vector<float>& out) {
  vision_encode_until(m, img, pool, buf, out, VisionStop());
}

bool vision_encode_until(const VisionModel& m, const VisionImage& img, ThreadPool& pool,
                         VisionBuffers& buf, std::vector<float>& out, const VisionStop& stop) {
  const auto stopped = [&stop] { return stop && stop(); };
  const VisionHparams& hp = m.hp;
  const VisionWeights& w = m.w;
  const PatchGrid g = patch_grid_of(hp, img.width, img.height);
  const int64_t T = g.n_tokens(), C = hp.n_embd, F = hp.n_ff, H = hp.n_head;
  const int64_t group = hp.merge * hp.merge;
  const int64_t M = C * group, N = T / group, P = hp.n_out, width = hp.n_embd_out();
  buf.reserve(hp, T, pool.size());
  out.resize(size_t(N * width));
  float* y = buf.y.data();
  float* h = buf.h.data();

  if (stopped()) return false;
  // Patch embedding: the two temporal halves of the Conv3D kernel over the same frame.
  patch_grid_pixels(hp, g, img, buf.cur.data());
  matmul(w.patch0, buf.cur.data(), T, h, pool, buf.scratch);
  matmul(w.patch1, buf.cur.data(), T, buf.tmp.data(), pool, buf.scratch);
  add_inplace(h, buf.tmp.data(), T * C);
  for (int64_t t = 0; t < T; ++t) add_inplace(h + t * C, w.patch_b.data(), C);
  patch_grid_add_pos(hp, g, w.pos_embd, h);

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const VisionLayerWeights& lw = w.layers[size_t(l)];
    // Attention block.
    if (stopped()) return false;
    layernorm_rows(h, lw.ln1_w.data(), lw.ln1_b.data(), T, C, hp.eps, buf.cur.data());
    linear(lw.qkv, lw.qkv_b, buf.cur.data(), T, buf.qkv.data(), pool, buf.scratch);
    for (int64_t t = 0; t < T; ++t) {
      float* q = buf.qkv.data() + t * 3 * C;
      rope_2d_apply_qk(m.rope, q, H, q + C, H, g.y[size_t(t)], g.x[size_t(t)]);
    }
    attention_all(hp, T, buf.qkv.data(), buf.heads.data(), buf.tmp.data(), buf.attn.data(), pool,
                  buf.scratch);
    linear(lw.out, lw.out_b, buf.attn.data(), T, buf.tmp.data(), pool, buf.scratch);
    add_inplace(h, buf.tmp.data(), T * C);
    // MLP block.
    if (stopped()) return false;
    layernorm_rows(h, lw.ln2_w.data(), lw.ln2_b.data(), T, C, hp.eps, buf.cur.data());
    linear(lw.up, lw.up_b, buf.cur.data(), T, buf.ff.data(), pool, buf.scratch);
    rows_parallel(buf.ff.data(), T, F, pool, gelu_tanh);
    linear(lw.down, lw.down_b, buf.ff.data(), T, buf.tmp.data(), pool, buf.scratch);
    add_inplace(h, buf.tmp.data(), T * C);
    if (!hp.deepstack[size_t(l)]) continue;
    // Deepstack merger: the norm runs over the 4 concatenated patches (postshuffle).
    const int64_t slot = 1 + std::count(hp.deepstack.begin(), hp.deepstack.begin() + l, 1);
    layernorm_rows(h, lw.ds_norm_w.data(), lw.ds_norm_b.data(), N, M, hp.eps, buf.merged.data());
    merger_mlp(lw.ds_fc1, lw.ds_fc1_b, lw.ds_fc2, lw.ds_fc2_b, buf.merged.data(), N, y, buf, pool);
    place(y, N, P, slot, width, out.data());
  }

  // Main merger: the norm runs per patch, then 4 consecutive patches are one row of M.
  if (stopped()) return false;
  layernorm_rows(h, w.post_ln_w.data(), w.post_ln_b.data(), T, C, hp.eps, buf.merged.data());
  merger_mlp(w.mm0, w.mm0_b, w.mm2, w.mm2_b, buf.merged.data(), N, y, buf, pool);
  place(y, N, P, 0, width, out.data());
  return true;
}

}  // namespace invar
