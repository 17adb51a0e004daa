// The spmd.* ops of compiled programs as executor kernels. They run on the
// thread's MeshComm (CollectiveScope); see ir/Collectives.h for their
// meaning and Comm.h for the groups.
#pragma once

#include <string_view>

#include "runtime/LocalOps.h"

namespace spmd::runtime {

/// The kernel of an spmd.* target ("spmd.all_reduce", ...), or null.
const LocalOp* findCollective(std::string_view target);

}  // namespace spmd::runtime
