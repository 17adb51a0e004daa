// Sharded checkpoints of a distributed train step (layout: CheckpointIndex.h).
//
//   ckpt/step-3/{index.json, rank0.safetensors, rank1.safetensors}
//   ckpt/step-4/...
//   ckpt/latest          "step-4"
//
// Saving never loses the last good checkpoint: every rank writes (and
// fsyncs) its own rank file into a fresh step folder, the ranks meet at the
// store, and rank 0 writes the index and then replaces `latest` atomically;
// only after that are older step folders pruned (keep the newest `keep`).
// Each rank writes only its own file, so per-node local disks work: every
// node then holds its own ranks' files and rank 0's node the index. Loading
// (resume, consolidate) needs every rank file the layout asks for.
//
// Loading verifies the index, each shard's checksum, shape and dtype, and
// refuses NaN/Inf values. A checkpoint saved under another mesh or layout
// is resharded: each rank assembles its shard from the saved shards.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "program/Program.h"
#include "runtime/CheckpointIndex.h"
#include "runtime/TensorIO.h"

namespace spmd::runtime {

/// How the processes of a pipelined run share one checkpoint: `stages`
/// copies of the index mesh's ranks run (world rank = stage * ranks +
/// rank), and each weight is saved by the ranks of the stage owning it,
/// into "rank<r>-stage<s>.safetensors". The index is a plain one (the mesh
/// without the pipeline: pipeline::checkpointView), so a run with or
/// without a pipeline reads it.
struct StageSave {
  int64_t stages = 1;
  int64_t stage = 0;                     ///< this process's
  std::map<std::string, int64_t> owner;  ///< weight FQN -> the stage saving it
};

/// Writes rank `rank`'s `weights` as step folder "step-<step>" of checkpoint
/// `dir` (every rank calls it; collective over `store`), then points `latest`
/// at it and prunes all but the newest `keep` step folders (0: keep all).
/// With `stages` (a pipelined run), `rank` is the rank in `program`'s mesh
/// within this process's stage, and only the weights the stage owns are
/// written. Errors (on every rank): I/O failures, and a weight holding
/// NaN/Inf values (the last good checkpoint then stays `latest`).
Status saveCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                      const TensorMap& weights, int64_t step, c10d::Store& store, int keep = 2,
                      const StageSave* stages = nullptr);

/// "step-<N>" and "step-<N>-<k>" -> (N, k); nullopt for any other folder
/// name (the step folders of --save, and of --save-dcp with --save-every).
std::optional<std::pair<int64_t, int64_t>> stepOfFolder(const std::string& name);

/// The step folders of `dir` (names stepOfFolder accepts) to remove once
/// step folder `current` is saved and `keep` (>= 1) of them are kept: all but
/// the newest keep - 1 others, by (N, k); none when keep <= 0. With
/// `isComplete`, only folders it accepts count and are pruned so, and the
/// ones it rejects whose step is older than `current`'s (saves that never
/// finished) are pruned too; newer unfinished ones are left alone.
std::vector<std::string> stepFoldersToPrune(const std::string& dir, const std::string& current, int keep,
                                            const std::function<bool(const std::string&)>& isComplete = {});

/// The string stored under `key` in `store` (waits for it), and its setter:
/// how the ranks of a checkpoint save or resume agree (also DCP's).
std::string storeGetString(c10d::Store& store, const std::string& key);
void storeSetString(c10d::Store& store, const std::string& key, const std::string& value);

/// Every rank of `world` learns whether all ranks loaded their checkpoint
/// shards (`mine`: this rank's outcome): the first failing rank's error on
/// every rank, so that none waits for the others in a collective.
Status agreeOnResume(c10d::Store& store, int64_t rank, int64_t world, const Status& mine);

/// Copies rank `rank`'s shard of every weight of checkpoint `dir` (a root
/// with `latest`, or a step folder) into `weights`, resharding when the
/// checkpoint's mesh or a weight's layout differs from `program`'s; returns
/// the checkpoint's step. Errors name the file and tensor: a bad index, a
/// weight missing from it or of another shape or dtype, a missing rank
/// file, a shard whose checksum, shape or dtype differs from the index, NaN
/// or Inf values.
Expected<int64_t> loadCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                                 TensorMap& weights);

/// Checks, without reading shards, that checkpoint `dir` has a valid index
/// holding exactly `program`'s weights at their global shapes and dtypes,
/// and that every rank file exists and lists each of its shards with the
/// index's dtype and shape (what a launcher can check before starting
/// workers; checksums and NaN/Inf are the workers' to check).
Status checkCheckpoint(const std::string& dir, const program::Program& program);

/// The global tensors of checkpoint `dir` by FQN, verified as
/// loadCheckpoint does (optimizer states included).
Expected<TensorMap> consolidatedTensors(const std::string& dir);

/// Writes one safetensors file `output` of global tensors named by FQN from
/// checkpoint `dir`, verified as loadCheckpoint does; no file on error.
Status consolidateCheckpoint(const std::string& dir, const std::string& output);

}  // namespace spmd::runtime
