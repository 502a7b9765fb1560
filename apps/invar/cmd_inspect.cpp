// `invar inspect MODEL`: what a GGUF holds — container facts, metadata, the hyper-parameters as
// invar reads them (or why it refuses the file), the tensor table with sizes, the bytes and bits
// per weight of each type, and the memory a model needs (weights, KV per token, state).
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "command.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/types.h"
#include "model/forward.h"
#include "model/hparams.h"

namespace invar::app {
namespace {

struct InspectOptions {
  std::string model;
  bool all_kv = false;
  bool no_tensors = false;
};

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

// Control characters shown as escapes, so a hostile string cannot drive the terminal.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  return out;
}

std::string value_str(const GgufValue& v, bool full) {
  constexpr size_t kShown = 8;
  switch (v.type) {
    case GgufType::STRING: {
      if (!full && v.str.size() > 80)
        return "\"" + printable(v.str.substr(0, 77)) + "...\" (" + std::to_string(v.str.size()) +
               " bytes)";
      return "\"" + printable(v.str) + "\"";
    }
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", v.f64);
      return buf;
    }
    case GgufType::BOOL:
      return v.u64 ? "true" : "false";
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64:
      return std::to_string(v.i64);
    case GgufType::ARRAY: {
      std::string s =
          "[" + std::string(gguf_type_name(v.elem_type)) + " × " + std::to_string(v.arr_len) + "]";
      const size_t n = full ? size_t(v.arr_len) : std::min<size_t>(size_t(v.arr_len), kShown);
      std::string items;
      for (size_t i = 0; i < n; ++i) {
        if (i < v.arr_str.size())
          items += (i ? ", \"" : "\"") + printable(v.arr_str[i]) + "\"";
        else if (i < v.arr_int.size())
          items += (i ? ", " : "") + std::to_string(v.arr_int[i]);
        else if (i < v.arr_float.size())
          items += (i ? ", " : "") + std::to_string(v.arr_float[i]);
      }
      if (!items.empty()) s += " [" + items + (n < v.arr_len ? ", ..." : "") + "]";
      return s;
    }
    default:
      return std::to_string(v.u64);
  }
}

int run_inspect(const InspectOptions& o) {
  auto f = GgufFile::open(o.model);
  std::printf("file: %s\n", o.model.c_str());
  std::printf("size: %" PRIu64 " bytes, GGUF v%u, alignment %" PRIu64
              ", %zu metadata keys, %zu tensors\n",
              f->file_size(), f->version(), f->alignment(), f->kvs().size(), f->tensors().size());
  std::printf("architecture: %s\n", f->get_string_or("general.architecture", "(none)").c_str());

  std::printf("\nmetadata:\n");
  for (const auto& kv : f->kvs())
    std::printf("  %-48s %-8s %s\n", kv.key.c_str(),
                std::string(gguf_type_name(kv.value.type)).c_str(),
                value_str(kv.value, o.all_kv).c_str());

  int status = 0;
  std::optional<Hparams> hp;
  std::printf("\nhparams:\n");
  try {
    hp = hparams_from_gguf(*f);
    std::printf("%s", hparams_describe(*hp).c_str());
  } catch (const Error& e) {
    std::printf("  invar cannot run this file: %s\n", e.what());
    status = 1;
  }

  uint64_t total_bytes = 0;
  int64_t total_elems = 0;
  struct TypeTotal {
    int64_t tensors = 0, elements = 0;
    uint64_t bytes = 0;
  };
  std::map<uint32_t, TypeTotal> by_type;  // ggml type id → totals
  TypeTotal mtp;                          // tensors of the MTP blocks after the trunk
  const std::string mtp_prefix = hp ? "blk." + std::to_string(hp->n_layer) + "." : "";
  if (!o.no_tensors)
    std::printf("\ntensors:\n  %-40s %-6s %-22s %12s\n", "name", "type", "shape", "bytes");
  for (const auto& t : f->tensors()) {
    const std::string type = ggml_type_label(static_cast<uint32_t>(t.type));
    if (!o.no_tensors)
      std::printf("  %-40s %-6s %-22s %12" PRIu64 "\n", t.name.c_str(), type.c_str(),
                  shape_str(t.ne).c_str(), t.n_bytes);
    total_bytes += t.n_bytes;
    total_elems += t.n_elements();
    TypeTotal& bt = by_type[static_cast<uint32_t>(t.type)];
    bt.tensors += 1;
    bt.elements += t.n_elements();
    bt.bytes += t.n_bytes;
    if (hp && hp->n_layer_nextn > 0 && t.name.rfind(mtp_prefix, 0) == 0) {
      mtp.tensors += 1;
      mtp.elements += t.n_elements();
      mtp.bytes += t.n_bytes;
    }
  }
  std::printf("\ntotals: %zu tensors, %" PRId64 " parameters, %" PRIu64
              " bytes of tensor data (%.2f MB)\n",
              f->tensors().size(), total_elems, total_bytes, double(total_bytes) / 1e6);
  for (const auto& [id, v] : by_type)
    std::printf("  %-7s %5" PRId64 " tensors %14" PRIu64 " bytes %8.4f bits per weight\n",
                ggml_type_label(id).c_str(), v.tensors, v.bytes,
                double(v.bytes) * 8.0 / double(v.elements));
  if (hp && hp->n_layer_nextn > 0)
    std::printf("  MTP block %s* %5" PRId64 " tensors %14" PRIu64 " bytes (%s)\n",
                mtp_prefix.c_str(), mtp.tensors, mtp.bytes,
                hp->mtp ? "draft head of --spec mtp" : ("unusable: " + hp->mtp_unusable).c_str());
  if (hp) {
    // What a running model needs besides the mapped file: F32 KV per token of context in each
    // attention layer, and the F32 recurrent state (conv window + delta-rule matrix) of every
    // Gated DeltaNet layer, once per sequence and once per prefix-cache checkpoint.
    const int64_t kv_bytes = 4 * hp->n_attention_layers() * 2 * hp->n_head_kv * hp->head_dim;
    const int64_t state_bytes = 4 * hp->n_recurrent_layers() * gdn_state_floats(*hp);
    std::printf("\nmemory:\n");
    std::printf("  weights (mapped file)          %14" PRIu64 " bytes (%.2f GiB)\n", f->file_size(),
                double(f->file_size()) / double(1 << 30));
    std::printf("  KV cache per token             %14" PRId64 " bytes (%" PRId64
                " attention layers × K,V × %" PRId64 " heads × %" PRId64 " × f32)\n",
                kv_bytes, hp->n_attention_layers(), hp->n_head_kv, hp->head_dim);
    std::printf("  recurrent state per sequence   %14" PRId64 " bytes (%" PRId64
                " Gated DeltaNet layers; the same again per prefix-cache checkpoint)\n",
                state_bytes, hp->n_recurrent_layers());
    if (hp->mtp)
      std::printf("  MTP KV per token (--spec mtp)  %14" PRId64 " bytes (1 attention layer)\n",
                  4 * 2 * hp->n_head_kv * hp->head_dim);
    std::printf("  e.g. one sequence of %" PRId64 " tokens: %.2f GiB\n", hp->n_ctx_train,
                (double(f->file_size()) + double(kv_bytes) * double(hp->n_ctx_train) +
                 double(state_bytes)) /
                    double(1 << 30));
  }
  return status;
}

Command inspect_command("inspect", [](CLI::App& root) -> Command::Run {
  auto o = std::make_shared<InspectOptions>();
  auto* s = root.add_subcommand(
      "inspect", "Print a GGUF's architecture, metadata, hyper-parameters and tensor table");
  s->add_option("model", o->model, "GGUF file")->required();
  s->add_flag("--all", o->all_kv, "print metadata values in full (arrays and long strings)");
  s->add_flag("--no-tensors", o->no_tensors, "omit the per-tensor table");
  return [o]() { return run_inspect(*o); };
});

}  // namespace
}  // namespace invar::app
