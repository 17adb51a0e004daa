// Tests of listenForStore and localAddressFor against real sockets.
//
//   listenForStore("127.0.0.1", 0) -> a socket listening on a free port, which nobody else can bind
//   a listener on P                -> listenForStore(.., P): "port P is in use; ..."
#include "../TestCatch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "launch/Ports.h"

namespace spmd::launch {
namespace {

/// A TCP listener on 127.0.0.1:`port` (0: any), closed on destruction.
class Listener {
 public:
  explicit Listener(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(fd_, 1) == 0;
    socklen_t len = sizeof(addr);
    if (ok_ && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      port_ = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  bool ok() const { return ok_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  int port_ = 0;
};

/// True when a TCP client can connect to `host`:`port` (numeric IPv4 or IPv6).
bool canConnect(const char* host, int port) {
  bool v6 = std::string(host).find(':') != std::string::npos;
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v6) {
    auto& a = reinterpret_cast<sockaddr_in6&>(ss);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET6, host, &a.sin6_addr);
    len = sizeof a;
  } else {
    auto& a = reinterpret_cast<sockaddr_in&>(ss);
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host, &a.sin_addr);
    len = sizeof a;
  }
  bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

TEST_CASE("listenForStore picks a free port and holds it until closed", "[launch][ports]") {
  auto sock = listenForStore("127.0.0.1", 0);
  REQUIRE(sock);
  CHECK(sock->port() > 0);
  CHECK(sock->port() <= 65535);
  CHECK(sock->fd() >= 3);  // never where a child's stdin/stdout/stderr go
  CHECK((::fcntl(sock->fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(canConnect("127.0.0.1", sock->port()));  // listening, as TCPStore expects
  {
    Listener busy(sock->port());
    CHECK_FALSE(busy.ok());
  }
  int port = sock->port();
  sock->close();
  CHECK(sock->fd() == -1);
  Listener after(port);  // free again
  CHECK(after.ok());
}

TEST_CASE("listenForStore accepts IPv4 and IPv6 clients, as TCPStore's own socket", "[launch][ports]") {
  auto sock = listenForStore("localhost", 0);
  REQUIRE(sock);
  CHECK(canConnect("127.0.0.1", sock->port()));
  // Where this machine has ::1 at all (a binding probe), IPv6 clients get in too.
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loop6{};
  loop6.sin6_family = AF_INET6;
  loop6.sin6_addr = in6addr_loopback;
  bool hasIpv6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&loop6), sizeof loop6) == 0;
  if (probe >= 0) ::close(probe);
  if (hasIpv6) CHECK(canConnect("::1", sock->port()));
}

TEST_CASE("listenForStore takes a given port", "[launch][ports]") {
  auto free = listenForStore("127.0.0.1", 0);
  REQUIRE(free);
  int port = free->port();
  free->close();
  auto sock = listenForStore("127.0.0.1", port);
  REQUIRE(sock);
  CHECK(sock->port() == port);
  StoreSocket moved = std::move(*sock);
  CHECK(sock->fd() == -1);
  CHECK(moved.port() == port);
  CHECK(canConnect("127.0.0.1", port));
}

TEST_CASE("listenForStore names a busy port and what to do", "[launch][ports]") {
  Listener l(0);
  REQUIRE(l.ok());
  auto sock = listenForStore("127.0.0.1", l.port());
  REQUIRE_FALSE(sock);
  CHECK(sock.status().message() ==
        "port " + std::to_string(l.port()) +
            " is in use; pass another --master-port or omit it to pick a free one");
}

TEST_CASE("listenForStore rejects out-of-range ports", "[launch][ports]") {
  CHECK(listenForStore("127.0.0.1", -1).status().message() ==
        "--master-port -1 is out of range; pass 1..65535 or omit it");
  CHECK(listenForStore("127.0.0.1", 65536).status().message() ==
        "--master-port 65536 is out of range; pass 1..65535 or omit it");
}

TEST_CASE("listenForStore listens for a master address this machine is reached at through NAT",
          "[launch][ports]") {
  // 192.0.2.0/24 is reserved for documentation: never a local address. The
  // store listens on every address, so the port is still this machine's.
  auto sock = listenForStore("192.0.2.1", 0);
  REQUIRE(sock);
  CHECK(canConnect("127.0.0.1", sock->port()));
}

TEST_CASE("an unresolvable --master-addr is reported", "[launch][ports]") {
  auto sock = listenForStore("no-such-host.invalid", 0);
  REQUIRE_FALSE(sock);
  CHECK(sock.status().message().starts_with("cannot resolve --master-addr no-such-host.invalid: "));
}

TEST_CASE("workers bind the address that reaches the master", "[launch][ports]") {
  auto local = localAddressFor("127.0.0.1");
  REQUIRE(local);
  CHECK(*local == "127.0.0.1");
  auto bad = localAddressFor("no-such-host.invalid");
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message().starts_with("cannot resolve --master-addr no-such-host.invalid: "));
}

}  // namespace
}  // namespace spmd::launch
