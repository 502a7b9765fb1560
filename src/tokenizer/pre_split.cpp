#include "tokenizer/pre_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace invar {
namespace {

// Oniguruma's \s (what HF tokenizers match) is exactly the Unicode White_Space property.
// PCRE2's \s under UCP differs (it also takes U+180E), so the class is spelled out; these 25
// code points are fixed by Unicode's stability policy.
constexpr const char* kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// The same alternation as kQwen2SplitPattern / kQwen35SplitPattern with \s and \S replaced.
// \p{L}, \p{N} and \p{M} come from PCRE2's Unicode tables (14.0 in PCRE2 10.42, as in the
// Oniguruma 6.9.8 that the HF `onig` crate bundles).
std::string pcre2_pattern(bool marks_in_letters) {
  const std::string ws = kWhiteSpace;
  const std::string letter = marks_in_letters ? "[\\p{L}\\p{M}]" : "\\p{L}";
  const std::string not_letter_digit_space =
      marks_in_letters ? "[^" + ws + "\\p{L}\\p{M}\\p{N}]" : "[^" + ws + "\\p{L}\\p{N}]";
  return "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
         "|[^\\r\\n\\p{L}\\p{N}]?" +
         letter +
         "+"
         "|\\p{N}"
         "| ?" +
         not_letter_digit_space +
         "+[\\r\\n]*"
         "|[" +
         ws +
         "]*[\\r\\n]+"
         "|[" +
         ws + "]+(?![^" + ws +
         "])"
         "|[" +
         ws + "]+";
}

}  // namespace

std::string pre_name_for_pattern(std::string_view pattern) {
  if (pattern == kQwen2SplitPattern) return "qwen2";
  if (pattern == kQwen35SplitPattern) return "qwen35";
  return "";
}

struct PreSplitter::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
};

PreSplitter::PreSplitter(const std::string& pre) : impl_(std::make_unique<Impl>()) {
  bool marks;
  if (pre == "qwen2") {
    marks = false;
  } else if (pre == "qwen35") {
    marks = true;
  } else {
    throw Error("tokenizer: unsupported pre-tokenizer '" + pre +
                "' (invar implements 'qwen2' and 'qwen35')");
  }
  const std::string pat = pcre2_pattern(marks);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    INVAR_CHECK(false, "split pattern does not compile at " + std::to_string(err_off) + ": " +
                           reinterpret_cast<const char*>(msg));
  }
  // Without JIT (an unsupported CPU) the interpreter gives the same matches, only slower.
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

PreSplitter::~PreSplitter() {
  pcre2_code_free(impl_->code);
}

void PreSplitter::split(std::string_view text,
                        std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  INVAR_CHECK(text.size() < (1ull << 32), "text too long for 32-bit offsets");
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  INVAR_CHECK(md != nullptr, "pcre2 match data allocation failed");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  size_t pos = 0;
  while (pos < text.size()) {
    // The caller validated the text, so PCRE2's own UTF check (O(n) per call) is skipped.
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), pos,
                                                PCRE2_NO_UTF_CHECK, md, nullptr)
                              : pcre2_match(impl_->code, subject, text.size(), pos,
                                            PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    INVAR_CHECK(rc > 0, "pcre2 match failed with code " + std::to_string(rc));
    const size_t b = ov[0], e = ov[1];
    INVAR_CHECK(e > b, "split regex matched the empty string at byte " + std::to_string(b));
    // "Isolated": text between matches is a pre-token too. With these patterns every code point
    // starts a match, so there are no gaps; the branch keeps the semantics exact regardless.
    if (b > pos) out.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(b));
    out.emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(e));
    pos = e;
  }
  if (pos < text.size())
    out.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(text.size()));
  pcre2_match_data_free(md);
}

}  // namespace invar
