// Shared by Dcp.cpp (loading) and DcpSave.cpp: how program weights are
// named in a DCP checkpoint.
#pragma once

#include <string>
#include <vector>

#include "program/Program.h"
#include "runtime/DcpMetadata.h"
#include "support/Status.h"

namespace spmd::runtime {

/// A program weight and the DCP keys that hold it (one key; for optim.step,
/// every parameter's step key).
struct DcpMatch {
  const program::WeightEntry* weight = nullptr;
  std::vector<std::string> keys;
};

/// The DCP keys that may hold program weight `fqn`, preferred first
/// ("model.<fqn>", "<fqn>"; "optim.state.<rest>", "optimizer.state.<rest>").
std::vector<std::string> dcpKeysOf(const std::string& fqn);

/// Every weight of `p` matched to keys of `md` of its global shape and
/// dtype; errors name `dir`/.metadata and the weight.
Expected<std::vector<DcpMatch>> matchDcpWeights(const DcpMetadata& md, const program::Program& p,
                                                const std::string& dir);

}  // namespace spmd::runtime
