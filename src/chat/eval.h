// The evaluator: walks the AST over a context of Values and renders text, with jinja2's
// scoping (a loop iteration, macro call, `with` and block `set` get a scope of their own;
// `if` does not) and hard limits so hostile templates end in an error.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace invar::chat {

struct RenderLimits {
  uint64_t max_steps = 5'000'000;        // nodes evaluated (bounds loops and recursion time)
  uint64_t max_alloc_bytes = 512 << 20;  // text and list storage created, cumulative
  size_t max_string_bytes = 64 << 20;    // any one string, the output included
  int max_call_depth = 100;              // nested macro calls
  int max_eval_depth = 1000;             // nested evaluation (bounds the C++ stack)
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

class Interp {
 public:
  using Strftime = std::function<std::string(const std::string& format)>;
  Interp(const Object& context, const RenderLimits& limits, Strftime strftime_now);
  ~Interp();  // empties the render's namespaces (see namespaces_)
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  std::string render(const std::vector<NodePtr>& body);

  Value eval(const Node& n, const FramePtr& f);
  Value call(const Value& fn, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& v, CallArgs& args);
  Value strftime_now(const std::string& format) const { return Value::string(strftime_(format)); }

  // Budgets: every node evaluated takes a step; every string or list built is charged.
  void step();
  size_t max_string_bytes() const { return limits_.max_string_bytes; }
  void charge(uint64_t bytes);
  // A string result checked against the size limit and charged.
  Value make_string(std::string s, bool markup = false);
  Value make_list(Array a, bool tuple = false);
  // namespace(): a mutable object owned by this render.
  Value make_namespace(Object attrs);

 private:
  enum class Flow { Normal, Break, Continue };
  const Object& context_;
  RenderLimits limits_;
  Strftime strftime_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0, allocated_ = 0;
  int call_depth_ = 0;
  int loop_depth_ = 0;
  int eval_depth_ = 0;
  // Every namespace this render made. A namespace can come to hold itself, directly or through
  // a list, dict or callable it holds: a cycle that shared ownership alone never frees. Values
  // never outlive the render (it returns text), so the render empties them all when it ends.
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  friend struct EvalDepth;

  Flow exec(const std::vector<NodePtr>& body, const FramePtr& f);
  Flow exec_node(const Node& n, const FramePtr& f);
  void exec_for(const Node& n, const FramePtr& f);
  void write(const std::string& s);
  std::string capture(const std::vector<NodePtr>& body, const FramePtr& f);
  void assign(const Node& target, const Value& v, const FramePtr& f);
  Value lookup(const std::string& name, const FramePtr& f) const;
  Value make_macro(const Node& n, const FramePtr& closure);
  Value eval_inner(const Node& n, const FramePtr& f);
  Value eval_call(const Node& n, const FramePtr& f, const Value* caller);
  void eval_args(const Node& n, size_t first, const FramePtr& f, CallArgs& args);
  Value eval_compare(const Node& n, const FramePtr& f);
  Value run_filter_chain(const Node& n, const FramePtr& f, const Value& block_input);
};

// Nesting of eval/exec calls, bounded so deep recursion ends in an error, not a stack overflow.
struct EvalDepth {
  explicit EvalDepth(Interp& in) : in_(in) {
    if (++in_.eval_depth_ > in_.limits_.max_eval_depth) {
      --in_.eval_depth_;
      throw EvalError("RecursionError: evaluation nested deeper than " +
                      std::to_string(in_.limits_.max_eval_depth));
    }
  }
  ~EvalDepth() { --in_.eval_depth_; }
  Interp& in_;
};

// Operators with Python's semantics (operators.cpp).
Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b);
Value unary_minus(const Value& v, bool negate);
bool contains(const Value& container, const Value& item);
// jinja2's sandboxed getattr (obj.name) and getitem (obj[key]).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(Interp& in, const Value& obj, const Value& key);
Value slice(Interp& in, const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace invar::chat
