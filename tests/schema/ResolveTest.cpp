// The mesh a schema resolves to (schema::resolveMesh), with and without
// --mesh. Placement resolution against programs is tested as text:
// tests/lit/schema/ (`spmdc placements` over IR text models).
//
//   {"mesh": {"shape": [2, 4], "axes": ["dp", "tp"]}} + --mesh 4x2 -> "4x2 (dp, tp)"
#include "../TestCatch.h"

#include "schema/Resolve.h"

using namespace spmd::schema;

namespace {

PlacementSchema schemaOf(const std::string& text) {
  auto s = parsePlacementSchema(text, "s.json");
  INFO(s.status().message());
  REQUIRE(s.hasValue());
  return *s;
}

}  // namespace

TEST_CASE("mesh: --mesh supplies or overrides the shape", "[schema][mesh]") {
  PlacementSchema named = schemaOf(R"js({"version": 1, "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]}})js");
  CHECK(resolveMesh(named, std::nullopt)->str() == "2x4 (dp, tp)");
  CHECK(resolveMesh(named, std::vector<int64_t>{4, 2})->str() == "4x2 (dp, tp)");
  PlacementSchema bare = schemaOf(R"js({"version": 1})js");
  CHECK(resolveMesh(bare, std::vector<int64_t>{8})->str() == "8 (x)");
  CHECK(resolveMesh(bare, std::vector<int64_t>{2, 4})->str() == "2x4 (d0, d1)");
  PlacementSchema unnamed = schemaOf(R"js({"version": 1, "mesh": {"shape": [8]}})js");
  CHECK(resolveMesh(unnamed, std::vector<int64_t>{2, 2})->str() == "2x2 (d0, d1)");
  PlacementSchema axesOnly = schemaOf(R"js({"version": 1, "mesh": {"axes": ["dp", "tp"]}})js");
  CHECK(resolveMesh(axesOnly, std::vector<int64_t>{2, 4})->str() == "2x4 (dp, tp)");
}

TEST_CASE("bad mesh: size 0 in --mesh", "[schema][mesh][bad]") {
  // spmdc's --mesh parser refuses 0 before the schema is read; a library
  // caller gets the schema's own message.
  auto mesh = resolveMesh(schemaOf(R"js({"version": 1})js"), std::vector<int64_t>{2, 0});
  REQUIRE_FALSE(mesh.hasValue());
  CHECK(mesh.status().message() == "s.json: mesh axis 1 has size 0: every mesh axis needs size >= 1");
}
