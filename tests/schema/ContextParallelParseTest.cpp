// The placement schema's "context_parallel" key (passes/ContextParallel.h
// does the work).
#include "../TestCatch.h"

#include "ParseUtil.h"
#include "schema/PlacementSchema.h"

using namespace spmd::schema;
using spmd::schema::test::parseError;

namespace {

std::optional<ContextParallelRequest> requestOf(const std::string& text) {
  return spmd::schema::test::parsedSchema(text).contextParallel;
}

}  // namespace

TEST_CASE("context_parallel: an axis name, or an object with one", "[schema][parse]") {
  auto byName = requestOf(R"js({"version": 1, "context_parallel": "cp"})js");
  REQUIRE(byName);
  CHECK(byName->axis == "cp");
  CHECK(byName->pointer == "/context_parallel");
  auto byObject = requestOf(R"js({"version": 1, "context_parallel": {"axis": "seq", "comment": "x"}})js");
  REQUIRE(byObject);
  CHECK(byObject->axis == "seq");
  CHECK_FALSE(requestOf(R"js({"version": 1})js"));
}

TEST_CASE("context_parallel: rotate is allgather unless ring or auto is asked for", "[schema][parse]") {
  CHECK(requestOf(R"js({"version": 1, "context_parallel": "cp"})js")->rotate == "allgather");
  CHECK(requestOf(R"js({"version": 1, "context_parallel": {"axis": "cp"}})js")->rotate == "allgather");
  CHECK(requestOf(R"js({"version": 1, "context_parallel": {"axis": "cp", "rotate": "ring"}})js")->rotate ==
        "ring");
  CHECK(requestOf(R"js({"version": 1, "context_parallel": {"axis": "cp", "rotate": "auto"}})js")->rotate ==
        "auto");
}

TEST_CASE("context_parallel: load_balance is unset (the pass decides) unless given", "[schema][parse]") {
  CHECK_FALSE(requestOf(R"js({"version": 1, "context_parallel": "cp"})js")->loadBalance);
  CHECK_FALSE(
      requestOf(R"js({"version": 1, "context_parallel": {"axis": "cp", "rotate": "ring"}})js")->loadBalance);
  auto on = requestOf(R"js({"version": 1, "context_parallel": {"axis": "cp", "load_balance": true}})js");
  REQUIRE(on->loadBalance);
  CHECK(*on->loadBalance);
  auto off = requestOf(R"js({"version": 1, "context_parallel": {"axis": "cp", "load_balance": false}})js");
  REQUIRE(off->loadBalance);
  CHECK_FALSE(*off->loadBalance);
}

TEST_CASE("bad schema: context_parallel mistakes", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "context_parallel": {"axis": "cp", "balance": true}})js") ==
        "s.json: /context_parallel: unknown key 'balance' (allowed: axis, rotate, load_balance, comment)");
  CHECK_THAT(parseError(R"js({"version": 1, "context_parallel": {"axis": "cp", "load_balance": "yes"}})js"),
             Catch::StartsWith("s.json: /context_parallel/load_balance: "));
  CHECK_THAT(parseError(R"js({"version": 1, "context_parallel": {"axis": "cp", "rotate": "spiral"}})js"),
             Catch::StartsWith("s.json: /context_parallel/rotate: "));
  CHECK_THAT(parseError(R"js({"version": 1, "context_parallel": {}})js"),
             Catch::StartsWith("s.json: /context_parallel: "));
  CHECK_THAT(parseError(R"js({"version": 1, "context_parallel": ""})js"),
             Catch::StartsWith("s.json: /context_parallel: "));
}
