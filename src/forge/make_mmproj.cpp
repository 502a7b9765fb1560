#include "forge/make_mmproj.h"

#include <cmath>

#include "core/error.h"
#include "forge/make_model.h"
#include "quant/quantize.h"
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

  // Rows of ne[0] values drawn in order, each encoded in `type`.
  void add(const std::string& name, const std::vector<int64_t>& ne, Draw d,
           DType type = DType::F32) {
    const int64_t row = ne[0];
    int64_t rows = 1;
    for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
    const int64_t row_bytes = dtype_row_bytes(type, row);
    std::vector<uint8_t> bytes(size_t(rows * row_bytes));
    std::vector<float> v(static_cast<size_t>(row));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < row; ++j)
        v[size_t(j)] =
            float(d.offset + d.scale * make_model_normal(c_.seed, name, uint64_t(r * row + j)));
      quantize_row(type, v.data(), bytes.data() + r * row_bytes, row);
    }
    w_.add_tensor(name, type, ne, std::move(bytes));
  }

  // A linear layer {k, n} with its bias [n]: weights ~ N(0, 1/k) keep activations at unit scale.
  void linear(const std::string& prefix, int64_t k, int64_t n) {
    add(prefix + ".weight", {k, n}, {0.0, 1.0 / std::sqrt(double(k))}, c_.type);
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

// general.file_type (llama_ftype) of the types convert_hf_to_gguf.py writes mmproj files in; −1 for
// the others.
int mmproj_file_type(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q8_0:
      return 7;
    case DType::BF16:
      return 32;
    default:
      return -1;
  }
}

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
  need(mmproj_file_type(c.type) >= 0,
       "weight type " + std::string(dtype_name(c.type)) + " is not one of f32, f16, bf16, q8_0");
  // Every linear layer's row (K = C, F or 4C) must hold whole blocks of the weight type.
  const int64_t block = dtype_block_size(c.type);
  need(c.n_embd % block == 0 && c.n_ff % block == 0,
       "the vision width and FFN width must be multiples of " + std::to_string(block) +
           ", the block of " + std::string(dtype_name(c.type)));
}

void make_mmproj(const MakeMmprojConfig& c, GgufWriter& w) {
  make_mmproj_validate(c);
  const int64_t C = c.n_embd, M = 4 * C, p = c.patch;
  // Keys in the order conversion/qwen3vl.py writes them.
  w.set_string("general.architecture", "clip");
  w.set_string("general.type", "mmproj");
  w.set_string("general.name", c.name);
  w.set_u32("general.file_type", uint32_t(mmproj_file_type(c.type)));
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
  const DType patch_type = c.type == DType::F16 ? DType::F16 : DType::F32;
  t.add("v.patch_embd.weight", {p, p, 3, C}, {0.0, patch_scale}, patch_type);
  t.add("v.patch_embd.weight.1", {p, p, 3, C}, {0.0, patch_scale}, patch_type);
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
