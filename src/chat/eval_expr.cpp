// Expressions: names, literals, attribute and item access, calls, filters, tests, operators.
#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/template_error.h"

namespace invar::chat {

Value Interp::eval(const Node& n, const FramePtr& f) {
  try {
    step();
    EvalDepth depth(*this);
    return eval_inner(n, f);
  } catch (const EvalError& e) {
    throw TemplateError(TemplateError::Kind::Runtime, e.what(), n.line, n.col);
  }
}

void Interp::eval_args(const Node& n, size_t first, const FramePtr& f, CallArgs& args) {
  for (size_t k = first; k < n.kids.size(); ++k) args.pos.push_back(eval(*n.kids[k], f));
  for (const auto& [key, v] : n.kwargs) args.kw.emplace_back(key, eval(*v, f));
  if (n.star_args) {
    for (const Value& v : iterate(eval(*n.star_args, f))) args.pos.push_back(v);
  }
  if (n.star_kwargs) {
    const Value d = eval(*n.star_kwargs, f);
    if (!d.is_dict()) throw EvalError("argument after ** must be a mapping");
    for (const auto& [k, v] : d.dict->items()) args.kw.emplace_back(py_str(k), v);
  }
}

Value Interp::call(const Value& fn, CallArgs& args) {
  fn.require_defined();
  if (fn.kind != Kind::Callable) {
    throw EvalError("TypeError: '" + type_name(fn) + "' object is not callable");
  }
  if (fn.fn->unsafe) {
    throw EvalError("SecurityError: access to attribute '" + fn.fn->name + "' is unsafe");
  }
  return fn.fn->call(*this, args);
}

Value Interp::eval_call(const Node& n, const FramePtr& f, const Value* caller) {
  const Value fn = eval(*n.kids[0], f);
  CallArgs args;
  eval_args(n, 1, f, args);
  if (caller) args.kw.emplace_back("caller", *caller);
  return call(fn, args);
}

Value Interp::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (!fn) throw EvalError("No filter named '" + name + "'.");
  return fn(*this, input, args);
}

bool Interp::apply_test(const std::string& name, const Value& v, CallArgs& args) {
  const TestFn fn = find_test(name);
  if (!fn) throw EvalError("No test named '" + name + "'.");
  return fn(*this, v, args);
}

// A filter chain whose innermost operand is null takes block_input (filter blocks, block set).
Value Interp::run_filter_chain(const Node& n, const FramePtr& f, const Value& block_input) {
  const Value input = n.kids[0] ? (n.kids[0]->kind == NodeKind::Filter
                                       ? run_filter_chain(*n.kids[0], f, block_input)
                                       : eval(*n.kids[0], f))
                                : block_input;
  CallArgs args;
  eval_args(n, 1, f, args);
  return apply_filter(n.name, input, args);
}

Value Interp::eval_compare(const Node& n, const FramePtr& f) {
  Value left = eval(*n.kids[0], f);
  for (size_t k = 0; k < n.ops.size(); ++k) {
    const Value right = eval(*n.kids[k + 1], f);
    const std::string& op = n.ops[k];
    bool r;
    if (op == "==") {
      r = equal(left, right);
    } else if (op == "!=") {
      r = !equal(left, right);
    } else if (op == "<") {
      r = less(left, right);
    } else if (op == ">") {
      r = less(right, left);
    } else if (op == "<=") {
      r = less(left, right) || (equal(left, right) && (left.require_defined(), true));
    } else if (op == ">=") {
      r = less(right, left) || (equal(left, right) && (left.require_defined(), true));
    } else if (op == "in") {
      r = contains(right, left);
    } else {
      r = !contains(right, left);
    }
    if (!r) return Value::boolean(false);
    left = right;
  }
  return Value::boolean(true);
}

Value Interp::eval_inner(const Node& n, const FramePtr& f) {
  switch (n.kind) {
    case NodeKind::Const:
      return n.value;
    case NodeKind::Name:
      return lookup(n.name, f);
    case NodeKind::ListLit:
    case NodeKind::TupleLit: {
      Array items;
      items.reserve(n.kids.size());
      for (const auto& k : n.kids) items.push_back(eval(*k, f));
      return make_list(std::move(items), n.kind == NodeKind::TupleLit);
    }
    case NodeKind::DictLit: {
      Object o;
      for (size_t k = 0; k + 1 < n.kids.size(); k += 2) {
        Value key = eval(*n.kids[k], f);
        o.set(std::move(key), eval(*n.kids[k + 1], f));
      }
      charge(o.size() * 2 * sizeof(Value));
      return Value::object(std::move(o));
    }
    case NodeKind::Getattr:
      return get_attr(eval(*n.kids[0], f), n.name);
    case NodeKind::Getitem: {
      const Value obj = eval(*n.kids[0], f);
      const Node& idx = *n.kids[1];
      if (idx.kind == NodeKind::Slice) {
        auto part = [&](size_t k) { return idx.kids[k] ? eval(*idx.kids[k], f) : Value::none(); };
        const Value a = part(0), b = part(1), c = part(2);
        return slice(*this, obj, a, b, c);
      }
      return get_item(*this, obj, eval(idx, f));
    }
    case NodeKind::Slice:
      throw EvalError("slice outside of a subscript");
    case NodeKind::Call:
      return eval_call(n, f, nullptr);
    case NodeKind::Filter:
      return run_filter_chain(n, f, Value::undefined("no filter input"));
    case NodeKind::Test: {
      const Value v = eval(*n.kids[0], f);
      CallArgs args;
      eval_args(n, 1, f, args);
      return Value::boolean(apply_test(n.name, v, args));
    }
    case NodeKind::Unary: {
      const Value v = eval(*n.kids[0], f);
      if (n.name == "not") return Value::boolean(!truthy(v));
      return unary_minus(v, n.name == "-");
    }
    case NodeKind::Binary:
      return binary_op(*this, n.name, eval(*n.kids[0], f), eval(*n.kids[1], f));
    case NodeKind::And: {
      Value a = eval(*n.kids[0], f);
      return truthy(a) ? eval(*n.kids[1], f) : a;
    }
    case NodeKind::Or: {
      Value a = eval(*n.kids[0], f);
      return truthy(a) ? a : eval(*n.kids[1], f);
    }
    case NodeKind::Compare:
      return eval_compare(n, f);
    case NodeKind::CondExpr:
      if (truthy(eval(*n.kids[0], f))) return eval(*n.kids[1], f);
      if (n.kids[2]) return eval(*n.kids[2], f);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section "
          "was defined.");
    default:
      throw EvalError("internal: statement used as expression");
  }
}

}  // namespace invar::chat
