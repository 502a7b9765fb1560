// The mmproj loader: make-model's random tower loads with the shapes it was written with, and a
// wrong or missing key or tensor is an error naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "forge/make_mmproj.h"
#include "test_process_dir.h"
#include "vision/vision_model.h"

namespace invar {
namespace {

std::string dir() {
  return test::test_process_dir("vision_load");
}

// A copy of `src` through a writer, with `edit` applied to the keys and tensors as they are
// copied: it returns false to drop one.
struct Edit {
  std::function<bool(GgufKv&)> kv = [](GgufKv&) { return true; };
  std::function<bool(GgufTensorInfo&)> tensor = [](GgufTensorInfo&) { return true; };
  std::function<void(GgufWriter&)> extra = [](GgufWriter&) {};
};

std::string write_edited(const std::string& name, const Edit& e) {
  GgufWriter good;
  make_mmproj(MakeMmprojConfig{}, good);
  const std::string good_path = dir() + "/good.gguf";
  good.write(good_path);
  const auto src = GgufFile::open(good_path);
  GgufWriter w;
  for (GgufKv kv : src->kvs())
    if (e.kv(kv)) w.set_value(kv.key, kv.value);
  for (GgufTensorInfo t : src->tensors()) {
    const uint8_t* data = t.data;
    if (e.tensor(t))
      w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(data, data + t.n_bytes));
  }
  e.extra(w);
  const std::string path = dir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

// The message of the GgufError loading `path` throws ("" when it loads).
std::string load_error(const std::string& path) {
  try {
    vision_model_load(path);
  } catch (const GgufError& err) {
    return err.what();
  }
  return "";
}

TEST(MmprojLoad, RandomTowerLoads) {
  MakeMmprojConfig c;
  c.deepstack = {1};
  GgufWriter w;
  make_mmproj(c, w);
  const std::string path = dir() + "/deepstack.gguf";
  w.write(path);
  const auto m = vision_model_load(path);
  EXPECT_EQ(m->hp.n_embd, 64);
  EXPECT_EQ(m->hp.head_dim, 16);
  EXPECT_EQ(m->hp.n_layer, 2);
  EXPECT_EQ(m->hp.patch, 16);
  EXPECT_EQ(m->hp.pos_side, 4);
  EXPECT_EQ(m->hp.n_out, 96);
  EXPECT_EQ(m->hp.n_deepstack, 1);
  EXPECT_EQ(m->hp.n_embd_out(), 192);
  EXPECT_EQ(m->hp.image_mean[1], 0.5f);
  EXPECT_EQ(m->w.layers[1].ds_fc2.n(), 96);
  EXPECT_EQ(load_error(write_edited("plain", {})), "");
}

TEST(MmprojLoad, MissingTensorIsNamed) {
  Edit e;
  e.tensor = [](GgufTensorInfo& t) { return t.name != "v.blk.1.ffn_down.bias"; };
  const std::string msg = load_error(write_edited("missing", e));
  EXPECT_NE(msg.find("missing tensor 'v.blk.1.ffn_down.bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing.gguf"), std::string::npos) << msg;
}

TEST(MmprojLoad, WrongShapeIsNamed) {
  Edit e;
  e.tensor = [](GgufTensorInfo& t) {
    if (t.name == "mm.2.weight") t.ne = {t.ne[0] * 2, t.ne[1] / 2};
    return true;
  };
  const std::string msg = load_error(write_edited("shape", e));
  EXPECT_NE(msg.find("tensor 'mm.2.weight' has shape"), std::string::npos) << msg;
}

TEST(MmprojLoad, ForeignTensorIsNamed) {
  Edit e;
  e.extra = [](GgufWriter& w) {
    w.add_tensor("v.pre_ln.weight", DType::F32, {64}, std::vector<uint8_t>(256, 0));
  };
  const std::string msg = load_error(write_edited("foreign", e));
  EXPECT_NE(msg.find("'v.pre_ln.weight'"), std::string::npos) << msg;
}

TEST(MmprojLoad, WrongKeysAreNamed) {
  auto with_key = [](const std::string& key, std::function<void(GgufValue&)> set) {
    Edit e;
    e.kv = [key, set](GgufKv& kv) {
      if (kv.key == key) set(kv.value);
      return true;
    };
    return e;
  };
  std::string msg = load_error(write_edited(
      "projector",
      with_key("clip.projector_type", [](GgufValue& v) { v.str = "qwen2vl_merger"; })));
  EXPECT_NE(msg.find("clip.projector_type is 'qwen2vl_merger'"), std::string::npos) << msg;
  msg = load_error(write_edited(
      "merge", with_key("clip.vision.spatial_merge_size", [](GgufValue& v) { v.u64 = 3; })));
  EXPECT_NE(msg.find("spatial_merge_size"), std::string::npos) << msg;
  msg = load_error(write_edited(
      "heads", with_key("clip.vision.attention.head_count", [](GgufValue& v) { v.u64 = 3; })));
  EXPECT_NE(msg.find("head_count"), std::string::npos) << msg;
  msg = load_error(write_edited(
      "blocks", with_key("clip.vision.block_count", [](GgufValue& v) { v.u64 = 1u << 31; })));
  EXPECT_NE(msg.find("clip.vision.block_count must be in 1..1024"), std::string::npos) << msg;
  Edit drop;
  drop.kv = [](GgufKv& kv) { return kv.key != "clip.vision.image_std"; };
  msg = load_error(write_edited("nostd", drop));
  EXPECT_NE(msg.find("clip.vision.image_std"), std::string::npos) << msg;
}

// Byte corruptions of a small tower's header (keys, tensor infos) and truncations: each load
// succeeds or raises GgufError; no crash, no other exception, no huge allocation.
TEST(MmprojLoad, CorruptedHeadersRaiseGgufError) {
  MakeMmprojConfig c;
  c.n_embd = 16;
  c.n_ff = 16;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_out = 8;
  c.patch = 4;
  c.pos_side = 2;
  c.deepstack = {0};
  GgufWriter w;
  make_mmproj(c, w);
  const std::string path = dir() + "/small.gguf";
  w.write(path);
  const auto good = GgufFile::open(path);
  const std::vector<uint8_t> bytes(good->bytes(), good->bytes() + good->file_size());
  size_t header = 0;  // where the tensor data starts
  for (const GgufTensorInfo& t : good->tensors())
    header = std::max(header, size_t(t.data - good->bytes()) + size_t(t.n_bytes));
  header = std::min(header, size_t(good->tensors().front().data - good->bytes()));
  int loaded = 0, refused = 0;
  auto attempt = [&](const std::vector<uint8_t>& b) {
    try {
      vision_model_from_gguf(GgufFile::from_memory(b.data(), b.size()));
      ++loaded;
    } catch (const GgufError&) {
      ++refused;
    }
  };
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[rng() % header] ^= uint8_t(1 + rng() % 255);
    attempt(bad);
  }
  for (size_t n = 0; n < bytes.size(); n += 97) attempt({bytes.begin(), bytes.begin() + long(n)});
  std::printf("loaded %d, refused %d\n", loaded, refused);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace invar
