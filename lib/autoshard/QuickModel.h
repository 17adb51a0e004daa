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
// What it leaves out of the compiled program's cost (passes::modelLayout):
// bucketing (each collective pays its own alpha), the copies a
// redistribution allocates, and sequence parallelism (a schema asking for it
// is not covered: it is priced by compiling). The search ranks layouts with
// it; the few it likes best are compiled and priced exactly (AutoShard.cpp).
#pragma once

#include <memory>

#include "autoshard/AutoShard.h"
#include "passes/LayoutCost.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

namespace spmd::autoshard {

/// Prices layouts of one model without compiling them.
class QuickModel {
 public:
  /// Reads the model at `modelPath` (no weights) and prepares its graph for
  /// the compile options and mesh of `o`. Errors: the model does not read,
  /// the optimizer cannot be appended.
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
  /// planned.
  Expected<passes::LayoutCost> evaluate(const schema::PlacementSchema& s);

  struct Impl;  ///< the prepared graph and what is read of it once (QuickModel.cpp)

 private:
  explicit QuickModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace spmd::autoshard
