// The passes spmdc runs after expansion (one class per file; see Pass.h).
#pragma once

#include <functional>
#include <optional>

#include "passes/Pass.h"
#include "passes/Recompute.h"

namespace spmd::passes {

/// Merges identical collectives on the same value (DedupCollectives.cpp).
class DedupCollectives : public Pass {
 public:
  std::string_view name() const override { return "dedup-collectives"; }
  std::string_view description() const override { return "merge identical collectives on the same value"; }
  Status run(program::Program& program) override;
};

/// Ring attention's load-balanced causal split: permutes the sequence
/// where it enters and leaves the ring's axis (ContextParallelBalance.cpp).
class ContextParallelBalance : public Pass {
 public:
  std::string_view name() const override { return "cp-load-balance"; }
  std::string_view description() const override {
    return "ring attention's load-balanced causal split: permute the sequence into head + tail chunks";
  }
  Status run(program::Program& program) override;
};

/// Removes nodes whose results are never read (DeadCodeElimination.cpp).
class DeadCodeElimination : public Pass {
 public:
  std::string_view name() const override { return "dead-code-elimination"; }
  std::string_view description() const override { return "remove nodes whose results are never read"; }
  Status run(program::Program& program) override;
};

/// Fuses all-reduces on one axis into buckets of up to `bucketBytes`
/// (BucketCollectives.cpp); 0 disables it. With `group`, only the
/// all-reduces it gives a group (a key) are candidates, and a bucket holds
/// one group's (a pipelined program: one stage's optimizer step).
class BucketCollectives : public Pass {
 public:
  using Group = std::function<std::optional<std::string>(const ir::Node&)>;
  explicit BucketCollectives(int64_t bucketBytes, Group group = nullptr)
      : bucketBytes_(bucketBytes), group_(std::move(group)) {}
  std::string_view name() const override { return "bucket-collectives"; }
  std::string_view description() const override {
    return "fuse all-reduces on one mesh axis into buckets (concatenate, all-reduce once, split)";
  }
  Status run(program::Program& program) override;

 private:
  int64_t bucketBytes_;
  Group group_;
};

/// The module group bucket-shard-collectives buckets a parameter in: its FQN
/// up to its first numeric component ("model.layers.0.wq.weight" ->
/// "model.layers.0"), "" (the root) when it has none.
std::string moduleGroup(const std::string& fqn);

/// Fuses parameter all-gathers and gradient reduce-scatters along dim 0
/// into one collective per module group and bucket of up to `bucketBytes`,
/// as FSDP2's flat buffers (BucketShardCollectives.cpp); 0 disables it.
class BucketShardCollectives : public Pass {
 public:
  explicit BucketShardCollectives(int64_t bucketBytes) : bucketBytes_(bucketBytes) {}
  std::string_view name() const override { return "bucket-shard-collectives"; }
  std::string_view description() const override {
    return "fuse parameter all-gathers and gradient reduce-scatters per module group into flat buffers";
  }
  Status run(program::Program& program) override;

 private:
  int64_t bucketBytes_;
};

/// What reshard-after-forward did, for the compile's notes.
struct ReshardSummary {
  int64_t gathers = 0;      ///< parameter all-gathers issued again in the backward
  int64_t gatherBytes = 0;  ///< their results per rank: what the forward no longer keeps
  int64_t movedBytes = 0;   ///< bytes/rank they move (recorded as the forward's)
};

/// One line for the compile's notes (ReshardAfterForward.cpp).
std::string reshardNote(const ReshardSummary& summary);

/// FSDP2's reshard_after_forward=True: each parameter all-gather of a
/// train step (a stored weight, or its mixed-precision cast, gathered
/// before use: fsdp, hsdp) whose result the backward reads is issued again
/// just before its first backward reader, with the views between it and
/// that reader; the forward's gathered parameter dies at its last forward
/// reader. Parameters of the root module group (no numeric FQN component:
/// embeddings, final norm, head) are kept, as FSDP2 keeps the root's
/// (its backward starts right after the forward). A program without a
/// loss output, or with `enabled` false, is left as it is
/// (ReshardAfterForward.cpp).
class ReshardAfterForward : public Pass {
 public:
  explicit ReshardAfterForward(bool enabled = true) : enabled_(enabled) {}
  std::string_view name() const override { return "reshard-after-forward"; }
  std::string_view description() const override {
    return "fsdp: gather parameters again for the backward instead of keeping them from the forward";
  }
  Status run(program::Program& program) override;
  /// What the last run() did.
  const ReshardSummary& summary() const { return summary_; }

 private:
  bool enabled_;
  ReshardSummary summary_;
};

/// Issues collectives as early as their input is ready and waits just
/// before the first use (AsyncCollectives.cpp).
class AsyncCollectives : public Pass {
 public:
  std::string_view name() const override { return "async-collectives"; }
  std::string_view description() const override {
    return "start each collective when its input is ready, wait just before its first use";
  }
  Status run(program::Program& program) override;
};

/// Appends a node `target(args)` with one tensor result of `type`, both
/// named `base` (with a suffix when taken); the caller places it.
Expected<ir::Node*> appendTensorNode(ir::Graph& graph, const std::string& base, const std::string& target,
                                     std::vector<ir::NamedArgument> args, const ir::TensorType& type);

/// Index of the first node that reads `v`, or `none` when nothing does,
/// looking through aliases (the optimizer's gradient anchors), which are
/// collected in `aliases` so that a pass moving `v` can move them too.
int firstUseThroughAliases(const ir::Value* v, int none, std::vector<ir::Node*>& aliases);

}  // namespace spmd::passes
