// The default pass list and helpers shared by passes.
#include <algorithm>
#include <set>

#include "passes/Passes.h"

namespace spmd::passes {

std::vector<std::unique_ptr<Pass>> defaultPasses(bool async, int64_t bucketBytes) {
  std::vector<std::unique_ptr<Pass>> out;
  out.push_back(std::make_unique<DedupCollectives>());
  out.push_back(std::make_unique<DeadCodeElimination>());
  out.push_back(std::make_unique<BucketCollectives>(bucketBytes));
  if (async) out.push_back(std::make_unique<AsyncCollectives>());
  return out;
}

void syncSignatureOutputs(program::Program& program) {
  auto& outs = program.graph.signature.outputs;
  const auto& graphOuts = program.graph.graph.outputs();
  for (size_t i = 0; i < outs.size() && i < graphOuts.size(); ++i) outs[i].arg = graphOuts[i];
}

void pruneCollectiveRecords(program::Program& program) {
  std::set<std::string> alive;
  for (const auto& n : program.graph.graph.nodes()) alive.insert(n->name());
  auto& recs = program.collectives;
  recs.erase(std::remove_if(recs.begin(), recs.end(), [&](const auto& r) { return !alive.count(r.node); }),
             recs.end());
}

}  // namespace spmd::passes
