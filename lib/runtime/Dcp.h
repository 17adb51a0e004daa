// PyTorch Distributed Checkpoint (DCP) folders in and out of spmd-run
// (format: DcpMetadata.h).
//
//   spmd-run -n 4 model.spmd --resume-dcp torch_ckpt/ ...   (FSDP2, torchtitan or dcp.save folders)
//   spmd-run -n 4 model.spmd --save-dcp out_ckpt/ ...       (dcp.load / dcp_to_torch_save read it)
//
// Names: program weight <fqn> is DCP key "model.<fqn>" (get_state_dict
// nested under "model", as torchtitan and the DCP tutorials do) or plain
// "<fqn>"; optimizer state optim.<fqn>.<state> is "optim.state.<fqn>.<state>"
// or "optimizer.state.<fqn>.<state>"; spmdc's single AdamW step counter
// optim.step is every parameter's "optim.state.<fqn>.step" (all equal).
// Other keys (param_groups, lr schedulers, data loaders) are not read.
//
// Resharding: each rank reads only the chunks that overlap its own region
// and checks that they cover it.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <optional>
#include <string>

#include "program/Program.h"
#include "runtime/Checkpoint.h"
#include "runtime/TensorIO.h"
#include "support/Status.h"

namespace spmd::runtime {

/// True when `dir` is a DCP folder: one holding a `.metadata` file, or
/// `.safetensors` files in DCP's Hugging Face format (HuggingFaceStorageWriter;
/// a plain save_pretrained folder reads the same way) and no spmd-run
/// checkpoint files.
bool isDcpCheckpoint(const std::string& dir);

/// The DCP folder `--resume-dcp dir` means: `dir` itself when it holds a
/// `.metadata`, else its complete step folder of the highest step (the
/// "step-<N>" folders that `--save-dcp dir --save-every K` and torchtitan's
/// checkpointer write; a folder without `.metadata`, left by a crash, is
/// passed over). An error names `dir` when it is neither.
Expected<std::string> resolveDcpFolder(const std::string& dir);

/// What a launcher checks before starting workers: `dir`'s .metadata parses,
/// every weight of `program` has a key of its global shape and dtype, and
/// every chunk's bytes lie inside an existing file. Errors name the file and
/// the tensor.
Status checkDcpCheckpoint(const std::string& dir, const program::Program& program);

/// Copies rank `rank`'s shard of every weight of DCP checkpoint `dir` into
/// `weights` (resharding from the chunks saved); returns the optimizer's
/// step (0 without one). Errors name the file and tensor: those of
/// checkDcpCheckpoint, a chunk that does not load as a tensor of its
/// recorded shape and dtype, chunks that leave part of the shard uncovered,
/// NaN or Inf values, unequal per-parameter steps.
Expected<int64_t> loadDcpCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                                    TensorMap& weights);

/// The two layouts DCP reads (spmd-run --dcp-format): torch's own
/// (FileSystemWriter: `.metadata` + `__<rank>_0.distcp`), and its Hugging
/// Face one (HuggingFaceStorageWriter(save_distributed=True): a
/// `shard-<rank + 1>-model-00001-of-00001.safetensors` per rank, each
/// tensor's offsets in the header's DCP_SHARDING_INFO, no `.metadata`).
enum class DcpFormat { Torch, HuggingFace };

/// "torch" or "hf" (--dcp-format) as a DcpFormat; nullopt for anything else.
std::optional<DcpFormat> parseDcpFormat(const std::string& name);

/// How a DCP save writes: its format, and with `stages` (a pipelined run;
/// the program is then its checkpointView, the rank the one within this
/// process's stage) each stage's ranks write the weights it owns, as file
/// number stage * ranks + rank: the same folder as without the pipeline.
struct DcpWrite {
  DcpFormat format = DcpFormat::Torch;
  const StageSave* stages = nullptr;
};

/// Writes `weights` (rank `rank`'s shards) as DCP checkpoint `dir`: every
/// rank writes `__<rank>_0.distcp` with the chunks it owns (a replicated
/// shard by the rank at coordinate 0 of the replicating axes), then rank 0
/// writes `.metadata` (collective over `store`; `step` keys the exchange).
/// In the Hugging Face format each rank writes `<file>.partial` and rank 0
/// renames them once all are written (one tensor a file: a rank holding
/// several blocks of one tensor, a strided shard, is an error).
/// Errors (on every rank): I/O failures, a weight pending a reduction.
Status saveDcpCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                         const TensorMap& weights, int64_t step, c10d::Store& store,
                         const DcpWrite& how = {});

/// Periodic DCP saves (`--save-dcp root --save-every K`), laid out as
/// torchtitan's checkpointer does: saveDcpCheckpoint into
/// `root/step-<step>`, then rank 0 removes all but the newest `keep`
/// complete step folders (0: keep all) and any incomplete older one.
Status saveDcpStep(const std::string& root, const program::Program& program, int64_t rank,
                   const TensorMap& weights, int64_t step, c10d::Store& store, int keep,
                   const DcpWrite& how = {});

}  // namespace spmd::runtime
