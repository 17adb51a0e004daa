// spmdc schema from-hf's mesh: axis names left out are chosen (the last is
// the tp axis, the others split the batch), so a 2-D plan works without
// --axes; a named mesh without the tp axis is refused naming the flags.
#include <nlohmann/json.hpp>

#include "../TestCatch.h"
#include "schema/FromHf.h"

using namespace spmd::schema;

namespace {

// The "mesh" axes of the schema written for `mesh` (no model).
std::vector<std::string> writtenAxes(const SchemaMesh& mesh) {
  auto text = explicitSchemaFromPlan({{"layers.*.q", "colwise"}}, mesh, nullptr, "plan.json");
  INFO(text.status().message());
  REQUIRE(text.hasValue());
  return nlohmann::json::parse(*text)["mesh"]["axes"].get<std::vector<std::string>>();
}

}  // namespace

TEST_CASE("from-hf: a mesh without axis names gets tp last and batch axes before it", "[schema][fromhf]") {
  SchemaMesh mesh;
  mesh.shape = {4};
  CHECK(writtenAxes(mesh) == std::vector<std::string>{"tp"});
  mesh.shape = {2, 2};
  CHECK(writtenAxes(mesh) == std::vector<std::string>{"dp", "tp"});
  mesh.shape = {2, 2, 2};
  CHECK(writtenAxes(mesh) == std::vector<std::string>{"dp0", "dp1", "tp"});
  mesh.shape = {2, 4};
  mesh.tpAxis = "model";
  CHECK(writtenAxes(mesh) == std::vector<std::string>{"dp", "model"});
  // The batch splits over the non-tp axis.
  auto text = explicitSchemaFromPlan({{"layers.*.q", "colwise"}}, mesh, nullptr, "plan.json");
  REQUIRE(text.hasValue());
  auto inputs = nlohmann::json::parse(*text)["inputs"];
  REQUIRE(inputs.size() == 1);
  CHECK(inputs[0]["placements"] == nlohmann::json{{"dp", "S(0)"}});
}

TEST_CASE("from-hf: named axes without the tp axis name the flags to pass", "[schema][fromhf][bad]") {
  SchemaMesh mesh;
  mesh.shape = {2, 2};
  mesh.axes = {"data", "model"};
  auto text = explicitSchemaFromPlan({{"layers.*.q", "colwise"}}, mesh, nullptr, "plan.json");
  CHECK(text.status().message() ==
        "plan.json: the mesh 2x2 (data, model) has no axis 'tp': name the tp axis with --tp-axis, or leave "
        "out --axes (dp,tp)");
  mesh.tpAxis = "model";
  CHECK(writtenAxes(mesh) == std::vector<std::string>{"data", "model"});
}
