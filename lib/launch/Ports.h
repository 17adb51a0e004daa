// TCP ports for the rendezvous (c10d TCPStore on MASTER_ADDR:MASTER_PORT).
//
//   SPMD_ASSIGN_OR_RETURN(StoreSocket s, listenForStore("127.0.0.1", 0));   // s.port() e.g. 41873
//   // start rank 0 with s.fd() inherited (TCPStoreOptions::masterListenFd), then
//   s.close();
//   listenForStore("127.0.0.1", 29500)
//     -> busy: "port 29500 is in use; pass another --master-port or omit it to pick a free one"
//
// The port stays taken from the moment the launcher picks it until rank 0's
// store stops serving it: no other process can bind it in between, so
// concurrent launches cannot collide on it.
#pragma once

#include <string>

#include "support/Status.h"

namespace spmd::launch {

/// A listening TCP socket on every address of this machine that holds the
/// rendezvous port until rank 0 takes it over; closed on destruction.
class StoreSocket {
 public:
  StoreSocket() = default;
  /// Owns `fd`, a socket listening on `port`.
  StoreSocket(int fd, int port) : fd_(fd), port_(port) {}
  ~StoreSocket() { close(); }
  StoreSocket(StoreSocket&& other) noexcept;
  StoreSocket& operator=(StoreSocket&& other) noexcept;
  StoreSocket(const StoreSocket&) = delete;
  StoreSocket& operator=(const StoreSocket&) = delete;

  /// The descriptor (close-on-exec, never 0..2), or -1 once closed.
  int fd() const { return fd_; }
  /// The port it listens on.
  int port() const { return port_; }
  /// Closes this process's descriptor (a child that inherited it keeps its own).
  void close();

 private:
  int fd_ = -1;
  int port_ = 0;
};

/// Listens on `port` (0: a free one the system picks) on every address of
/// this machine, IPv6 and IPv4 ("::" dual-stack, else 0.0.0.0), as c10d's
/// TCPStore server binds, after checking that `masterAddr` (where the
/// workers will connect) resolves. Errors: "cannot resolve --master-addr
/// A: <reason>; ...", "port P is in use; pass another --master-port or omit
/// it to pick a free one", or another bind failure naming the port and the
/// system's reason.
Expected<StoreSocket> listenForStore(const std::string& masterAddr, int port);

/// The address of this machine that packets to `host` leave from (the
/// source address the routing table picks; nothing is sent), e.g.
/// "10.0.0.5" for a master at 10.0.0.1, "127.0.0.1" for a master at
/// 127.0.0.1. Workers bind their Gloo transport to it so that peers on
/// other nodes can reach them.
Expected<std::string> localAddressFor(const std::string& host);

}  // namespace spmd::launch
