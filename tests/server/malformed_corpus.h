// The malformed-request corpus: broken JSON, huge numbers, wrong types, invalid UTF-8, empty
// messages and prompts, values invar cannot honour, nested junk. Every case must get a 4xx.
#pragma once

#include <string>
#include <vector>

namespace invar::server::testing {

struct Case {
  const char* path;
  std::string body;
};

inline std::vector<Case> malformed_corpus() {
  const char* C = "/v1/completions";
  const char* H = "/v1/chat/completions";
  std::vector<Case> v = {
      // broken JSON
      {C, ""},
      {C, "{"},
      {C, "}"},
      {C, "{{}}"},
      {C, "["},
      {C, R"({"prompt":})"},
      {C, R"({"prompt" "a"})"},
      {C, R"({prompt:"a"})"},
      {C, R"({"prompt":"a",})"},
      {C, R"({"prompt":'a'})"},
      {C, "nul"},
      {C, R"({"prompt":"a"} trailing)"},
      {C, R"({"prompt":"a"}})"},
      {C, R"({"prompt":"\u12"})"},
      {C, R"({"prompt":"\x41"})"},
      {C, "{\"prompt\":\"a\nb\"}"},
      {C, R"({"prompt":NaN})"},
      {C, R"({"prompt":Infinity})"},
      {C, R"({"max_tokens":-})"},
      {C, R"({"prompt":"a","max_tokens":01})"},
      {C, R"({"prompt":"a","max_tokens":1.})"},
      {H, R"({"messages":[{"role":"user","content":"a"}])"},
      // huge numbers
      {C, R"({"prompt":"a","max_tokens":1e308})"},
      {C, R"({"prompt":"a","max_tokens":1e999})"},
      {C, R"({"prompt":"a","max_tokens":18446744073709551616})"},
      {C, R"({"prompt":"a","max_tokens":-9223372036854775809})"},
      {C, R"({"prompt":"a","max_tokens":9223372036854775807})"},
      {C, R"({"prompt":"a","temperature":1e400})"},
      {C, R"({"prompt":"a","top_k":99999999999999999999999})"},
      {C, R"({"prompt":"a","logprobs":10000000000})"},
      {C, R"({"prompt":"a","seed":1e30})"},
      {C, R"({"prompt":[10000000000]})"},
      {C, R"({"prompt":[2147483647]})"},
      // wrong types
      {C, R"({"prompt":{}})"},
      {C, R"({"prompt":true})"},
      {C, R"({"prompt":null})"},
      {H, R"({"messages":"hi"})"},
      {H, R"({"messages":{}})"},
      {H, R"({"messages":[1]})"},
      {H, R"({"messages":[[]]})"},
      {H, R"({"messages":[{"role":1,"content":"a"}]})"},
      {H, R"({"messages":[{"role":"user","content":5}]})"},
      {C, R"({"prompt":"a","stream":1})"},
      {C, R"({"prompt":"a","stop":5})"},
      {C, R"({"prompt":"a","stop":{"a":1}})"},
      {C, R"({"prompt":"a","max_tokens":[]})"},
      {C, R"({"prompt":"a","temperature":[]})"},
      {C, R"({"prompt":"a","top_p":{}})"},
      {C, R"({"prompt":"a","logprobs":"5"})"},
      {C, R"({"prompt":"a","n":"1"})"},
      {C, R"({"prompt":"a","echo":"true"})"},
      {C, R"({"prompt":"a","stream_options":"x"})"},
      {C, R"({"prompt":"a","cache_salt":[]})"},
      {C, R"({"prompt":"a","model":[]})"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":"yes"})"},
      // invalid UTF-8
      {C, "{\"prompt\":\"\xff\"}"},
      {C, "{\"prompt\":\"\xc3\"}"},
      {C, "{\"prompt\":\"\xed\xa0\x80\"}"},
      {C, "{\"prompt\":\"\xc0\xaf\"}"},
      {C, "{\"\xff\":1,\"prompt\":\"a\"}"},
      {H, "{\"messages\":[{\"role\":\"user\",\"content\":\"\x80\"}]}"},
      // empty messages and prompts
      {H, R"({"messages":[]})"},
      {H, R"({"messages":[{}]})"},
      {H, R"({"messages":[{"role":"user"}]})"},
      {H, R"({"messages":[{"role":"user","content":null}]})"},
      {H, R"({"prompt":"a"})"},
      {C, R"({"messages":[{"role":"user","content":"a"}]})"},
      {C, R"({"prompt":""})"},
      {C, R"({"prompt":[]})"},
      {C, R"({"prompt":[-1]})"},
      {C, R"({"prompt":[[]]})"},
      {C, "{}"},
      {C, "[]"},
      {C, "null"},
      {C, "42"},
      // out of range / cannot honour
      {C, R"({"prompt":"a","n":0})"},
      {C, R"({"prompt":"a","logprobs":21})"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":50})"},
      {C, R"({"prompt":"a","best_of":2})"},
      {C, R"({"prompt":"a","max_tokens":-1})"},
      {C, R"({"prompt":"a","max_tokens":0})"},
      {C, R"({"prompt":"a","temperature":-1})"},
      {C, R"({"prompt":"a","top_p":1.5})"},
      // nested junk
      {C, R"({"prompt":[[[[1]]]]})"},
      {H, R"({"messages":[{"role":"user","content":[[[]]]}]})"},
      {C, R"({"prompt":{"a":{"b":{"c":[]}}}})"},
      {C, R"({"prompt":"a","stream_options":{"include_usage":{"x":[1,2,{"y":null}]}}})"},
  };
  v.push_back({C, std::string(5000, '[') + std::string(5000, ']')});
  v.push_back({C, "{\"prompt\":" + std::string(3000, '[') + "1" + std::string(3000, ']') + "}"});
  std::string wide = "{\"prompt\":\"a\",\"junk\":[";
  for (int i = 0; i < 20000; ++i) wide += "{\"k\":[" + std::to_string(i) + "]},";
  wide += "1],\"n\":3}";
  v.push_back({C, wide});
  v.push_back({C, std::string("{\"prompt\":\"a\"\0}", 15)});
  return v;
}

}  // namespace invar::server::testing
