#include "server/completion_job.h"

#include <algorithm>
#include <atomic>
#include <random>

#include "core/error.h"
#include "core/utf8.h"
#include "server/prepare_pool.h"

namespace invar::server {
namespace {

using Clock = std::chrono::steady_clock;

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  uint64_t x = base ^ (counter.fetch_add(1) * 0xD1B54A32D192ED03ull);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%016llx", prefix, static_cast<unsigned long long>(x));
  return buf;
}

std::string finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "abort";
    case FinishReason::error:
      return "error";
    case FinishReason::none:
      break;
  }
  return "stop";
}

// tool_choice "required" or a named function: the output is a call (or with
// parallel_tool_calls several) of the allowed tools in the template's syntax, so it always
// parses (grammar/tool_calls.h). nullopt when no call is required or the template has no
// tool-call syntax (then the output parser's 422 reports a missing call).
std::optional<OutputConstraint> tool_call_constraint(const Backend& backend, const ChatInput& in) {
  const auto* listed = [&]() -> const nlohmann::ordered_json* {
    auto t = in.request.find("tools");
    return t != in.request.end() && t->is_array() ? &*t : nullptr;
  }();
  if (!listed) return std::nullopt;
  // tool_choice auto constrains only when a tool asks for it (function.strict, OpenAI's strict
  // function calling): calls stay optional, and every call made parses against its schema.
  bool strict = false;
  for (const auto& tool : *listed)
    if (auto fn = tool.find("function"); fn != tool.end() && fn->is_object())
      strict |= fn->value("strict", false);
  const bool text_first = in.tool_choice == ToolChoice::auto_ && strict;
  if (in.tool_choice != ToolChoice::required && in.tool_choice != ToolChoice::named && !text_first)
    return std::nullopt;
  const chat::ToolCallSyntax syntax = backend.chat_template()->tool_call_syntax();
  if (syntax == chat::ToolCallSyntax::none) return std::nullopt;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  for (const auto& tool : *listed) {
    auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object() || !fn->contains("name")) continue;
    if (in.tool_choice == ToolChoice::named && (*fn)["name"] != in.tool_choice_name) continue;
    nlohmann::ordered_json one = {{"name", (*fn)["name"]}};
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) one["parameters"] = *p;
    tools.push_back(std::move(one));
  }
  if (tools.empty()) return std::nullopt;  // chat_request_parse refuses an unknown name
  nlohmann::ordered_json spec = {{"syntax", tool_call_syntax_name(syntax)},
                                 {"parallel", in.parallel_tool_calls},
                                 {"text_first", text_first},
                                 {"tools", std::move(tools)}};
  return OutputConstraint{grammar::Kind::tool_calls, spec.dump(), "tool_choice"};
}

// The completion's length when max_tokens is not given: the rest of the context for a chat
// (at least 1), OpenAI's 16 for a completion.
int64_t max_tokens_of(const ApiRequest& req, int64_t n_ctx, int64_t prompt) {
  if (req.max_tokens) return *req.max_tokens;
  return req.endpoint == Endpoint::chat ? std::max<int64_t>(n_ctx - prompt, 1) : 16;
}

// A fault of the engine's check on this request, named as the client sent it: the context's
// overflow names the prompt when it alone fills the context (or a chat's completion has no
// max_tokens to lower), else max_tokens.
ApiError fault_error(const RequestFault& f, const ApiRequest& req) {
  const bool chat = req.endpoint == Endpoint::chat;
  const char* prompt_field = chat ? "messages" : "prompt";
  switch (f.rule) {
    case FaultRule::context:
      return api_error_of(f,
                          f.lo >= f.hi || (chat && !req.max_tokens) ? prompt_field : "max_tokens");
    case FaultRule::empty:
      return api_error_of(f, f.param == "prompt" ? prompt_field : "");
    default:
      return api_error_of(f);
  }
}

// The field an image's error names: its part, or the prompt's field.
std::string image_field(const ApiRequest& req, size_t i, const char* prompt_field) {
  return i < req.chat.images.size() ? req.chat.images[i].field : prompt_field;
}

}  // namespace

JobPrompt job_prompt_make(const Backend& backend, const ApiRequest& req,
                          const ImageBounds& bounds) {
  const bool chat = req.endpoint == Endpoint::chat;
  const char* prompt_field = chat ? "messages" : "prompt";
  JobPrompt out;
  std::vector<int32_t>& prompt = out.tokens;
  // Text the template or the vocabulary cannot take is the client's to fix: a 400.
  try {
    if (chat) {
      if (!backend.chat_template())
        throw Error(
            "this model carries no chat template (tokenizer.chat_template): start the server "
            "with --chat-template FILE, or send the prompt to /v1/completions");
      if (!req.chat.reasoning_effort.empty() && !backend.chat_template()->thinking_switch())
        throw bad_request("reasoning_effort",
                          "'reasoning_effort' needs a chat template with a thinking switch "
                          "(enable_thinking); " +
                              backend.chat_template()->origin() + " has none");
      ChatTokens t = backend.chat_encode(req.chat);
      prompt = std::move(t.tokens);
      out.in_reasoning = t.in_reasoning;
    } else if (req.prompt_text) {
      prompt = backend.encode(*req.prompt_text);
    } else {
      prompt = req.prompt_ids;
    }
  } catch (const Error& e) {
    throw bad_request(prompt_field, e.what());
  }
  if (req.image_files) {
    // The pads are counted before the tower runs: a prompt that cannot take the images costs
    // no encode.
    try {
      seq_images_pads_check(prompt, backend.image_pad_id(), req.image_files->size());
    } catch (const Error& e) {
      throw bad_request(prompt_field, e.what());
    }
    const std::vector<std::string>& files = *req.image_files;
    // Each image's rows from its header: a prompt whose images cannot fit the context is
    // refused before anything is decoded or encoded (each pad widens to its image's rows).
    int64_t widened = int64_t(prompt.size());
    for (size_t i = 0; i < files.size(); ++i) {
      try {
        widened += backend.image_tokens(files[i]) - 1;
      } catch (const Error& e) {
        const std::string field = image_field(req, i, prompt_field);
        throw bad_request(field, "'" + field + "': " + e.what());
      }
    }
    if (req.truncate_prompt_tokens <= 0)
      if (auto f = request_context_fault(widened, max_tokens_of(req, backend.n_ctx(), widened),
                                         backend.n_ctx()))
        throw fault_error(*f, req);
    std::vector<SeqImage> images;
    for (size_t i = 0; i < files.size(); ++i) {
      // What is left of the request's CPU budget: this thread's since preparation began and
      // the tower's workers' on the images before.
      EncodeBounds eb{bounds.cancelled, 0, req.tenant};
      if (bounds.cpu_budget_s > 0)
        eb.cpu_budget_s =
            std::max(1e-9, bounds.cpu_budget_s - (thread_cpu_seconds() - bounds.cpu_start_s) -
                               out.image_pool_cpu_s);
      try {
        PromptImages one = backend.images_encode({&files[i], 1}, eb);
        images.push_back(std::move(one.images.at(0)));
        out.image_pool_cpu_s += one.pool_cpu_s;
      } catch (const EncodeStopped& e) {
        if (e.why == EncodeStop::cpu_budget)
          throw prepare_cpu_over(bounds.cpu_budget_s - eb.cpu_budget_s + e.cpu_s,
                                 bounds.cpu_budget_s, "encoding its images");
        // Nobody reads it: the connection is gone.
        throw ApiError{499, "the client closed the request while its images were encoded",
                       "invalid_request_error", "", "client_closed"};
      } catch (const Error& e) {
        const std::string field = image_field(req, i, prompt_field);
        throw bad_request(field, "'" + field + "': " + e.what());
      }
    }
    out.images = std::make_shared<const SeqImages>(
        seq_images_place(prompt, backend.image_pad_id(), std::move(images)));
    if (req.truncate_prompt_tokens > 0 && int64_t(prompt.size()) > req.truncate_prompt_tokens)
      throw bad_request("truncate_prompt_tokens",
                        "'truncate_prompt_tokens' would cut a prompt with images (" +
                            std::to_string(prompt.size()) + " tokens, the images' included)");
  }
  if (req.truncate_prompt_tokens > 0 && int64_t(prompt.size()) > req.truncate_prompt_tokens)
    prompt.erase(prompt.begin(), prompt.end() - req.truncate_prompt_tokens);
  {
    // The engine's one check, before the output constraint is compiled: the prompt's ids, the
    // context, logit_bias and stop ids against the vocabulary, the cache budget.
    GenerationRequest g = engine_request_of(req);
    g.prompt = prompt;
    g.max_tokens = max_tokens_of(req, backend.n_ctx(), int64_t(prompt.size()));
    g.stop_tokens = req.stop_token_ids;
    g.images = out.images;
    if (auto f = request_fault(g, backend.request_limits())) throw fault_error(*f, req);
  }
  const OutputConstraint* constraint = req.constraint ? &*req.constraint : nullptr;
  const std::optional<OutputConstraint> calls =
      chat ? tool_call_constraint(backend, req.chat) : std::nullopt;
  if (calls) {
    if (constraint)
      throw bad_request(constraint->field, "'" + constraint->field +
                                               "' and the tool calls (tool_choice required or "
                                               "named, or a strict tool) both constrain the "
                                               "output: send one");
    constraint = &*calls;
  }
  if (constraint) {
    const OutputConstraint& c = *constraint;
    try {
      out.grammar = grammar::compile_cached(c.kind, c.text, req.tenant);
    } catch (const Error& e) {
      throw bad_request(c.field, "'" + c.field + "': " + e.what());
    }
    // A reasoning block comes first: the constraint applies to the answer after </think>.
    if (out.in_reasoning) {
      const std::vector<int32_t> end = backend.encode("</think>");
      if (end.size() == 1) out.grammar_after = end[0];
    }
  }
  return out;
}

CompletionJob::CompletionJob(Backend& backend, ApiRequest req, ServerMetrics& metrics,
                             JobPrompt prompt, const CompletionJob* first)
    : backend_(backend),
      req_(std::move(req)),
      metrics_(metrics),
      prompt_(std::move(prompt.tokens)),
      grammar_(std::move(prompt.grammar)),
      grammar_after_(prompt.grammar_after),
      images_(std::move(prompt.images)),
      first_(first) {
  bool chat = req_.endpoint == Endpoint::chat;
  if (chat)
    chat_out_ =
        std::make_unique<ChatOutput>(*backend_.chat_template(), req_.chat, prompt.in_reasoning);
  max_tokens_ = max_tokens_of(req_, backend_.n_ctx(), int64_t(prompt_.size()));
  if (!req_.ignore_eos) eos_ids_ = backend_.end_of_sequence_ids();
  eos_ids_.insert(eos_ids_.end(), req_.stop_token_ids.begin(), req_.stop_token_ids.end());
  // The first choice asks the engine for the prompt logprobs; the others take its.
  if (req_.echo && req_.logprobs && !first_) prompt_lp_k_ = req_.top_logprobs;
  if (req_.prompt_logprobs && !first_) prompt_lp_k_ = std::max(prompt_lp_k_, *req_.prompt_logprobs);

  ctx_.endpoint = req_.endpoint;
  ctx_.id = req_.request_id.empty() ? random_id(chat ? "chatcmpl-" : "cmpl-")
                                    : (chat ? "chatcmpl-" : "cmpl-") + req_.request_id;
  ctx_.created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  ctx_.model = req_.served_name.empty() ? backend_.model_id() : req_.served_name;
  ctx_.fingerprint = backend_.system_fingerprint();
  // One tier serves every request: OpenAI answers with the tier used, whatever was asked.
  if (!req_.service_tier.empty()) ctx_.service_tier = "default";
  ctx_.logprobs = req_.logprobs;
  ctx_.top_logprobs = req_.top_logprobs;
  ctx_.tokens_as_ids = req_.tokens_as_ids;
  ctx_.token_bytes = [&b = backend_](int32_t id) { return b.token_bytes(id); };
}

CompletionJob::~CompletionJob() {
  if (submitted_ && !engine_finished_) backend_.cancel(rid_);
}

std::pair<GenerationRequest, EventSink> CompletionJob::engine_request(
    std::function<void()> notify) {
  GenerationRequest g = engine_request_of(req_);
  g.prompt = prompt_;
  g.max_tokens = max_tokens_;
  g.stop_tokens = eos_ids_;
  g.top_logprobs = req_.logprobs ? req_.top_logprobs : 0;
  g.prompt_logprobs.reset();
  if (prompt_lp_k_ >= 0) g.prompt_logprobs = prompt_lp_k_;
  g.grammar = grammar_;
  g.grammar_after = grammar_after_;
  g.images = images_;

  queue_ = std::make_shared<EventQueue>();
  queue_->metrics = &metrics_;
  queue_->notify = std::move(notify);
  start_time_ = Clock::now();
  queue_->submitted = start_time_;
  EventSink sink = [q = queue_](RequestEvent&& ev) {
    auto now = Clock::now();
    std::lock_guard<std::mutex> lock(q->mu);
    if (ev.kind == EventKind::token) {
      if (!q->any_token) {
        q->metrics->ttft.observe(std::chrono::duration<double>(now - q->submitted).count());
        q->first_token = now;
      } else {
        q->metrics->inter_token.observe(std::chrono::duration<double>(now - q->last_token).count());
      }
      q->any_token = true;
      q->last_token = now;
    }
    q->events.push_back(std::move(ev));
    q->cv.notify_one();
    if (q->notify) q->notify();
  };
  return {std::move(g), std::move(sink)};
}

void CompletionJob::submitted(RequestId id) {
  rid_ = id;
  submitted_ = true;
}

bool CompletionJob::prompt_logprobs_complete() const {
  return engine_finished_ || !tokens_.empty();
}

void CompletionJob::wait_events(std::vector<RequestEvent>& out, std::chrono::milliseconds wait,
                                bool forever) {
  std::unique_lock<std::mutex> lock(queue_->mu);
  auto ready = [&] { return !queue_->events.empty(); };
  if (forever)
    queue_->cv.wait(lock, ready);
  else
    queue_->cv.wait_for(lock, wait, ready);
  while (!queue_->events.empty()) {
    out.push_back(std::move(queue_->events.front()));
    queue_->events.pop_front();
  }
}

void CompletionJob::process(RequestEvent&& ev, Delta& d) {
  switch (ev.kind) {
    case EventKind::prompt_logprobs:
      prompt_lp_.push_back({ev.token, ev.logprob, std::move(ev.top)});
      return;
    case EventKind::token: {
      if (ev.stop_token) return;  // ends the completion without being part of it
      TokenOut t{ev.token, ev.logprob, std::move(ev.top)};
      d.text += ev.text;
      tokens_.push_back(t);
      d.tokens.push_back(std::move(t));
      return;
    }
    case EventKind::finished:
      engine_finished_ = true;
      d.finished = true;
      end_time_ = Clock::now();
      metrics_.request_duration.observe(
          std::chrono::duration<double>(Clock::now() - start_time_).count());
      metrics_.completion_tokens_total.fetch_add(tokens_.size());
      d.text += ev.text;
      if (ev.finish == FinishReason::error)
        error_ = api_error_of(ev.error_kind, "", "generation failed: " + ev.error);
      else
        finish_reason_ = finish_name(ev.finish);
      finished_ = std::move(ev);
      return;
  }
}

Usage CompletionJob::usage() const {
  Usage u = finished_.usage;
  if (!u.prompt_tokens) u.prompt_tokens = int64_t(prompt_.size());
  u.completion_tokens = std::max<int64_t>(u.completion_tokens, int64_t(tokens_.size()));
  return u;
}

std::string CompletionJob::prompt_echo_text() const {
  if (first_) return first_->prompt_echo_text();
  if (req_.prompt_text) return *req_.prompt_text;
  std::string bytes;
  for (int32_t id : prompt_) bytes += backend_.token_bytes(id);
  return utf8::lossy(bytes);
}

json CompletionJob::logprobs_value(const std::vector<TokenOut>& tokens, int64_t* offset) {
  if (!req_.logprobs) return nullptr;
  if (req_.endpoint == Endpoint::chat) return logprobs_chat_json(ctx_, tokens);
  return logprobs_legacy_json(ctx_, tokens, *offset, offset);
}

bool CompletionJob::ready() {
  std::lock_guard<std::mutex> lock(queue_->mu);
  return !queue_->events.empty();
}

std::optional<std::pair<int, std::string>> CompletionJob::poll_whole() {
  Delta& d = whole_;
  std::vector<RequestEvent> evs;
  wait_events(evs, std::chrono::milliseconds(0), false);
  for (auto& e : evs) process(std::move(e), d);
  if (!d.finished) return std::nullopt;
  if (first_ && !error_ && !first_->prompt_logprobs_complete()) return std::nullopt;
  if (error_) return std::make_pair(error_->status, error_->to_json());
  std::string text = d.text;
  int64_t offset = 0;
  json lp = nullptr;
  if (req_.echo) {
    text = prompt_echo_text() + text;
    if (req_.logprobs) {
      lp = logprobs_legacy_prompt_json(ctx_, prompt_, prompt_lp(), &offset);
      json gen = logprobs_legacy_json(ctx_, tokens_, offset, nullptr);
      for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (auto& x : gen[k]) lp[k].push_back(x);
    }
  } else {
    lp = logprobs_value(tokens_, &offset);
  }
  json plp = req_.prompt_logprobs ? prompt_logprobs_json(ctx_, prompt_, prompt_lp()) : json();
  json body = response_json(ctx_, text, lp, finish_reason_, usage(), plp);
  if (chat_out_) {
    chat_out_->feed(text);
    chat_out_->finish();
    if (auto e = chat_out_->unmet()) return std::make_pair(e->status, e->to_json());
    body["choices"][0]["message"] = chat_out_->message_json();
    body["choices"][0]["finish_reason"] = chat_out_->finish_reason(finish_reason_);
  }
  return std::make_pair(200, json_text(body));
}

std::string CompletionJob::stream_next(std::chrono::milliseconds wait) {
  if (stream_done_) return "";
  std::vector<RequestEvent> evs;
  wait_events(evs, wait, false);
  if (evs.empty()) return ": keep-alive\n\n";
  std::string out;
  // stream_options.continuous_usage_stats: every chunk carries the usage so far.
  const auto chunk_event = [this](json chunk) {
    if (req_.include_usage && req_.continuous_usage) chunk["usage"] = usage_json(usage());
    return sse_event(chunk);
  };
  for (auto& e : evs) {
    Delta d;
    bool is_token = e.kind == EventKind::token;
    process(std::move(e), d);
    if (!stream_started_ && (is_token || d.finished)) {
      // The opening chunk: the chat role, or the echoed prompt of a completion.
      stream_started_ = true;
      if (req_.endpoint == Endpoint::chat) {
        out += chunk_event(chunk_json(ctx_, "", nullptr, "", true));
      } else if (req_.echo) {
        json lp = nullptr;
        if (req_.logprobs)
          lp = logprobs_legacy_prompt_json(ctx_, prompt_, prompt_lp(), &stream_offset_);
        out += chunk_event(chunk_json(ctx_, prompt_echo_text(), lp, "", false));
      }
    }
    if (d.finished && error_) {
      out += "data: " + error_->to_json() + "\n\ndata: [DONE]\n\n";
      stream_done_ = true;
      return out;
    }
    chat::OutputDelta parsed;
    std::optional<ApiError> unmet;
    if (chat_out_) {
      parsed = chat_out_->feed(d.text);
      if (d.finished) parsed.append(chat_out_->finish()), unmet = chat_out_->unmet();
    }
    if (!d.text.empty() || !d.tokens.empty() || d.finished) {
      bool visible = chat_out_ ? !parsed.empty() : !d.text.empty();
      bool skip = !visible && !d.finished && !req_.logprobs;  // nothing visible yet
      if (!skip) {
        json lp =
            d.tokens.empty() && !req_.logprobs ? json() : logprobs_value(d.tokens, &stream_offset_);
        std::string finish = d.finished && !unmet ? finish_reason_ : "";
        json chunk = chunk_json(ctx_, d.text, lp, finish, false);
        if (chat_out_) {
          chunk["choices"][0]["delta"] = ChatOutput::delta_json(parsed);
          if (!finish.empty())
            chunk["choices"][0]["finish_reason"] = chat_out_->finish_reason(finish);
        }
        out += chunk_event(std::move(chunk));
      }
    }
    if (unmet) {
      out += "data: " + unmet->to_json() + "\n\ndata: [DONE]\n\n";
      stream_done_ = true;
      return out;
    }
    if (d.finished) {
      if (req_.include_usage) out += sse_event(usage_chunk_json(ctx_, usage()));
      out += "data: [DONE]\n\n";
      stream_done_ = true;
      return out;
    }
  }
  return out.empty() ? ": keep-alive\n\n" : out;
}

JobStats CompletionJob::stats() const {
  JobStats st;
  st.usage = usage();
  if (!queue_) return st;
  auto end = engine_finished_ ? end_time_ : Clock::now();
  st.duration_s = std::chrono::duration<double>(end - start_time_).count();
  std::lock_guard<std::mutex> lock(queue_->mu);
  if (queue_->any_token)
    st.ttft_s = std::chrono::duration<double>(queue_->first_token - start_time_).count();
  return st;
}

json CompletionJob::prompt_logprobs_value() const {
  return prompt_logprobs_json(ctx_, prompt_, prompt_lp());
}

void CompletionJob::cancel_by_client() {
  if (submitted_ && !engine_finished_) {
    backend_.cancel(rid_);
    metrics_.cancelled_total.fetch_add(1);
  }
}

}  // namespace invar::server
