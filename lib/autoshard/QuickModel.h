// The quick cost model of auto-sharding's search: a layout priced from its
// propagation alone, without expansion and the passes, on one graph read
// once (optimizer appended, a gather anchor before every parameter).
//
//   llama_deep_train, mesh 8, [S(0)] gathered for every weight:
//     propagate (rules built once)                  -> each node's layouts
//     per operand whose layout changes, once per (value, layout):
//       planReshard(...) -> all_gather on x          -> comm, per axis
//     per node: operand + result bytes at their local layout, FLOPs / the
//       product of the axes the node shards         -> compute
//     weights at their stored layout + live values  -> memory
//
// A stack of repeated layers (Fold.h) is priced on two cuts of the program,
// to AutoOptions::foldKeep layers and to one more; each figure is
// extrapolated to the whole stack: cost(L) = cost(k) + (L - k) * (cost(k+1) -
// cost(k)), which is the whole program's figure when the layers past the
// first plan alike (QuickModelTest compares the two). A third cut, to k + 2
// layers, checks that (check(), or every evaluate() with setCheckAll):
// extrapolated from k + 1 and k + 2 the step must cost the same (within
// 1e-4). Where it does not, the layers plan unalike under that layout (a
// layer's output layout alternates, and the head after the stack is planned
// differently in each cut: the 8B-shaped Llama at 2x4 got negative
// compute), and the layout is refused, not mispriced:
//
//   8B train step, 2x4, weights [S(1), S(0)] / [S(0), S(1)]:
//     cost(2) 16.2 s, cost(3) 8.9 s -> cost(32) = -202.6 s compute  (refused;
//     the whole program: 39.4 s)
//
// The search checks only the layouts it would move to, start from or
// compile (AutoShard.cpp): a layout priced too high it passes by anyway.
//
// What it leaves out of the compiled program's cost (passes::modelLayout):
// bucketing (each collective pays its own alpha), the copies a
// redistribution allocates, and sequence parallelism (a schema asking for it
// is not covered: it is priced by compiling). The search ranks layouts with
// it; the few it likes best are compiled and priced exactly (AutoShard.cpp).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>

#include "autoshard/AutoShard.h"
#include "passes/LayoutCost.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

namespace spmd::autoshard {

/// Prices layouts of one model without compiling them.
class QuickModel {
 public:
  /// Reads the model at `modelPath` (no weights) and prepares its graph for
  /// the compile options and mesh of `o` (folding its layers unless
  /// o.foldKeep is 0, the program has no stack, or o.pins lay out part of
  /// it). Errors: the model does not read, the optimizer cannot be appended.
  static Expected<std::unique_ptr<QuickModel>> create(const std::string& modelPath, const AutoOptions& o);
  /// The same on an archive already read (without weights), which it keeps.
  static Expected<std::unique_ptr<QuickModel>> create(pt2::Archive archive, const AutoOptions& o);
  ~QuickModel();
  QuickModel(const QuickModel&) = delete;
  QuickModel& operator=(const QuickModel&) = delete;

  /// False for schemas the quick model cannot price (sequence parallelism).
  static bool covers(const schema::PlacementSchema& s);

  /// The modeled cost of `s` (the fields of passes::LayoutCost). Errors: the
  /// schema does not resolve, propagation fails, a redistribution cannot be
  /// planned; folded, the layers plan unalike under `s` ("... plan unalike
  /// ...": the step extrapolates below 0, or, with setCheckAll, check()
  /// fails).
  Expected<passes::LayoutCost> evaluate(const schema::PlacementSchema& s);

  /// OK when evaluate(s)'s figures are the whole program's: not folded, or
  /// the third cut extrapolates to the same step (see the top); else
  /// evaluate()'s errors.
  Status check(const schema::PlacementSchema& s);
  /// Every evaluate() checks (tests; the search checks what it uses).
  void setCheckAll(bool on) { checkAll_ = on; }

  /// Folded: how many layouts evaluate() and check() refused because the
  /// layers plan unalike under them.
  int64_t unalike() const { return unalike_; }

  /// How layouts are priced: empty for the whole program, else e.g.
  /// "model.layers priced at 2 and 3 of 32 layers".
  const std::string& folding() const { return folding_; }

  struct Impl;  ///< the prepared graph and what is read of it once (QuickModel.cpp)

 private:
  QuickModel(std::unique_ptr<Impl> impl, std::unique_ptr<Impl> next, std::unique_ptr<Impl> check);
  /// The folded model of `a` (cut to o.foldKeep + 1 layers first: a program
  /// without a stack is refused before anything more is read), or why it
  /// does not fold; `a` may then be cut or moved from.
  static Expected<std::unique_ptr<QuickModel>> folded(pt2::Archive& a, const AutoOptions& o);
  std::unique_ptr<Impl> impl_;   ///< the program, or its first kept layers when folded
  std::unique_ptr<Impl> next_;   ///< folded: the first kept + 1 layers; else null
  std::unique_ptr<Impl> check_;  ///< folded: the first kept + 2 layers; else null
  int64_t extra_ = 0;            ///< folded: L - kept, the times next_'s extra layer counts
  int64_t unalike_ = 0;          ///< layouts refused as planning unalike
  bool checkAll_ = false;        ///< evaluate() prices the third cut too
  std::string folding_;
  std::unordered_set<std::string> cutAway_;  ///< folded: the stored inputs' FQNs the cuts removed
};

}  // namespace spmd::autoshard
