// The placement schema's "sequence_parallel" key and the tp_plan style that
// asks for the same (passes/SequenceParallel.h does the work).
#include "../TestCatch.h"

#include "ParseUtil.h"
#include "schema/FromHf.h"
#include "schema/PlacementSchema.h"

using namespace spmd::schema;
using spmd::schema::test::parseError;

namespace {

std::optional<SequenceParallelRequest> requestOf(const std::string& text) {
  return spmd::schema::test::parsedSchema(text).sequenceParallel;
}

}  // namespace

TEST_CASE("sequence_parallel: an axis name, or an axis and a dim", "[schema][parse]") {
  auto byName = requestOf(R"js({"version": 1, "sequence_parallel": "tp"})js");
  REQUIRE(byName);
  CHECK(byName->axis == "tp");
  CHECK_FALSE(byName->dim);
  CHECK(byName->pointer == "/sequence_parallel");
  auto withDim = requestOf(R"js({"version": 1, "sequence_parallel": {"axis": "model", "dim": 0}})js");
  REQUIRE(withDim);
  CHECK(withDim->axis == "model");
  CHECK(withDim->dim == 0);
  CHECK_FALSE(requestOf(R"js({"version": 1})js"));
}

TEST_CASE("sequence_parallel: a tp_plan style on the plan's axis", "[schema][parse]") {
  auto r =
      requestOf(R"js({"version": 1, "tp_plan": {"layers.*.q": "colwise", "norm": "sequence_parallel"}})js");
  REQUIRE(r);
  CHECK(r->axis.empty());
  CHECK(r->pointer == "/tp_plan/norm");
  CHECK_FALSE(requestOf(R"js({"version": 1, "tp_plan": {"layers.*.q": "colwise"}})js"));
}

TEST_CASE("sequence_parallel: spmdc schema from-hf keeps a plan's sequence_parallel style",
          "[schema][parse]") {
  SchemaMesh mesh;
  mesh.shape = {2, 4};
  mesh.axes = {"dp", "model"};
  mesh.tpAxis = "model";
  auto text = explicitSchemaFromPlan({{"layers.*.q", "colwise"}, {"norm", "sequence_parallel"}}, mesh,
                                     nullptr, "plan.json");
  REQUIRE(text.hasValue());
  auto r = requestOf(*text);
  REQUIRE(r);
  CHECK(r->axis == "model");
  auto none = explicitSchemaFromPlan({{"layers.*.q", "colwise"}}, mesh, nullptr, "plan.json");
  REQUIRE(none.hasValue());
  CHECK_FALSE(requestOf(*none));
}

TEST_CASE("bad schema: sequence_parallel mistakes", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "sequence_paralel": "tp"})js") ==
        "s.json: top level: unknown key 'sequence_paralel' (did you mean 'sequence_parallel'?; allowed: "
        "$schema, "
        "comment, version, preset, mesh, tp_plan, tp_axis, rules, sequence_parallel, recompute, "
        "mixed_precision, params, inputs, outputs, pipeline, context_parallel, reshard_after_forward)");
  CHECK(parseError(R"js({"version": 1, "sequence_parallel": {"axis": "tp", "dims": 1}})js") ==
        "s.json: /sequence_parallel: unknown key 'dims' (did you mean 'dim'?; allowed: axis, dim, comment)");
  CHECK_THAT(parseError(R"js({"version": 1, "sequence_parallel": {"dim": 1}})js"),
             Catch::StartsWith("s.json: /sequence_parallel: "));
  CHECK_THAT(parseError(R"js({"version": 1, "sequence_parallel": {"axis": "tp", "dim": -1}})js"),
             Catch::StartsWith("s.json: /sequence_parallel/dim: "));
  CHECK_THAT(parseError(R"js({"version": 1, "sequence_parallel": ""})js"),
             Catch::StartsWith("s.json: /sequence_parallel: "));
}
