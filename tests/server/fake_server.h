// An HttpServer on a free loopback port over a FakeBackend, for in-process HTTP tests.
#pragma once

#include <httplib.h>

#include <future>

#include "fake_backend.h"
#include "server/http_server.h"

namespace invar::server::testing {

struct FakeServer {
  FakeBackend* fake = nullptr;  // owned by the server once loaded
  std::unique_ptr<HttpServer> server;
  int port = 0;
  std::promise<void> release;  // the loader waits for it when `gated`

  explicit FakeServer(ServerConfig cfg = {}, bool gated = false,
                      std::function<void(FakeBackend&)> tune = nullptr) {
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    auto gate = release.get_future().share();
    if (!gated) release.set_value();
    server = std::make_unique<HttpServer>(cfg, [this, gate, tune]() -> std::unique_ptr<Backend> {
      gate.wait();
      auto b = std::make_unique<FakeBackend>();
      if (tune) tune(*b);
      fake = b.get();
      return b;
    });
    port = server->bind();
    server->start();
    if (!gated) server->wait_loaded(nullptr);
  }
  ~FakeServer() { server->shutdown(1); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    // Hang guards, not time limits: a sanitizer build on a loaded machine took 80 s to refuse a
    // 2 MB body that takes 9 s alone.
    c.set_read_timeout(300, 0);
    c.set_write_timeout(300, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body,
                       const httplib::Headers& h = {}) const {
    return client().Post(path.c_str(), h, body, "application/json");
  }
  httplib::Result get(const std::string& path, const httplib::Headers& h = {}) const {
    return client().Get(path.c_str(), h);
  }
};

// The JSON body of a response.
inline nlohmann::json body_of(const httplib::Result& r) {
  return nlohmann::json::parse(r->body);
}

}  // namespace invar::server::testing
