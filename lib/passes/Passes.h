// The passes spmdc runs after expansion (one class per file; see Pass.h).
#pragma once

#include "passes/Pass.h"

namespace spmd::passes {

/// Merges identical collectives on the same value (DedupCollectives.cpp).
class DedupCollectives : public Pass {
 public:
  std::string_view name() const override { return "dedup-collectives"; }
  std::string_view description() const override { return "merge identical collectives on the same value"; }
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
/// (BucketCollectives.cpp); 0 disables it.
class BucketCollectives : public Pass {
 public:
  explicit BucketCollectives(int64_t bucketBytes) : bucketBytes_(bucketBytes) {}
  std::string_view name() const override { return "bucket-collectives"; }
  std::string_view description() const override {
    return "fuse all-reduces on one mesh axis into buckets (concatenate, all-reduce once, split)";
  }
  Status run(program::Program& program) override;

 private:
  int64_t bucketBytes_;
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

}  // namespace spmd::passes
