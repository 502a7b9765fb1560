// Masks against a brute-force reference: at random reachable states, every token's bytes run
// through a fresh matcher (no trie walk, no mask cache) must agree with the mask bit for bit,
// on a synthetic vocabulary and on the real Qwen3 vocabulary. Also: masks are a pure function
// of the tokens (cold vs warm caches, compaction, rollback), specials and end-of-sequence.
#include <gtest/gtest.h>

#include "grammar/error.h"
#include "grammar_test_util.h"

namespace invar::grammar {
namespace {

using test::mask_ids;

const char* kInvoiceSchema = R"({
  "type": "object",
  "properties": {
    "invoice_id": {"type": "string", "pattern": "^INV-[0-9]{4}$"},
    "date": {"type": "string", "format": "date"},
    "customer": {"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 20},
      "email": {"type": "string", "format": "email"}}, "required": ["name"],
      "additionalProperties": false},
    "lines": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
      "type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 999},
        "price": {"type": "number", "minimum": 0}}, "required": ["sku", "qty"]}},
    "status": {"enum": ["draft", "sent", "payé"]},
    "notes": {"type": ["string", "null"]}
  },
  "required": ["invoice_id", "lines"]
})";

// The tokens a brute-force run allows: each id's bytes from the reference state.
std::vector<int32_t> reference_ids(Matcher& ref, const Vocabulary& v) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < v.size(); ++id) {
    if (ref.token_allowed(static_cast<int32_t>(id))) out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// Walks random allowed tokens; at every `check_every`-th state compares the mask of a warm
// matcher with a fresh matcher replaying the same tokens and checking each token alone.
void check_masks(const std::shared_ptr<const Grammar>& g,
                 const std::shared_ptr<const Vocabulary>& v, uint64_t seed, int steps,
                 int check_every, int* checked) {
  std::mt19937_64 rng(seed);
  Matcher m(g, v);
  std::vector<int32_t> path;
  for (int step = 0; step < steps; ++step) {
    const auto words = m.mask();
    const auto ids = mask_ids(words, v->size());
    if (step % check_every == 0) {
      Matcher ref(g, v);
      ASSERT_EQ(ref.accept_tokens(path), path.size());
      EXPECT_EQ(ids, reference_ids(ref, *v)) << "seed " << seed << " step " << step;
      ++*checked;
    }
    if (ids.empty() || m.is_terminated()) break;
    const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    ASSERT_TRUE(m.accept_token(id));
    path.push_back(id);
    if (m.is_terminated()) break;
  }
}

std::vector<std::shared_ptr<const Grammar>> sample_grammars() {
  return {
      compile(Kind::json_schema, kInvoiceSchema),
      compile(Kind::json_object, ""),
      compile(Kind::gbnf,
              "root ::= (expr \"\\n\")+\nexpr ::= term ([-+] term)*\nterm ::= [0-9]+ | \"(\" expr "
              "\")\""),
      compile(Kind::regex, "(\\w+@\\w+\\.(com|org)|[\xC3\xA9\xE6\x97\xA5]{2,5}-\\d+)"),
      compile(Kind::choice, R"(["apple", "apple pie", "banana", "日本語"])"),
  };
}

// The matcher memoises one step per (state, byte class): two bytes share a class exactly when
// every terminal of the program treats them alike (so sharing changes no step), and classes are
// numbered by their smallest byte.
TEST(GrammarMask, ByteClassesAreTheTerminalsCoarsestPartition) {
  for (const auto& g : sample_grammars()) {
    std::vector<std::vector<bool>> sig(256);
    for (int32_t c : g->code())
      if (!Grammar::is_end(c) && !Grammar::is_call(c))
        for (int b = 0; b < 256; ++b) sig[b].push_back(g->terminal_has(c, uint8_t(b)));
    int next = 0;
    for (int a = 0; a < 256; ++a) {
      bool first = true;
      for (int b = 0; b < a; ++b) {
        EXPECT_EQ(g->byte_class(uint8_t(a)) == g->byte_class(uint8_t(b)), sig[a] == sig[b])
            << a << " " << b << "\n"
            << g->dump();
        first &= sig[a] != sig[b];
      }
      if (first) {
        EXPECT_EQ(g->byte_class(uint8_t(a)), next++);
      }
    }
    EXPECT_EQ(g->n_byte_classes(), next);
    EXPECT_LT(g->n_byte_classes(), 256);  // the point: far fewer rows than bytes
  }
}

TEST(GrammarMask, MatchesBruteForceOnSyntheticVocabulary) {
  const auto sv = test::synthetic_vocab();
  int checked = 0;
  for (const auto& g : sample_grammars()) {
    for (uint64_t seed = 1; seed <= 6; ++seed) check_masks(g, sv.vocab, seed, 60, 1, &checked);
  }
  EXPECT_GT(checked, 500);
}

TEST(GrammarMask, MatchesBruteForceOnQwen3Vocabulary) {
  const auto v = test::qwen3_vocab();
  ASSERT_GT(v->size(), 151000u);
  int checked = 0;
  const auto gs = sample_grammars();
  for (size_t i = 0; i < gs.size(); ++i) check_masks(gs[i], v, 100 + i, 24, 6, &checked);
  EXPECT_GE(checked, 15);
  std::printf("qwen3 vocabulary: %zu ids, %zu trie nodes; %d states checked\n", v->size(),
              v->nodes().size(), checked);
}

TEST(GrammarMask, SpecialsNeverAndEndOfSequenceOnlyWhenAccepting) {
  const auto sv = test::synthetic_vocab();
  Matcher m(compile(Kind::regex, "ab?"), sv.vocab);
  auto ids = mask_ids(m.mask(), sv.vocab->size());
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 270}));  // 270: "ab"
  EXPECT_FALSE(m.accept_token(sv.eos));
  EXPECT_FALSE(m.accept_token(sv.control));
  ASSERT_TRUE(m.accept_token('a'));
  ids = mask_ids(m.mask(), sv.vocab->size());
  EXPECT_EQ(ids, (std::vector<int32_t>{'b', sv.eos}));
  EXPECT_FALSE(m.accept_token(sv.control));
  ASSERT_TRUE(m.accept_token('b'));
  EXPECT_EQ(mask_ids(m.mask(), sv.vocab->size()), std::vector<int32_t>{sv.eos});
  ASSERT_TRUE(m.accept_token(sv.eos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('a'));
  m.rollback(1);
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.is_accepting());
}

TEST(GrammarMask, RejectedTokenLeavesTheStateAlone) {
  const auto sv = test::synthetic_vocab();
  Matcher m(compile(Kind::json_schema, kInvoiceSchema), sv.vocab);
  ASSERT_TRUE(m.accept_bytes("{\"invoice_id\":\"INV-"));
  const auto before = m.mask();
  const size_t steps = m.n_steps();
  EXPECT_FALSE(m.accept_token('x'));
  EXPECT_FALSE(m.accept_bytes("12x"));
  EXPECT_EQ(m.n_steps(), steps);
  EXPECT_EQ(m.mask(), before);
}

// The mask cache and the memoised steps never change a result: a matcher that has seen other
// paths (warm) and one that has not (cold) give the same masks along the same tokens.
TEST(GrammarMask, ColdAndWarmCachesGiveTheSameMasks) {
  const auto v = test::qwen3_vocab();
  auto g = compile(Kind::json_schema, kInvoiceSchema);
  std::mt19937_64 rng(7);
  Matcher warm(g, v);
  bool ok;
  test::random_walk(warm, *v, rng, 30, 4000, ok);  // warm-up path
  warm.rollback(warm.n_steps());
  const size_t warm_states = warm.n_cached_states();
  Matcher cold(g, v);
  EXPECT_GT(warm_states, cold.n_cached_states() + 10);  // the warm caches really are warm
  for (int step = 0; step < 25; ++step) {
    const auto a = warm.mask(), b = cold.mask();
    ASSERT_EQ(a, b) << "step " << step;
    const auto ids = mask_ids(a, v->size());
    if (ids.empty() || warm.is_terminated()) break;
    const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    ASSERT_TRUE(warm.accept_token(id));
    ASSERT_TRUE(cold.accept_token(id));
  }
}

TEST(GrammarMask, CompactionAndRollbackKeepMasks) {
  const auto sv = test::synthetic_vocab();
  auto g = compile(Kind::json_schema, kInvoiceSchema);
  Limits tiny;
  tiny.max_cached_nodes = 64;
  tiny.max_cached_transitions = 256;
  tiny.max_cached_masks = 1;
  Matcher small(g, sv.vocab, tiny), big(g, sv.vocab);
  std::mt19937_64 rng(11);
  std::vector<std::vector<uint64_t>> masks;
  for (int step = 0; step < 80; ++step) {
    const auto a = big.mask();
    ASSERT_EQ(small.mask(), a) << "step " << step;
    masks.push_back(a);
    const auto ids = mask_ids(a, sv.vocab->size());
    if (ids.empty() || big.is_terminated()) break;
    const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    ASSERT_TRUE(big.accept_token(id));
    ASSERT_TRUE(small.accept_token(id));
  }
  EXPECT_GT(small.n_compactions(), 0u);
  EXPECT_EQ(big.n_compactions(), 0u);
  // Rollback, k tokens at a time, returns the masks seen on the way.
  size_t n = big.n_steps();
  while (n > 0) {
    const size_t k = std::min<size_t>(n, 3);
    small.rollback(k);
    big.rollback(k);
    n -= k;
    ASSERT_EQ(big.mask(), masks[n]);
    ASSERT_EQ(small.mask(), masks[n]);
  }
  // A fork is independent of its origin.
  Matcher f = big.fork();
  ASSERT_TRUE(f.accept_bytes("{"));
  EXPECT_EQ(big.mask(), masks[0]);
}

// max_state_bytes bounds what a matcher holds: its caches are cut to fit and compacted, which
// changes no mask, and a state whose live parses alone outgrow it is a LimitError from then on.
TEST(GrammarMask, StateBudgetBoundsMemoryNotMasks) {
  const auto sv = test::synthetic_vocab();
  auto g = compile(Kind::json_schema, kInvoiceSchema);
  Limits bounded_limits;
  bounded_limits.max_state_bytes = 256 << 10;
  Matcher bounded(g, sv.vocab, bounded_limits), big(g, sv.vocab);
  std::mt19937_64 rng(5);
  size_t peak = 0;
  for (int step = 0; step < 200; ++step) {
    const auto a = big.mask();
    ASSERT_EQ(bounded.mask(), a) << "step " << step;
    peak = std::max(peak, bounded.memory_bytes());
    const auto ids = mask_ids(a, sv.vocab->size());
    if (ids.empty() || big.is_terminated()) break;
    const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    ASSERT_TRUE(big.accept_token(id));
    ASSERT_TRUE(bounded.accept_token(id));
  }
  EXPECT_GT(big.memory_bytes(), bounded_limits.max_state_bytes) << "the budget bound nothing";
  EXPECT_GT(bounded.n_compactions(), 0u);
  EXPECT_LE(peak, bounded_limits.max_state_bytes * 5 / 4);

  // Parses that double with every byte: 2^k stacks after k bytes.
  auto ambiguous = compile(Kind::gbnf, R"(root ::= "a" root "b" | "a" root "c" | "")");
  Limits small;
  small.max_state_bytes = 64 << 10;
  Matcher unbounded(ambiguous, sv.vocab), limited(ambiguous, sv.vocab, small);
  size_t accepted = 0;
  try {
    for (; accepted < 11; ++accepted) ASSERT_TRUE(limited.accept_bytes("a"));
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("max_state_bytes"), std::string::npos) << e.what();
  }
  EXPECT_LT(accepted, 11u) << "the live state never passed its budget";
  EXPECT_THROW(limited.mask(), LimitError) << "the error stays";
  for (int i = 0; i < 11; ++i) ASSERT_TRUE(unbounded.accept_bytes("a"));  // no budget, no error
}

TEST(GrammarMask, ApplyMaskSetsMinusInfinity) {
  std::vector<float> logits = {1, 2, 3, 4, 5};
  std::vector<uint64_t> words = {0b10101};
  apply_mask(logits, words);
  EXPECT_EQ(logits[0], 1);
  EXPECT_EQ(logits[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(logits[2], 3);
  EXPECT_EQ(logits[3], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(logits[4], 5);
}

}  // namespace
}  // namespace invar::grammar
