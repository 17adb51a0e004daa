// The placement schema's "recompute" key (passes/Recompute.h does the work).
#include "../TestCatch.h"

#include <map>

#include "ParseUtil.h"
#include "schema/PlacementSchema.h"

using namespace spmd::schema;
using spmd::schema::test::parseError;

namespace {

std::vector<RecomputeRule> rulesOf(const std::string& text) {
  return spmd::schema::test::parsedSchema(text).recompute;
}

}  // namespace

TEST_CASE("recompute: full, none and a selective save list per module glob", "[schema][parse]") {
  auto rules = rulesOf(R"js({"version": 1, "recompute": {
      "model.layers.*": "full", "model.layers.0": "none",
      "blocks.*": {"save": ["aten.mm", "aten._scaled_dot_product_*"], "comment": "Megatron-style"}}})js");
  REQUIRE(rules.size() == 3);
  std::map<std::string, RecomputeRule> byGlob;
  for (const auto& r : rules) byGlob[r.glob] = r;
  CHECK(byGlob.at("model.layers.*").mode == RecomputeMode::Full);
  CHECK(byGlob.at("model.layers.0").mode == RecomputeMode::None);
  CHECK(byGlob.at("blocks.*").mode == RecomputeMode::Selective);
  CHECK(byGlob.at("blocks.*").save == std::vector<std::string>{"aten.mm", "aten._scaled_dot_product_*"});
  CHECK(rulesOf(R"js({"version": 1, "recompute": {"h.*": "auto"}})js").at(0).mode == RecomputeMode::Auto);
  CHECK(rulesOf(R"js({"version": 1})js").empty());
}

TEST_CASE("bad schema: recompute mistakes", "[schema][bad]") {
  CHECK_THAT(parseError(R"js({"version": 1, "recompute": {"layers.*": "fulll"}})js"),
             Catch::Contains("/recompute/layers.*"));
  CHECK_THAT(parseError(R"js({"version": 1, "recompute": {"layers.*": {"saev": ["aten.mm"]}}})js"),
             Catch::Contains("did you mean 'save'"));
  CHECK_THAT(parseError(R"js({"version": 1, "recompute": ["layers.*"]})js"), Catch::Contains("/recompute"));
  CHECK_THAT(parseError(R"js({"version": 1, "recomptue": {"layers.*": "full"}})js"),
             Catch::Contains("did you mean 'recompute'"));
}
