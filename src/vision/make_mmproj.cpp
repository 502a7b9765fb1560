#include "vision/make_mmproj.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/make_model.h"
#include "vision/mmproj_hparams.h"

namespace invar {
namespace {

// How a tensor's values are drawn from its stream z (≈ N(0, 1)): offset + scale · z.
struct Draw {
  double offset;
  double scale;
};

class MmprojTensors {
 public:
  MmprojTensors(const MakeMmprojConfig& c, GgufWriter& w) : c_(c), w_(w) {}

  void add(const std::string& name, const std::vector<int64_t>& ne, Draw d) {
    int64_t n = 1;
    for (int64_t e : ne) n *= e;
    std::vector<uint8_t> bytes(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = float(d.offset + d.scale * make_model_normal(c_.seed, name, uint64_t(i)));
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    w_.add_tensor(name, DType::F32, ne, std::move(bytes));
  }

  // A linear layer {k, n} with its bias [n]: weights ~ N(0, 1/k) keep activations at unit scale.
  void linear(const std::string& prefix, int64_t k, int64_t n) {
    add(prefix + ".weight", {k, n}, {0.0, 1.0 / std::sqrt(double(k))});
    add(prefix + ".bias", {n}, {0.0, 0.1});
  }

  void layer_norm(const std::string& prefix, int64_t n) {
    add(prefix + ".weight", {n}, {1.0, 0.1});
    add(prefix + ".bias", {n}, {0.0, 0.1});
  }

 private:
  const MakeMmprojConfig& c_;
  GgufWriter& w_;
};

bool is_deepstack(const MakeMmprojConfig& c, int64_t l) {
  for (int64_t d : c.deepstack)
    if (d == l) return true;
  return false;
}

}  // namespace

void make_mmproj_validate(const MakeMmprojConfig& c) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error("make-model --mmproj: " + what);
  };
  need(c.n_embd > 0 && c.n_embd <= 8192, "vision width must be in 1..8192");
  need(c.n_head > 0 && c.n_embd % c.n_head == 0 && (c.n_embd / c.n_head) % 4 == 0,
       "vision heads must divide the width into heads of a multiple of 4");
  need(c.n_ff > 0 && c.n_ff <= 65536, "vision FFN width must be in 1..65536");
  need(c.n_layer > 0 && c.n_layer <= 256, "vision blocks must be in 1..256");
  need(c.n_out > 0 && c.n_out <= 65536, "projection width must be in 1..65536");
  need(c.patch > 0 && c.patch <= 64, "patch must be in 1..64");
  need(c.pos_side > 0 && c.pos_side <= 256, "position grid side must be in 1..256");
  for (int64_t d : c.deepstack)
    need(d >= 0 && d < c.n_layer, "deepstack layer " + std::to_string(d) + " is not a block");
}

void make_mmproj(const MakeMmprojConfig& c, GgufWriter& w) {
  make_mmproj_validate(c);
  const int64_t C = c.n_embd, M = 4 * C, p = c.patch;
  // Keys in the order conversion/qwen3vl.py writes them.
  w.set_string("general.architecture", "clip");
  w.set_string("general.type", "mmproj");
  w.set_string("general.name", c.name);
  w.set_u32("general.file_type", 0);
  w.set_bool("clip.has_vision_encoder", true);
  w.set_u32("clip.vision.projection_dim", uint32_t(c.n_out));
  w.set_u32("clip.vision.image_size", uint32_t(c.pos_side * p));
  w.set_u32("clip.vision.patch_size", uint32_t(p));
  w.set_u32("clip.vision.embedding_length", uint32_t(C));
  w.set_u32("clip.vision.feed_forward_length", uint32_t(c.n_ff));
  w.set_u32("clip.vision.block_count", uint32_t(c.n_layer));
  w.set_u32("clip.vision.attention.head_count", uint32_t(c.n_head));
  // Qwen3-VL's preprocessor_config.json: mean and std 0.5 per channel.
  w.set_f32_array("clip.vision.image_mean", {0.5f, 0.5f, 0.5f});
  w.set_f32_array("clip.vision.image_std", {0.5f, 0.5f, 0.5f});
  w.set_string("clip.projector_type", kQwen3vlProjector);
  w.set_bool("clip.use_gelu", true);
  w.set_u32("clip.vision.spatial_merge_size", 2);
  w.set_f32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
  if (!c.deepstack.empty()) {
    GgufValue flags;
    flags.type = GgufType::ARRAY;
    flags.elem_type = GgufType::BOOL;
    for (int64_t l = 0; l < c.n_layer; ++l) flags.arr_int.push_back(is_deepstack(c, l) ? 1 : 0);
    flags.arr_len = uint64_t(c.n_layer);
    w.set_value("clip.vision.is_deepstack_layers", flags);
  }

  MmprojTensors t(c, w);
  const double patch_scale = 1.0 / std::sqrt(double(2 * 3 * p * p));
  t.add("v.patch_embd.weight", {p, p, 3, C}, {0.0, patch_scale});
  t.add("v.patch_embd.weight.1", {p, p, 3, C}, {0.0, patch_scale});
  t.add("v.patch_embd.bias", {C}, {0.0, 0.1});
  t.add("v.position_embd.weight", {C, c.pos_side * c.pos_side}, {0.0, 0.5});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "v.blk." + std::to_string(l) + ".";
    t.layer_norm(b + "ln1", C);
    t.linear(b + "attn_qkv", C, 3 * C);
    t.linear(b + "attn_out", C, C);
    t.layer_norm(b + "ln2", C);
    t.linear(b + "ffn_up", C, c.n_ff);
    t.linear(b + "ffn_down", c.n_ff, C);
    if (!is_deepstack(c, l)) continue;
    const std::string d = "v.deepstack." + std::to_string(l) + ".";
    t.layer_norm(d + "norm", M);
    t.linear(d + "fc1", M, M);
    t.linear(d + "fc2", M, c.n_out);
  }
  t.layer_norm("v.post_ln", C);
  t.linear("mm.0", M, M);
  t.linear("mm.2", M, c.n_out);
}

}  // namespace invar
