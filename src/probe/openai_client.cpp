#include "probe/openai_client.h"

#include <httplib.h>

#include "core/error.h"

namespace invar::probe {

Endpoint endpoint_parse(const std::string& url) {
  size_t scheme = 0;
  if (url.rfind("http://", 0) == 0) scheme = 7;
  if (url.rfind("https://", 0) == 0) scheme = 8;
  if (scheme == 0) throw Error("--url " + url + ": expected http://host:port or https://host");
  size_t slash = url.find('/', scheme);
  Endpoint ep;
  ep.host_port = url.substr(0, slash);
  if (ep.host_port.size() <= scheme) throw Error("--url " + url + ": no host");
  std::string path = slash == std::string::npos ? "" : url.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
    path.resize(path.size() - 3);
  ep.base_path = path;
  return ep;
}

json request_body(Api api, const std::string& model, const CompletionRequest& r) {
  json b = json::object();
  if (!model.empty()) b["model"] = model;
  if (api == Api::chat) {
    json msgs = json::array();
    if (!r.system.empty()) msgs.push_back({{"role", "system"}, {"content", r.system}});
    if (r.image_url.empty()) {
      msgs.push_back({{"role", "user"}, {"content", r.user}});
    } else {
      const json parts =
          json::array({{{"type", "image_url"}, {"image_url", {{"url", r.image_url}}}},
                       {{"type", "text"}, {"text", r.user}}});
      msgs.push_back({{"role", "user"}, {"content", parts}});
    }
    b["messages"] = std::move(msgs);
    b["logprobs"] = true;
    b["top_logprobs"] = r.top_k;
  } else {
    if (!r.image_url.empty()) throw Error("an image goes only in a chat request (--api chat)");
    b["prompt"] = r.system.empty() ? r.user : r.system + "\n\n" + r.user;
    b["logprobs"] = r.top_k;
  }
  b["max_tokens"] = r.max_tokens;
  b["temperature"] = 0;
  b["seed"] = 0;
  b["stream"] = false;
  if (!r.cache_salt.empty()) b["cache_salt"] = r.cache_salt;
  for (auto it = r.extra.begin(); it != r.extra.end(); ++it) b[it.key()] = it.value();
  return b;
}

struct OpenAIClient::Impl {
  httplib::Client cli;
  explicit Impl(const std::string& hp) : cli(hp) {}
};

OpenAIClient::OpenAIClient(const std::string& url, Api api, std::string model, std::string api_key,
                           double timeout_s)
    : ep_(endpoint_parse(url)), api_(api), model_(std::move(model)), api_key_(std::move(api_key)) {
  impl_ = std::make_unique<Impl>(ep_.host_port);
  impl_->cli.set_connection_timeout(5, 0);
  const auto sec = time_t(timeout_s);
  const auto usec = time_t((timeout_s - double(sec)) * 1e6);
  impl_->cli.set_read_timeout(sec, usec);
  impl_->cli.set_write_timeout(sec, usec);
  if (!api_key_.empty()) impl_->cli.set_bearer_token_auth(api_key_.c_str());
}

OpenAIClient::~OpenAIClient() = default;

Completion OpenAIClient::complete(const CompletionRequest& r, json* raw_body) {
  const std::string path =
      ep_.base_path + (api_ == Api::chat ? "/v1/chat/completions" : "/v1/completions");
  const std::string body = request_body(api_, model_, r).dump();
  auto res = impl_->cli.Post(path.c_str(), body, "application/json");
  if (!res) throw Error("POST " + ep_.host_port + path + ": " + httplib::to_string(res.error()));
  if (res->status != 200) {
    std::string msg = res->body.substr(0, 400);
    throw Error("POST " + ep_.host_port + path + ": HTTP " + std::to_string(res->status) + ": " +
                msg);
  }
  json j;
  try {
    j = json::parse(res->body);
  } catch (const json::parse_error& e) {
    throw Error("POST " + ep_.host_port + path + ": response is not JSON: " + e.what());
  }
  if (raw_body) *raw_body = j;
  try {
    return completion_parse(j, api_);
  } catch (const Error& e) {
    throw Error("POST " + ep_.host_port + path + ": " + e.what());
  }
}

bool OpenAIClient::healthy() {
  auto res = impl_->cli.Get("/health");
  return res && res->status == 200;
}

std::string OpenAIClient::first_model() {
  auto res = impl_->cli.Get((ep_.base_path + "/v1/models").c_str());
  if (!res || res->status != 200) return "";
  try {
    json j = json::parse(res->body);
    if (j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
  } catch (const json::parse_error&) {
  }
  return "";
}

}  // namespace invar::probe
