// A loopback TCP port nobody listens on right now (bound to port 0, read back, released), for tests
// that start servers which cannot bind port 0 and report the port themselves (redis-server,
// nginx; `invar serve --port 0` logs the port it bound). 0 if the kernel gave none. Another
// process may take the port before the server binds it: port_held_by() tells whether the server
// that answers is the one started, and its callers retry with another port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace invar::test {

inline int port_free() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// Whether process `pid` holds the socket listening on TCP `port` (IPv4): the listening socket's
// inode in /proc/net/tcp is one of the process's descriptors.
inline bool port_held_by(int port, pid_t pid) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line, inode;
  std::getline(tcp, line);  // the header
  while (inode.empty() && std::getline(tcp, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, node;
    f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> node;
    const size_t colon = local.find(':');
    if (state == "0A" && colon != std::string::npos &&
        std::stoi(local.substr(colon + 1), nullptr, 16) == port)
      inode = node;
  }
  if (inode.empty()) return false;
  const std::string want = "socket:[" + inode + "]";
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code rec;
    if (std::filesystem::read_symlink(e.path(), rec).string() == want) return true;
  }
  return false;
}

}  // namespace invar::test
