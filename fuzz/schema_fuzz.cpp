// Fuzzes the placement schema reader: JSON text -> PlacementSchema, then its
// resolution against two real programs (rule matching, suggestions, dims,
// meshes, tp plans, presets).
//
//   build-fuzz/fuzz/schema_fuzz corpus/schema   # seeds: schemas/examples, testdata/schemas
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"

namespace {

/// The programs schemas are resolved against (read once; a missing one is skipped).
const std::vector<spmd::ir::ExportedProgram>& programs() {
  static const std::vector<spmd::ir::ExportedProgram> kPrograms = [] {
    std::vector<spmd::ir::ExportedProgram> out;
    for (const char* model : {"mlp", "gpt_block"}) {
      auto a = spmd::pt2::readArchive(std::string(SPMD_SOURCE_DIR) + "/testdata/pt2/" + model + "/model.pt2",
                                      {.loadWeights = false});
      if (a) out.push_back(std::move(a->program));
    }
    return out;
  }();
  return kPrograms;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto schema = spmd::schema::parsePlacementSchema(text, "fuzz.json");
  if (!schema) return 0;
  for (const spmd::ir::ExportedProgram& p : programs()) {
    (void)spmd::schema::resolvePlacements(*schema, p, std::nullopt);
    (void)spmd::schema::resolvePlacements(*schema, p, std::vector<int64_t>{2, 2});
  }
  return 0;
}
