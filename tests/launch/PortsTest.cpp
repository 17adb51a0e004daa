// Tests of findFreePort / checkPortFree / isPortInUse against real sockets.
//
//   findFreePort("127.0.0.1") -> a port that checkPortFree accepts
//   a listener on it          -> "port P on 127.0.0.1 is in use; ..."
#include "../TestCatch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

TEST_CASE("findFreePort returns a port that is free", "[launch][ports]") {
  auto port = findFreePort("127.0.0.1");
  REQUIRE(port);
  CHECK(*port > 0);
  CHECK(*port <= 65535);
  CHECK(checkPortFree("127.0.0.1", *port).isOk());
  CHECK_FALSE(isPortInUse("127.0.0.1", *port));
  Listener l(*port);  // and it really can be bound
  CHECK(l.ok());
}

TEST_CASE("findFreePort accepts a host name", "[launch][ports]") {
  auto port = findFreePort("localhost");
  REQUIRE(port);
  CHECK(*port > 0);
}

TEST_CASE("checkPortFree names a busy port and what to do", "[launch][ports]") {
  Listener l(0);
  REQUIRE(l.ok());
  Status s = checkPortFree("127.0.0.1", l.port());
  REQUIRE_FALSE(s.isOk());
  CHECK(s.message() ==
        "port " + std::to_string(l.port()) +
            " on 127.0.0.1 is in use; pass another --master-port or omit it to pick a free one");
  CHECK(isPortInUse("127.0.0.1", l.port()));
}

TEST_CASE("checkPortFree rejects out-of-range ports", "[launch][ports]") {
  CHECK(checkPortFree("127.0.0.1", 0).message() ==
        "--master-port 0 is out of range; pass 1..65535 or omit it");
  CHECK(checkPortFree("127.0.0.1", 65536).message() ==
        "--master-port 65536 is out of range; pass 1..65535 or omit it");
}

TEST_CASE("ports on an address that is not this machine's say so", "[launch][ports]") {
  // 192.0.2.0/24 is reserved for documentation: never a local address.
  auto port = findFreePort("192.0.2.1");
  REQUIRE_FALSE(port);
  CHECK(port.status().message() ==
        "cannot bind a free port on 192.0.2.1: Cannot assign requested address; "
        "pass an address of this machine as --master-addr");
  CHECK(checkPortFree("192.0.2.1", 29500).message() ==
        "cannot bind port 29500 on 192.0.2.1: Cannot assign requested address; "
        "pass an address of this machine as --master-addr");
}

TEST_CASE("an unresolvable --master-addr is reported", "[launch][ports]") {
  auto port = findFreePort("no-such-host.invalid");
  REQUIRE_FALSE(port);
  CHECK(port.status().message().starts_with("cannot resolve --master-addr no-such-host.invalid: "));
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
