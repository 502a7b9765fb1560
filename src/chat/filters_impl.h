// Filter functions shared between filters.cpp (text, numbers, registry) and
// filters_seq.cpp (sequences and mappings).
#pragma once

#include "chat/builtins.h"
#include "chat/eval.h"

namespace invar::chat::filters {

// A filter's optional boolean argument: absent counts as false.
inline bool flag(const Value* v) {
  return v && truthy(*v);
}

// jinja2's make_attrgetter: "a.b.0" looked up item by item (digits as indexes).
Value attr_path(Interp& in, const Value& item, const Value& attribute);

Value f_first(Interp&, const Value&, CallArgs&);
Value f_last(Interp&, const Value&, CallArgs&);
Value f_join(Interp&, const Value&, CallArgs&);
Value f_list(Interp&, const Value&, CallArgs&);
Value f_items(Interp&, const Value&, CallArgs&);
Value f_map(Interp&, const Value&, CallArgs&);
Value f_select(Interp&, const Value&, CallArgs&);
Value f_reject(Interp&, const Value&, CallArgs&);
Value f_selectattr(Interp&, const Value&, CallArgs&);
Value f_rejectattr(Interp&, const Value&, CallArgs&);
Value f_unique(Interp&, const Value&, CallArgs&);
Value f_sort(Interp&, const Value&, CallArgs&);
Value f_dictsort(Interp&, const Value&, CallArgs&);
Value f_batch(Interp&, const Value&, CallArgs&);
Value f_reverse(Interp&, const Value&, CallArgs&);
Value f_sum(Interp&, const Value&, CallArgs&);
Value f_min(Interp&, const Value&, CallArgs&);
Value f_max(Interp&, const Value&, CallArgs&);

}  // namespace invar::chat::filters
