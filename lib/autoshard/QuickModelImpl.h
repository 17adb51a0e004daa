// The quick model's pricing of one prepared graph (QuickModel::Impl),
// shared by QuickModel.cpp (the cuts of a folded stack, extrapolated) and
// QuickPricing.cpp (propagation, redistributions, compute and memory of one
// graph). Internal to lib/autoshard.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autoshard/QuickModel.h"
#include "schema/Resolve.h"
#include "sharding/DeviceProfile.h"
#include "sharding/Propagation.h"
#include "sharding/Reshard.h"
#include "sharding/RuleText.h"
#include "support/Hash.h"

namespace spmd::autoshard {
namespace quick {

// What pricing reads of one node, whatever the layout.
struct NodeFacts {
  bool priced = false;  // computes (not a view, symbolic op or anchor)
  double flops = 0;     // on global shapes
  ir::ScalarType dtype = ir::ScalarType::Float;
  std::vector<ir::Value*> operands, results;  // tensorOperands / tensorResults
  /// Layout anchors: the bucket group their collectives are fused in
  /// ("param:" and a parameter's passes::moduleGroup, "grad" for
  /// gradients); else empty.
  std::string bucket;
};

// A storage's live range over node indices (from passes::liveRanges).
struct Range {
  const ir::Value* value;
  int first, last;
};

// One step of planReshard's plan, in bytes per rank.
struct PlannedStep {
  int64_t axis = 0;
  sharding::CollectiveKind kind = sharding::CollectiveKind::AllGather;
  double cost = 0, in = 0, out = 0;
};

// One collective step of a redistribution.
struct Move {
  int64_t axis = 0;
  sharding::CollectiveKind kind = sharding::CollectiveKind::AllGather;
  double seconds = 0;  // without the alpha when bucketed
  int bucket = -1;     // bucket group of the node that asked for it; -1: none
  double bytes = 0;    // its input, per rank
};

// What the redistributions of one value cost.
struct ValueComm {
  std::vector<Move> moves;
  double computeSeconds = 0;  // local steps, bucket packing
};

}  // namespace quick

struct QuickModel::Impl {
  Impl(pt2::Archive a, sharding::Mesh m) : archive(std::move(a)), mesh(std::move(m)) {}
  pt2::Archive archive;
  sharding::Mesh mesh;
  std::vector<int64_t> meshShape;
  sharding::DeviceProfile profile;
  sharding::CostModel cost;      // propagation's (as compile() is given it)
  sharding::CostModel linkCost;  // pricing's: the profile's links (as passes::modelLayout)
  bool replicateUnknown = false;
  int64_t bucketBytes = 0;
  sharding::RuleRegistry registry;
  std::unique_ptr<sharding::Propagator> propagator;
  std::vector<std::pair<int, size_t>> anchors;  // (node index, signature input index)
  std::vector<quick::NodeFacts> nodes;
  std::vector<quick::Range> ranges;
  sharding::Propagation scratch;                // reused by every evaluation
  std::vector<int64_t> elements, elementBytes;  // by value id, symbolic sizes at their hint
  std::vector<int> bucketOf;                    // by node: index of its bucket group, -1: none
  std::vector<int> valueClass;                  // by value id: values of one type share a class
  // Reshard plans by (value class, current layout, asked layout).
  mutable std::unordered_map<std::vector<uint64_t>, std::vector<quick::PlannedStep>, WordsHash> plans;
  mutable std::vector<uint64_t> key;  // scratch of addMoves()

  // The last evaluation's figures (update() brings them to the next one):
  std::vector<double> computeOf;                     // by node
  std::vector<quick::ValueComm> comm;                // by value id: its redistributions
  quick::ValueComm outputComm;                       // the outputs' redistributions
  std::vector<int64_t> rangeBytes, delta;            // by range; by node: live bytes starting - ending there
  std::vector<char> grows;                           // by range: counted per folded layer (QuickModel())
  std::vector<int64_t> growDelta;                    // delta of the ranges that grow
  std::vector<char> extraNode;                       // by node, folded: a node of the extra layer
  mutable std::vector<int64_t> liveAt, grownAt;      // scratch of peakLive()
  std::vector<int> rangeOf;                          // by value id: its range, -1: none
  std::vector<size_t> usedValues;                    // ids of the values some node reads, in order
  size_t inputRanges = 0;                            // ranges[0, inputRanges): user inputs
  bool cached = false;                               // the figures are the last propagation's
  std::unique_ptr<schema::ResolveCache> resolve;     // the program's glob matches (first evaluation on)
  std::vector<const sharding::ShardingSpec*> asked;  // scratch of priceValue()
  std::vector<size_t> dirty;                         // scratch of update()

  /// sharding::localBytes, from the element counts read once.
  int64_t localBytes(const ir::Value& v, const sharding::ShardingSpec& s) const {
    auto id = static_cast<size_t>(v.id());
    int64_t n = elements[id];
    for (size_t a = 0; a < s.placements.size(); ++a)
      if (s.placements[a].isShard()) n = std::max<int64_t>(n / mesh.size(static_cast<int64_t>(a)), 1);
    return n * elementBytes[id];
  }

  Status prepare(const AutoOptions& o);
  void addAnchors();
  void readFacts();
  Expected<sharding::ReshardPlan> planFor(const ir::Value& v, const sharding::ShardingSpec& cur,
                                          const sharding::ShardingSpec& req) const;
  sharding::ReshardPlan gatherEachAxis(const ir::Value& v, sharding::ShardingSpec spec) const;
  Status addMoves(const ir::Value& v, const sharding::ShardingSpec& cur, const sharding::ShardingSpec& req,
                  int bucket, quick::ValueComm& out) const;
  Status priceValue(const sharding::Propagation& p, const ir::Value& v, quick::ValueComm& out,
                    std::vector<const sharding::ShardingSpec*>& asked, bool price = true) const;
  Status priceOutputs(const sharding::Propagation& p, const schema::ResolvedPlacements& pl);
  double nodeSeconds(const sharding::Propagation& p, size_t n) const;
  void setRangeBytes(const sharding::Propagation& p, size_t r);
  Status update(const sharding::Propagation& p, const std::vector<int>* replanned);
  Expected<passes::LayoutCost> evaluate(const schema::PlacementSchema& s);
  void sumComm(passes::LayoutCost& c) const;
  void sumMemory(const schema::ResolvedPlacements& pl, passes::LayoutCost& c) const;
  /// The peak over nodes of the live bytes after each (the last
  /// evaluation's), with the ranges marked in `grows` counted 1 + `times`
  /// times.
  int64_t peakLive(int64_t times) const;
};

}  // namespace spmd::autoshard
