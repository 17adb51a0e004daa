// TCP ports for the rendezvous (c10d TCPStore on MASTER_ADDR:MASTER_PORT).
//
//   SPMD_ASSIGN_OR_RETURN(int port, findFreePort("127.0.0.1"));   // e.g. 41873
//   SPMD_RETURN_IF_ERROR(checkPortFree("127.0.0.1", 29500));
//   // busy: "port 29500 on 127.0.0.1 is in use; pass another --master-port
//   //        or omit it to pick a free one"
//
// Both bind a throw-away socket and close it again, so another process can
// still take the port before the worker binds it; that window is short.
#pragma once

#include <string>

#include "support/Status.h"

namespace spmd::launch {

/// A TCP port that was free on `addr` (a numeric address or a host name of
/// this machine) when asked: binds port 0 and reads back what the system chose.
Expected<int> findFreePort(const std::string& addr);

/// OK when a listener could bind `addr`:`port` now. A busy port is the error
/// "port P on A is in use; pass another --master-port or omit it to pick a
/// free one"; other failures name the address and the system's reason.
Status checkPortFree(const std::string& addr, int port);

/// True only when binding `addr`:`port` fails because the port is taken;
/// false when it is free or binding fails for another reason.
bool isPortInUse(const std::string& addr, int port);

/// The address of this machine that packets to `host` leave from (the
/// source address the routing table picks; nothing is sent), e.g.
/// "10.0.0.5" for a master at 10.0.0.1, "127.0.0.1" for a master at
/// 127.0.0.1. Workers bind their Gloo transport to it so that peers on
/// other nodes can reach them.
Expected<std::string> localAddressFor(const std::string& host);

}  // namespace spmd::launch
