// Binding the tensors of a qwen3vl_merger mmproj (llama.cpp clip.cpp load_tensors; names from
// clip-impl.h). Every tensor of the file must be claimed: an mmproj of another model fails here
// with the names that do not belong, not later with wrong numbers.
#include "vision/mmproj_weights.h"

#include <set>
#include <string>

#include "gguf/types.h"

namespace invar {
namespace {

class MmprojBinder {
 public:
  explicit MmprojBinder(const GgufFile& f) : f_(f) {}

  const GgufTensorInfo& tensor(const std::string& name, std::vector<int64_t> want) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) throw GgufError("gguf: mmproj is missing tensor '" + name + "'");
    std::vector<int64_t> got = t->ne;
    while (got.size() > 1 && got.back() == 1) got.pop_back();
    while (want.size() > 1 && want.back() == 1) want.pop_back();
    if (got != want)
      throw GgufError("gguf: tensor '" + name + "' has shape " + tensor_shape_str(t->ne) +
                      ", expected " + tensor_shape_str(want));
    const auto id = static_cast<uint32_t>(t->type);
    if (!dtype_supported(id))
      throw GgufError("gguf: tensor '" + name + "' has type " + ggml_type_label(id) +
                      ", invar supports " + dtype_supported_list());
    claimed_.insert(name);
    return *t;
  }

  // A {K, N} matrix in place; `shape` is the file's shape when it is not {K, N} (the patch
  // kernels' {p, p, 3, C}).
  Matrix matrix(const std::string& name, int64_t k, int64_t n, std::vector<int64_t> shape = {}) {
    const GgufTensorInfo& t = tensor(name, shape.empty() ? std::vector<int64_t>{k, n} : shape);
    return Matrix(t.type, k, n, t.data);
  }

  // A tensor of any weight type widened to F32, row by row (as the text loader's norms).
  std::vector<float> vec(const std::string& name, std::vector<int64_t> shape) {
    const GgufTensorInfo& t = tensor(name, shape);
    const int64_t row = t.ne[0], rows = t.n_elements() / row;
    const Matrix m(t.type, row, rows, t.data);
    std::vector<float> out(size_t(t.n_elements()));
    for (int64_t r = 0; r < rows; ++r) m.row_to_f32(r, out.data() + r * row);
    return out;
  }

  // <prefix>.weight {k, n} and <prefix>.bias [n].
  void linear(const std::string& prefix, int64_t k, int64_t n, Matrix& w, std::vector<float>& b) {
    w = matrix(prefix + ".weight", k, n);
    b = vec(prefix + ".bias", {n});
  }

  // LayerNorm <prefix>.weight and <prefix>.bias, both [n].
  void norm(const std::string& prefix, int64_t n, std::vector<float>& w, std::vector<float>& b) {
    w = vec(prefix + ".weight", {n});
    b = vec(prefix + ".bias", {n});
  }

  void check_all_claimed() const {
    std::string extra;
    for (const GgufTensorInfo& t : f_.tensors())
      if (!claimed_.count(t.name)) extra += (extra.empty() ? "'" : ", '") + t.name + "'";
    if (!extra.empty())
      throw GgufError("gguf: mmproj has tensors that are not part of a " +
                      std::string(kQwen3vlProjector) + " vision tower: " + extra);
  }

 private:
  const GgufFile& f_;
  std::set<std::string> claimed_;
};

void bind_layer(MmprojBinder& b, const VisionHparams& hp, int64_t l, VisionLayerWeights& lw) {
  const int64_t C = hp.n_embd, F = hp.n_ff;
  const std::string p = "v.blk." + std::to_string(l) + ".";
  b.norm(p + "ln1", C, lw.ln1_w, lw.ln1_b);
  b.linear(p + "attn_qkv", C, 3 * C, lw.qkv, lw.qkv_b);
  b.linear(p + "attn_out", C, C, lw.out, lw.out_b);
  b.norm(p + "ln2", C, lw.ln2_w, lw.ln2_b);
  b.linear(p + "ffn_up", C, F, lw.up, lw.up_b);
  b.linear(p + "ffn_down", F, C, lw.down, lw.down_b);
  if (!hp.deepstack[size_t(l)]) return;
  const int64_t M = C * hp.merge * hp.merge;
  const std::string d = "v.deepstack." + std::to_string(l) + ".";
  b.norm(d + "norm", M, lw.ds_norm_w, lw.ds_norm_b);
  b.linear(d + "fc1", M, M, lw.ds_fc1, lw.ds_fc1_b);
  b.linear(d + "fc2", M, hp.n_out, lw.ds_fc2, lw.ds_fc2_b);
}

}  // namespace

VisionWeights vision_weights_bind(const GgufFile& f, const VisionHparams& hp) {
  MmprojBinder b(f);
  const int64_t C = hp.n_embd, p = hp.patch, G = hp.pos_side;
  const int64_t M = C * hp.merge * hp.merge;
  VisionWeights w;
  w.patch0 = b.matrix("v.patch_embd.weight", 3 * p * p, C, {p, p, 3, C});
  w.patch1 = b.matrix("v.patch_embd.weight.1", 3 * p * p, C, {p, p, 3, C});
  w.patch_b = b.vec("v.patch_embd.bias", {C});
  w.pos_embd = b.vec("v.position_embd.weight", {C, G * G});
  w.layers.resize(size_t(hp.n_layer));
  for (int64_t l = 0; l < hp.n_layer; ++l) bind_layer(b, hp, l, w.layers[size_t(l)]);
  b.norm("v.post_ln", C, w.post_ln_w, w.post_ln_b);
  b.linear("mm.0", M, M, w.mm0, w.mm0_b);
  b.linear("mm.2", M, hp.n_out, w.mm2, w.mm2_b);
  b.check_all_claimed();
  return w;
}

}  // namespace invar
