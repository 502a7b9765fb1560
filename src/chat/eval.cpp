// Statements: output, control flow, assignment, macros and their calls.
#include "chat/eval.h"

#include "chat/builtins.h"
#include "chat/template_error.h"

namespace invar::chat {

Interp::Interp(const Object& context, const RenderLimits& limits, Strftime strftime_now)
    : context_(context), limits_(limits), strftime_(std::move(strftime_now)) {}

Interp::~Interp() {
  // Each namespace stays alive in the list while the others are emptied, so dropping one's
  // attributes never cascades into another's.
  for (const auto& ns : namespaces_) ns->attrs = Object();
}

void Interp::step() {
  if (++steps_ > limits_.max_steps) {
    throw EvalError("template exceeded the evaluation step limit (" +
                    std::to_string(limits_.max_steps) + ")");
  }
}

void Interp::charge(uint64_t bytes) {
  allocated_ += bytes;
  if (allocated_ > limits_.max_alloc_bytes) {
    throw EvalError("template exceeded the memory limit (" +
                    std::to_string(limits_.max_alloc_bytes) + " bytes)");
  }
}

Value Interp::make_string(std::string s, bool markup) {
  if (s.size() > limits_.max_string_bytes) {
    throw EvalError("string longer than the limit (" + std::to_string(limits_.max_string_bytes) +
                    " bytes)");
  }
  charge(s.size());
  return Value::string(std::move(s), markup);
}

Value Interp::make_list(Array a, bool tuple) {
  charge(a.size() * sizeof(Value));
  return Value::array(std::move(a), tuple);
}

Value Interp::make_namespace(Object attrs) {
  charge(sizeof(Namespace));  // kept until the render ends
  Value v;
  v.kind = Kind::Namespace;
  v.ns = namespaces_.emplace_back(std::make_shared<Namespace>());
  v.ns->attrs = std::move(attrs);
  return v;
}

void Interp::write(const std::string& s) {
  if (out_->size() + s.size() > limits_.max_string_bytes) {
    throw EvalError("output longer than the limit (" + std::to_string(limits_.max_string_bytes) +
                    " bytes)");
  }
  charge(s.size());
  out_->append(s);
}

std::string Interp::render(const std::vector<NodePtr>& body) {
  std::string out;
  out_ = &out;
  RecursionGuard::set_budget(limits_.max_steps);
  auto root = std::make_shared<Frame>();
  exec(body, root);
  return out;
}

std::string Interp::capture(const std::vector<NodePtr>& body, const FramePtr& f) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body, f);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Value Interp::lookup(const std::string& name, const FramePtr& f) const {
  for (const Frame* fr = f.get(); fr; fr = fr->parent.get()) {
    const auto it = fr->vars.find(name);
    if (it != fr->vars.end()) return it->second;
  }
  if (const Value* v = context_.find(name)) return *v;
  Value g = global_function(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

void Interp::assign(const Node& target, const Value& v, const FramePtr& f) {
  if (target.kind == NodeKind::Name) {
    f->vars[target.name] = v;
    return;
  }
  if (target.kind == NodeKind::NsRef) {
    const Value ns = lookup(target.name, f);
    if (ns.kind != Kind::Namespace) {
      throw EvalError("cannot assign attribute on non-namespace object");
    }
    ns.ns->attrs.set(Value::string(target.attr), v);
    return;
  }
  // Tuple unpacking: exactly as many values as names.
  const Array items = iterate(v);
  if (items.size() != target.kids.size()) {
    throw EvalError(items.size() < target.kids.size()
                        ? "ValueError: not enough values to unpack (expected " +
                              std::to_string(target.kids.size()) + ", got " +
                              std::to_string(items.size()) + ")"
                        : "ValueError: too many values to unpack (expected " +
                              std::to_string(target.kids.size()) + ")");
  }
  for (size_t k = 0; k < items.size(); ++k) assign(*target.kids[k], items[k], f);
}

Interp::Flow Interp::exec(const std::vector<NodePtr>& body, const FramePtr& f) {
  for (const auto& n : body) {
    const Flow fl = exec_node(*n, f);
    if (fl != Flow::Normal) return fl;
  }
  return Flow::Normal;
}

Interp::Flow Interp::exec_node(const Node& n, const FramePtr& f) {
  try {
    step();
    EvalDepth depth(*this);
    switch (n.kind) {
      case NodeKind::Output:
        write(n.name);
        return Flow::Normal;
      case NodeKind::Print:
        write(py_str(eval(*n.kids[0], f)));
        return Flow::Normal;
      case NodeKind::If:
        return exec(truthy(eval(*n.kids[0], f)) ? n.body : n.orelse, f);
      case NodeKind::For:
        exec_for(n, f);
        return Flow::Normal;
      case NodeKind::Set:
        assign(*n.kids[0], eval(*n.kids[1], f), f);
        return Flow::Normal;
      case NodeKind::SetBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        Value v = make_string(capture(n.body, inner));
        if (n.kids[1]) v = run_filter_chain(*n.kids[1], f, v);
        assign(*n.kids[0], v, f);
        return Flow::Normal;
      }
      case NodeKind::Macro:
        f->vars[n.name] = make_macro(n, f);
        return Flow::Normal;
      case NodeKind::CallBlock: {
        const Value caller = make_macro(n, f);
        write(py_str(eval_call(*n.kids[0], f, &caller)));
        return Flow::Normal;
      }
      case NodeKind::FilterBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        const Value text = make_string(capture(n.body, inner));
        write(py_str(run_filter_chain(*n.kids[0], f, text)));
        return Flow::Normal;
      }
      case NodeKind::With: {
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        for (size_t k = 0; k < n.params.size(); ++k) {
          inner->vars[n.params[k]] = eval(*n.kids[k], f);
        }
        return exec(n.body, inner);
      }
      case NodeKind::Break:
      case NodeKind::Continue:
        if (loop_depth_ == 0) throw EvalError("'break' or 'continue' outside of a loop");
        return n.kind == NodeKind::Break ? Flow::Break : Flow::Continue;
      default:
        throw EvalError("internal: expression used as statement");
    }
  } catch (const EvalError& e) {
    throw TemplateError(TemplateError::Kind::Runtime, e.what(), n.line, n.col);
  }
}

void Interp::exec_for(const Node& n, const FramePtr& f) {
  const Array all = iterate(eval(*n.kids[1], f));
  Array items;
  if (n.kids[2]) {
    for (const Value& x : all) {
      auto probe = std::make_shared<Frame>();
      probe->parent = f;
      assign(*n.kids[0], x, probe);
      if (truthy(eval(*n.kids[2], probe))) items.push_back(x);
    }
  } else {
    items = all;
  }
  charge(items.size() * sizeof(Value));
  const int64_t len = static_cast<int64_t>(items.size());
  struct LoopDepth {
    int& d;
    explicit LoopDepth(int& depth) : d(depth) { ++d; }
    ~LoopDepth() { --d; }
  };
  if (len == 0) {
    auto fr = std::make_shared<Frame>();
    fr->parent = f;
    exec(n.orelse, fr);
    return;
  }
  LoopDepth guard(loop_depth_);
  for (int64_t i = 0; i < len; ++i) {
    step();
    auto fr = std::make_shared<Frame>();
    fr->parent = f;
    assign(*n.kids[0], items[i], fr);
    Object loop;
    loop.set(Value::string("index"), Value::integer(i + 1));
    loop.set(Value::string("index0"), Value::integer(i));
    loop.set(Value::string("revindex"), Value::integer(len - i));
    loop.set(Value::string("revindex0"), Value::integer(len - i - 1));
    loop.set(Value::string("first"), Value::boolean(i == 0));
    loop.set(Value::string("last"), Value::boolean(i == len - 1));
    loop.set(Value::string("length"), Value::integer(len));
    loop.set(Value::string("depth"), Value::integer(1));
    loop.set(Value::string("depth0"), Value::integer(0));
    if (i > 0) loop.set(Value::string("previtem"), items[i - 1]);
    if (i + 1 < len) loop.set(Value::string("nextitem"), items[i + 1]);
    loop.set(Value::string("cycle"), Value::callable(std::make_shared<Callable>(Callable{
                                         "cycle", [i](Interp&, CallArgs& a) -> Value {
                                           if (a.pos.empty())
                                             throw EvalError("no items for cycling given");
                                           return a.pos[static_cast<size_t>(i) % a.pos.size()];
                                         }})));
    fr->vars["loop"] = Value::object(std::move(loop));
    const Flow fl = exec(n.body, fr);
    if (fl == Flow::Break) break;
  }
}

Value Interp::make_macro(const Node& n, const FramePtr& closure) {
  const Node* node = &n;
  auto fn = std::make_shared<Callable>();
  fn->name = n.kind == NodeKind::Macro ? n.name : "caller";
  // Weak: the frame holds the macro, so a strong reference would be a cycle that never frees.
  std::weak_ptr<Frame> weak_closure = closure;
  fn->call = [node, weak_closure](Interp& in, CallArgs& args) -> Value {
    FramePtr closure = weak_closure.lock();
    if (!closure) throw EvalError("macro called after the scope that defined it ended");
    if (in.call_depth_ >= in.limits_.max_call_depth) {
      throw EvalError("RecursionError: macro calls nested deeper than " +
                      std::to_string(in.limits_.max_call_depth));
    }
    const std::string mname = node->kind == NodeKind::Macro ? node->name : "caller";
    auto fr = std::make_shared<Frame>();
    fr->parent = closure;
    const size_t np = node->params.size();
    std::vector<bool> bound(np, false);
    Array varargs;
    for (size_t k = 0; k < args.pos.size(); ++k) {
      if (k < np) {
        fr->vars[node->params[k]] = args.pos[k];
        bound[k] = true;
      } else if (node->uses_varargs) {
        varargs.push_back(args.pos[k]);
      } else {
        throw EvalError("TypeError: macro '" + mname + "' takes not more than " +
                        std::to_string(np) + " argument(s)");
      }
    }
    Object kwargs;
    Value caller = Value::undefined("'caller' is undefined");
    for (auto& [key, v] : args.kw) {
      size_t k = 0;
      while (k < np && node->params[k] != key) ++k;
      if (k < np) {
        if (bound[k]) {
          throw EvalError("TypeError: macro '" + mname + "' got multiple values for argument '" +
                          key + "'");
        }
        fr->vars[key] = v;
        bound[k] = true;
      } else if (key == "caller" && node->uses_caller) {
        caller = v;
      } else if (node->uses_kwargs) {
        kwargs.set(Value::string(key), v);
      } else {
        throw EvalError("TypeError: macro '" + mname + "' takes no keyword argument '" + key + "'");
      }
    }
    for (size_t k = 0; k < np; ++k) {
      if (bound[k]) continue;
      fr->vars[node->params[k]] =
          node->defaults[k]
              ? in.eval(*node->defaults[k], fr)
              : Value::undefined("parameter '" + node->params[k] + "' was not provided");
    }
    if (node->uses_varargs) fr->vars["varargs"] = in.make_list(std::move(varargs), true);
    if (node->uses_kwargs) fr->vars["kwargs"] = Value::object(std::move(kwargs));
    if (node->uses_caller) fr->vars["caller"] = caller;
    ++in.call_depth_;
    const int saved_loops = in.loop_depth_;
    in.loop_depth_ = 0;
    std::string text;
    try {
      text = in.capture(node->body, fr);
    } catch (...) {
      --in.call_depth_;
      in.loop_depth_ = saved_loops;
      throw;
    }
    --in.call_depth_;
    in.loop_depth_ = saved_loops;
    return in.make_string(std::move(text));
  };
  return Value::callable(std::move(fn));
}

}  // namespace invar::chat
