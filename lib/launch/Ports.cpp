// Ports: the rendezvous socket (getaddrinfo + socket + bind + listen) and the
// address the workers bind.
//
//   listenForStore("127.0.0.1", 0)       -> a socket listening on [::]:41873
//   listenForStore("no.such.host.", 0)   -> error "cannot resolve --master-addr no.such.host.: ..."
//   listenForStore("127.0.0.1", 22)      -> error "port 22 is in use; ..."
#include "launch/Ports.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace spmd::launch {
namespace {

/// A socket descriptor, closed on destruction.
struct BoundSocket {
  int fd = -1;
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

Status checkResolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc != 0 || found == nullptr)
    return Status::error("cannot resolve --master-addr " + host + ": " + ::gai_strerror(rc) +
                         "; pass a numeric address or a resolvable host name");
  return Status::ok();
}

/// Binds the wildcard address of `family` (AF_INET6 dual-stack, or AF_INET)
/// at `port` and listens. Returns the descriptor, moved to 3 or above so
/// that a child's stdin/stdout/stderr never land on it; -1 with errno set.
int listenOnAny(int family, int port) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  auto failed = [fd] {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  };
  int one = 1, zero = 0;
  // A given port may still have connections in TIME_WAIT from the last run
  // (TCPStore sets the same); a picked one is never shared.
  if (port != 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
    auto& a = reinterpret_cast<sockaddr_in6&>(ss);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof a;
  } else {
    auto& a = reinterpret_cast<sockaddr_in&>(ss);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, SOMAXCONN) != 0) return failed();
  if (fd >= 3) return fd;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (high < 0) return failed();
  ::close(fd);
  return high;
}

}  // namespace

StoreSocket::StoreSocket(StoreSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

StoreSocket& StoreSocket::operator=(StoreSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

void StoreSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Expected<StoreSocket> listenForStore(const std::string& masterAddr, int port) {
  if (port < 0 || port > 65535)
    return Status::error("--master-port " + std::to_string(port) +
                         " is out of range; pass 1..65535 or omit it");
  SPMD_RETURN_IF_ERROR(checkResolves(masterAddr));
  // As TCPStore: IPv6 (here explicitly dual-stack), else IPv4.
  int fd = listenOnAny(AF_INET6, port);
  if (fd < 0) fd = listenOnAny(AF_INET, port);
  if (fd < 0) {
    int err = errno;
    std::string what = port == 0 ? std::string("a free port") : "port " + std::to_string(port);
    if (err == EADDRINUSE)
      return Status::error(what + " is in use; pass another --master-port or omit it to pick a free one");
    return Status::error("cannot listen on " + what + ": " + std::strerror(err) +
                         (port == 0 ? "" : "; pass another --master-port or omit it to pick a free one"));
  }
  BoundSocket sock;
  sock.fd = fd;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || portOf(ss) <= 0)
    return Status::error("cannot read the port of the rendezvous socket: " +
                         std::string(std::strerror(errno)));
  return StoreSocket(std::exchange(sock.fd, -1), portOf(ss));
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
