// Ports: getaddrinfo + socket + bind (SO_REUSEADDR, as TCPStore binds).
//
//   findFreePort("127.0.0.1")          -> 41873
//   findFreePort("no.such.host.")      -> error "cannot resolve --master-addr no.such.host.: ..."
//   checkPortFree("127.0.0.1", 22)     -> error "port 22 on 127.0.0.1 is in use; ..."
#include "launch/Ports.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spmd::launch {
namespace {

/// A bound socket, closed on destruction; `port` is the port it holds.
struct BoundSocket {
  int fd = -1;
  int port = 0;
  int bindErrno = 0;
  BoundSocket() = default;
  BoundSocket(const BoundSocket&) = delete;
  BoundSocket& operator=(const BoundSocket&) = delete;
  ~BoundSocket() {
    if (fd >= 0) ::close(fd);
  }
};

int portOf(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(ss).sin6_port);
  return 0;
}

/// Resolves `addr` and binds `port` on its first address. Resolution and
/// socket failures are returned as errors; a failed bind is reported in
/// `out.bindErrno` so callers can word it.
Status bindOnce(const std::string& addr, int port, BoundSocket& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(addr.empty() ? nullptr : addr.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr)
    return Status::error("cannot resolve --master-addr " + addr + ": " + ::gai_strerror(rc) +
                         "; pass a numeric address or a resolvable host name");
  out.fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (out.fd < 0) {
    int err = errno;
    ::freeaddrinfo(found);
    return Status::error("cannot open a socket for " + addr + ": " + std::strerror(err));
  }
  int one = 1;
  ::setsockopt(out.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(out.fd, found->ai_addr, found->ai_addrlen) != 0) out.bindErrno = errno;
  ::freeaddrinfo(found);
  if (out.bindErrno != 0) return Status::ok();
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(out.fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return Status::error("cannot read the bound port on " + addr + ": " + std::strerror(errno));
  out.port = portOf(ss);
  return Status::ok();
}

/// What to do about a failed bind, by its errno.
const char* bindHint(int err) {
  return err == EADDRNOTAVAIL ? "; pass an address of this machine as --master-addr"
                              : "; pass another --master-port or omit it to pick a free one";
}

std::string where(const std::string& addr, int port) {
  return "port " + std::to_string(port) + " on " + addr;
}

}  // namespace

Expected<int> findFreePort(const std::string& addr) {
  BoundSocket sock;
  SPMD_RETURN_IF_ERROR(bindOnce(addr, 0, sock));
  if (sock.bindErrno != 0)
    return Status::error("cannot bind a free port on " + addr + ": " + std::strerror(sock.bindErrno) +
                         "; pass an address of this machine as --master-addr");
  if (sock.port <= 0) return Status::error("cannot read the bound port on " + addr);
  return sock.port;
}

Status checkPortFree(const std::string& addr, int port) {
  if (port < 1 || port > 65535)
    return Status::error("--master-port " + std::to_string(port) +
                         " is out of range; pass 1..65535 or omit it");
  BoundSocket sock;
  SPMD_RETURN_IF_ERROR(bindOnce(addr, port, sock));
  if (sock.bindErrno == EADDRINUSE)
    return Status::error(where(addr, port) +
                         " is in use; pass another --master-port or omit it to pick a free one");
  if (sock.bindErrno != 0)
    return Status::error("cannot bind " + where(addr, port) + ": " + std::strerror(sock.bindErrno) +
                         bindHint(sock.bindErrno));
  return Status::ok();
}

bool isPortInUse(const std::string& addr, int port) {
  BoundSocket sock;
  return port >= 1 && port <= 65535 && bindOnce(addr, port, sock).isOk() && sock.bindErrno == EADDRINUSE;
}

Expected<std::string> localAddressFor(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found);
  if (rc != 0 || found == nullptr)
    return Status::error("cannot resolve --master-addr " + host + ": " + ::gai_strerror(rc) +
                         "; pass a numeric address or a resolvable host name");
  BoundSocket sock;
  sock.fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  // A datagram socket's connect() only picks the route and source address.
  bool connected = sock.fd >= 0 && ::connect(sock.fd, found->ai_addr, found->ai_addrlen) == 0;
  int err = errno;
  ::freeaddrinfo(found);
  if (!connected)
    return Status::error("no route from this machine to --master-addr " + host + ": " + std::strerror(err) +
                         "; check the address, or name the interface to use with GLOO_SOCKET_IFNAME");
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(sock.fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return Status::error("cannot read this machine's address towards " + host + ": " + std::strerror(errno));
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = ss.ss_family == AF_INET6
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in&>(ss).sin_addr);
  if (::inet_ntop(ss.ss_family, raw, text, sizeof text) == nullptr)
    return Status::error("cannot print this machine's address towards " + host + ": " + std::strerror(errno));
  return std::string(text);
}

}  // namespace spmd::launch
