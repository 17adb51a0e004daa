// The placement schema's "mixed_precision" key (passes/MixedPrecision.h does
// the work): dtype spellings, the float32 default, and what is refused.
#include "../TestCatch.h"

#include "ParseUtil.h"
#include "schema/PlacementSchema.h"

using namespace spmd::schema;
using spmd::schema::test::parseError;

namespace {

std::optional<MixedPrecisionRequest> policyOf(const std::string& text) {
  return spmd::schema::test::parsedSchema(text).mixedPrecision;
}

}  // namespace

TEST_CASE("mixed_precision: param_dtype, reduce_dtype float32 by default", "[schema][parse]") {
  auto p = policyOf(R"js({"version": 1, "mixed_precision": {"param_dtype": "bf16"}})js");
  REQUIRE(p);
  CHECK(p->paramDtype == "bfloat16");
  CHECK(p->reduceDtype == "float32");
  auto q = policyOf(
      R"js({"version": 1, "mixed_precision": {"param_dtype": "float16", "reduce_dtype": "bfloat16"}})js");
  REQUIRE(q);
  CHECK(q->paramDtype == "float16");
  CHECK(q->reduceDtype == "bfloat16");
  CHECK_FALSE(policyOf(R"js({"version": 1})js"));
}

TEST_CASE("mixed_precision: dtype names", "[schema][parse]") {
  CHECK(mixedPrecisionDtype("bf16") == "bfloat16");
  CHECK(mixedPrecisionDtype("fp16") == "float16");
  CHECK(mixedPrecisionDtype("fp32") == "float32");
  CHECK_FALSE(mixedPrecisionDtype("float64"));
  CHECK_FALSE(mixedPrecisionDtype("f8e4m3fn"));
}

TEST_CASE("bad schema: mixed_precision without param_dtype, or with float32 or a typo", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mixed_precision": {"reduce_dtype": "fp32"}})js")
            .find("/mixed_precision") != std::string::npos);
  CHECK(parseError(R"js({"version": 1, "mixed_precision": {"param_dtype": "float32"}})js")
            .find("/mixed_precision/param_dtype") != std::string::npos);
  std::string typo = parseError(R"js({"version": 1, "mixed_precision": {"param_dtpye": "bf16"}})js");
  CHECK(typo.find("param_dtype") != std::string::npos);
}
