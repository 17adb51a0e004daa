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

/// True when `dir` holds `.safetensors` files and neither a `.metadata` nor
/// spmd-run's own checkpoint files (index.json, latest): a checkpoint in
/// DCP's Hugging Face format (HuggingFaceStorageWriter, torchtitan's
/// last_save_in_hf) or a plain save_pretrained folder.
bool isSafetensorsDcp(const std::string& dir);

/// The metadata DCP's HuggingFaceStorageReader builds for `dir`: every
/// tensor of every `*.safetensors` file is a chunk at the offsets of the
/// file's "DCP_SHARDING_INFO" header entry (zeros without one), the global
/// size the chunks' extent. Errors name the file and tensor: a file that is
/// not safetensors, malformed sharding info, a tensor whose chunks disagree
/// on dtype or rank, chunks that do not cover the tensor exactly once.
Expected<DcpMetadata> safetensorsDcpMetadata(const std::string& dir);

}  // namespace spmd::runtime
