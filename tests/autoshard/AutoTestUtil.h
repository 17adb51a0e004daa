// Helpers of the auto-sharding tests: model paths, and the modeled cost of
// a schema compiled the way autoShard compiles it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "../TestCatch.h"
#include "autoshard/AutoShard.h"
#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

namespace spmd::testing {

inline std::string modelPath(const std::string& m) {
  return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2";
}
inline std::string examplePath(const std::string& e) {
  return std::string(SPMD_SOURCE_DIR) + "/schemas/examples/" + e;
}

/// The modeled cost of `schema` on `mesh` (nullopt when it does not
/// compile there, e.g. a batch that does not divide).
inline std::optional<passes::LayoutCost> costOf(const std::string& m, const schema::PlacementSchema& schema,
                                                const std::vector<int64_t>& mesh,
                                                const std::string& optimizer = "") {
  auto archive = pt2::readArchive(modelPath(m), {.loadWeights = false});
  REQUIRE(archive.hasValue());
  passes::CompileOptions opts;
  opts.mesh = mesh;
  opts.optimizer.kind = optimizer;
  auto r = passes::compile(*archive, schema, opts);
  if (!r) return std::nullopt;
  return passes::modelLayout(r->program, sharding::defaultDeviceProfile());
}

/// autoShard on `m` with the default profile; FAILs on error.
inline autoshard::AutoResult autoOrFail(const std::string& m, std::vector<int64_t> shape,
                                        std::vector<std::string> axes, autoshard::AutoOptions o = {}) {
  auto mesh = sharding::Mesh::create(std::move(shape), std::move(axes));
  REQUIRE(mesh.hasValue());
  o.mesh = *mesh;
  auto r = autoshard::autoShard(modelPath(m), o);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

}  // namespace spmd::testing
