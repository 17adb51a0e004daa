// Parsing placement schema files: what a good file gives, and one test per
// mistake with the exact message the user sees (after "error: ").
//
//   parsePlacementSchema(R"js({"version": 1, "params": [{"match": "fc1.*",
//                            "placements": {"tp": "S(x)"}}]})js", "s.json")
//   -> "s.json: /params/0/placements/tp: \"S(x)\" is not a placement (...)"
#include "../TestCatch.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "ParseUtil.h"
#include "schema/PlacementSchema.h"

using spmd::sharding::Placement;
using spmd::sharding::ReduceOp;
using namespace spmd::schema;
using spmd::schema::test::parseError;

TEST_CASE("a full schema parses into rules", "[schema][parse]") {
  auto s = parsePlacementSchema(R"js({
    "$schema": "../placement.schema.json",
    "comment": "2-D dp x tp",
    "version": 1,
    "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]},
    "params": [
      {"match": "layers.*.w[qkv13].weight", "placements": {"tp": "S(0)", "dp": "R"}},
      {"match": "layers.*.w[o2].weight", "placements": ["R", "S(-1)"], "optional": true,
       "comment": "row-parallel"}
    ],
    "inputs": [{"match": "tokens", "placements": {"dp": "S(0)"}}],
    "outputs": [{"match": "output.0", "placements": ["P(avg)", "P"]}]
  })js",
                                "s.json");
  REQUIRE(s.hasValue());
  CHECK(s->source == "s.json");
  CHECK(s->preset == Preset::None);
  CHECK(s->meshShape == std::vector<int64_t>{2, 4});
  CHECK(s->meshAxes == std::vector<std::string>{"dp", "tp"});
  REQUIRE(s->params.size() == 2);
  const PlacementRule& col = s->params[0];
  CHECK(col.match == "layers.*.w[qkv13].weight");
  CHECK_FALSE(col.positional);
  CHECK_FALSE(col.optional);
  CHECK(col.pointer == "/params/0");
  REQUIRE(col.byAxis.size() == 2);  // sorted by axis name
  CHECK(col.byAxis[0] == std::make_pair(std::string("dp"), Placement::replicate()));
  CHECK(col.byAxis[1] == std::make_pair(std::string("tp"), Placement::shard(0)));
  const PlacementRule& row = s->params[1];
  CHECK(row.positional);
  CHECK(row.optional);
  CHECK(row.pointer == "/params/1");
  CHECK(row.byPosition == std::vector<Placement>{Placement::replicate(), Placement::shard(-1)});
  REQUIRE(s->inputs.size() == 1);
  CHECK(s->inputs[0].pointer == "/inputs/0");
  CHECK(s->outputPolicy == OutputPolicy::Rules);
  REQUIRE(s->outputs.size() == 1);
  CHECK(s->outputs[0].pointer == "/outputs/0");
  CHECK(s->outputs[0].byPosition ==
        std::vector<Placement>{Placement::partial(ReduceOp::Avg), Placement::partial(ReduceOp::Sum)});
}

TEST_CASE("a minimal schema: no mesh, no rules, outputs replicate", "[schema][parse]") {
  auto s = parsePlacementSchema(R"js({"version": 1})js", "s.json");
  REQUIRE(s.hasValue());
  CHECK(s->meshShape.empty());
  CHECK(s->meshAxes.empty());
  CHECK(s->params.empty());
  CHECK(s->inputs.empty());
  CHECK(s->outputPolicy == OutputPolicy::Replicate);
}

TEST_CASE("outputs may be \"any\" or \"replicate\"", "[schema][parse]") {
  CHECK(parsePlacementSchema(R"js({"version": 1, "outputs": "any"})js", "s.json")->outputPolicy ==
        OutputPolicy::Any);
  CHECK(parsePlacementSchema(R"js({"version": 1, "outputs": "replicate"})js", "s.json")->outputPolicy ==
        OutputPolicy::Replicate);
}

TEST_CASE("a mesh may name its axes and leave the shape to --mesh", "[schema][parse]") {
  auto s = parsePlacementSchema(R"js({"version": 1, "mesh": {"axes": ["dp", "tp"]}})js", "s.json");
  REQUIRE(s.hasValue());
  CHECK(s->meshShape.empty());
  CHECK(s->meshAxes == std::vector<std::string>{"dp", "tp"});
}

TEST_CASE("the built-in JSON Schema is schemas/placement.schema.json", "[schema][parse]") {
  std::ifstream in(std::string(SPMD_SOURCE_DIR) + "/schemas/placement.schema.json");
  std::stringstream text;
  text << in.rdbuf();
  CHECK(placementJsonSchema() == text.str());
}

TEST_CASE("presets", "[schema][parse]") {
  CHECK(presetSchema("dp")->preset == Preset::DataParallel);
  CHECK(presetSchema("dp")->source == "preset 'dp'");
  CHECK(presetSchema("fsdp")->preset == Preset::Fsdp);
  CHECK(presetNames() == std::vector<std::string_view>{"dp", "ddp", "fsdp", "hsdp"});
  CHECK(presetSchema("tp").status().message() ==
        "unknown placement preset 'tp' (presets: dp, ddp, fsdp, hsdp; or give a schema file)");
}

TEST_CASE("loadSchemaOrPreset: preset names, else files", "[schema][parse]") {
  CHECK(loadSchemaOrPreset("fsdp")->preset == Preset::Fsdp);
  std::string path = std::string(SPMD_SOURCE_DIR) + "/schemas/examples/mlp_tp.json";
  auto s = loadSchemaOrPreset(path);
  REQUIRE(s.hasValue());
  CHECK(s->source == path);
  CHECK(s->preset == Preset::None);
  CHECK(loadSchemaOrPreset("tp.json").status().message() ==
        "tp.json: cannot read the placement schema: No such file or directory");
}

TEST_CASE("loadSchemaOrPreset: an unknown preset name lists the presets", "[schema][parse][bad]") {
  // A bare word that names no file was meant as a preset: the message says
  // which exist (and the names the tool itself takes, as compile's auto).
  CHECK(loadSchemaOrPreset("fsdp2").status().message() ==
        "--schema fsdp2: no such preset or schema file (presets: dp, ddp, fsdp, hsdp; or give a placement "
        "schema file)");
  CHECK(loadSchemaOrPreset("megatron", {"auto"}).status().message() ==
        "--schema megatron: no such preset or schema file (presets: dp, ddp, fsdp, hsdp, auto; or give a "
        "placement schema file)");
  // Paths stay file errors.
  CHECK(loadSchemaOrPreset("schemas/tp").status().message() ==
        "schemas/tp: cannot read the placement schema: No such file or directory");
}

TEST_CASE("loadPlacementSchema reads a file and names it", "[schema][parse]") {
  std::string path = std::string(SPMD_BINARY_DIR) + "/schema_test_load.json";
  std::ofstream(path)
      << R"js({"version": 1, "params": [{"match": "fc1.*", "placements": {"tp": "S(x)"}}]})js";
  CHECK(
      loadPlacementSchema(path).status().message() ==
      path +
          ": /params/0/placements/tp: \"S(x)\" is not a placement (expected R, S(d), P, P(sum|avg|max|min))");
}

TEST_CASE("bad schema: file missing", "[schema][bad]") {
  CHECK(loadPlacementSchema("/nonexistent/s.json").status().message() ==
        "/nonexistent/s.json: cannot read the placement schema: No such file or directory");
}

TEST_CASE("bad schema: not JSON gives line and column", "[schema][bad]") {
  CHECK(parseError("{\n  \"version\": 1,\n  params: []\n}") ==
        "s.json:3:3: invalid JSON: syntax error while parsing object key - invalid literal; "
        "expected string literal");
}

TEST_CASE("bad schema: unterminated object", "[schema][bad]") {
  CHECK(parseError("{\"version\": 1,\n \"params\": [\n") ==
        "s.json:3:1: invalid JSON: syntax error while parsing value - unexpected end of input; expected '[', "
        "'{', or a literal");
}

TEST_CASE("bad schema: text after the object", "[schema][bad]") {
  CHECK(
      parseError("{\"version\": 1} x") ==
      "s.json:1:16: invalid JSON: syntax error while parsing value - invalid literal; expected end of input");
}

TEST_CASE("bad schema: empty file", "[schema][bad]") {
  CHECK(parseError("") ==
        "s.json:1:1: invalid JSON: syntax error while parsing value - unexpected end of input; expected "
        "'[', '{', or a literal");
}

TEST_CASE("bad schema: not an object", "[schema][bad]") {
  CHECK(parseError("[1]") == "s.json: top level: expected an object {\"version\": 1, ...}, got array");
}

TEST_CASE("bad schema: version missing", "[schema][bad]") {
  CHECK(parseError(R"js({"params": []})js") == "s.json: top level: Missing required property 'version'");
}

TEST_CASE("bad schema: version 2", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 2})js") ==
        "s.json: /version: version 2 is not supported (this spmdc reads version 1)");
}

TEST_CASE("bad schema: misspelt top-level key", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "param": []})js") ==
        "s.json: top level: unknown key 'param' (did you mean 'params'?; allowed: $schema, comment, "
        "version, preset, mesh, tp_plan, tp_axis, rules, sequence_parallel, recompute, mixed_precision, "
        "params, inputs, outputs, pipeline, context_parallel, reshard_after_forward)");
}

TEST_CASE("bad schema: misspelt rule key", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"mathc": "fc1.*", "placements": {"x": "S(0)"}}]})js") ==
        "s.json: /params/0: unknown key 'mathc' (did you mean 'match'?; allowed: match, placements, "
        "optional, comment)");
}

TEST_CASE("bad schema: misspelt mesh key", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [8], "axis": ["tp"]}})js") ==
        "s.json: /mesh: unknown key 'axis' (did you mean 'axes'?; allowed: shape, axes)");
}

TEST_CASE("bad schema: placement string in an object", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "a", "placements": {"x": "R"}},
                      {"match": "fc1.*", "placements": {"tp": "S(x)"}}]})js") ==
        "s.json: /params/1/placements/tp: \"S(x)\" is not a placement (expected R, S(d), P, "
        "P(sum|avg|max|min))");
}

TEST_CASE("bad schema: placement string in a list", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "inputs": [{"match": "x", "placements": ["R", "Shard(0)"]}]})js") ==
        "s.json: /inputs/0/placements/1: \"Shard(0)\" is not a placement (expected R, S(d), P, "
        "P(sum|avg|max|min))");
}

TEST_CASE("bad schema: unknown reduction", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "outputs": [{"match": "loss", "placements": ["P(mean)"]}]})js") ==
        "s.json: /outputs/0/placements/0: \"P(mean)\" is not a placement (expected R, S(d), P, "
        "P(sum|avg|max|min))");
}

TEST_CASE("bad schema: placement not a string", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "w", "placements": {"x": 0}}]})js") ==
        "s.json: /params/0/placements/x: expected a placement string (R, S(d), P, P(sum|avg|max|min)), "
        "got number");
}

TEST_CASE("bad schema: placements neither object nor list", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "w", "placements": "S(0)"}]})js") ==
        "s.json: /params/0/placements: expected an object {axis: placement} or a list of placements, "
        "got string");
}

TEST_CASE("bad schema: empty placement list", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "w", "placements": []}]})js") ==
        "s.json: /params/0/placements: Array should contain no fewer than 1 elements");
}

TEST_CASE("bad schema: rule without placements", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "w"}]})js") ==
        "s.json: /params/0: Missing required property 'placements'");
}

TEST_CASE("bad schema: empty match", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "", "placements": ["R"]}]})js") ==
        "s.json: /params/0/match: String should be no fewer than 1 characters in length");
}

TEST_CASE("bad schema: optional not a boolean", "[schema][bad]") {
  CHECK(parseError(
            R"js({"version": 1, "params": [{"match": "w", "placements": ["R"], "optional": "yes"}]})js") ==
        "s.json: /params/0/optional: expected true or false, got string");
}

TEST_CASE("bad schema: params not a list", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "params": {"match": "w", "placements": ["R"]}})js") ==
        "s.json: /params: expected a list of rules, got object");
}

TEST_CASE("bad schema: unknown output policy", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "outputs": "replicat"})js") ==
        "s.json: /outputs: \"replicat\" is not an output policy (expected \"replicate\", \"any\" or a "
        "list of rules)");
}

TEST_CASE("bad schema: mesh size 0", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [2, 0]}})js") ==
        "s.json: /mesh/shape/1: expected an integer >= 1, got 0");
}

TEST_CASE("bad schema: mesh size not an integer", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [2.5]}})js") ==
        "s.json: /mesh/shape/0: expected an integer >= 1, got 2.5");
}

TEST_CASE("bad schema: empty mesh", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {}})js") ==
        "s.json: /mesh: Object should have no fewer than 1 properties");
}

TEST_CASE("bad schema: repeated axis names", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [2, 2], "axes": ["tp", "tp"]}})js") ==
        "s.json: /mesh/axes: Elements at indexes #0 and #1 violate uniqueness constraint");
}

TEST_CASE("bad schema: mesh shape and axes of different lengths", "[schema][bad]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [8], "axes": ["dp", "tp"]}})js") ==
        "s.json: /mesh: shape has 1 axes but axes names 2; give one name per mesh axis");
}

TEST_CASE("bad schema: a 100,000-character placement is refused, quoted short", "[schema][bad][limits]") {
  std::string huge = "S(" + std::string(100'000, '1') + ")";
  std::string message =
      parseError(R"js({"version": 1, "params": [{"match": "w", "placements": {"tp": ")js" + huge + "\"}}]}");
  CHECK(message ==
        "s.json: /params/0/placements/tp: \"S(" + std::string(77, '1') +
            "... (100,005 characters) is not a placement (expected R, S(d), P, P(sum|avg|max|min))");
}

TEST_CASE("bad schema: leading zeros and absurd integers are not placements", "[schema][bad][limits]") {
  auto placementError = [](const std::string& text) {
    return parseError(R"js({"version": 1, "inputs": [{"match": "x", "placements": [")js" + text + "\"]}]}");
  };
  std::string zeros = "S(" + std::string(10'000, '0') + ")";
  CHECK(placementError(zeros) == "s.json: /inputs/0/placements/0: \"S(" + std::string(77, '0') +
                                     "... (10,005 characters) is not a placement (expected R, S(d), P, "
                                     "P(sum|avg|max|min))");
  for (const char* bad : {"S(00)", "S(-01)", "S(12345)", "S(0,sf=0)", "S(0,sf=01)", "S(0,sf=1234567)", "S()",
                          "S(-)", "S(0,)", "S(0,sf=)", "S(0,  sf=2)", "P()", "R()"})
    CHECK(placementError(bad) == "s.json: /inputs/0/placements/0: \"" + std::string(bad) +
                                     "\" is not a placement (expected R, S(d), P, P(sum|avg|max|min))");
  auto s = parsePlacementSchema(
      R"js({"version": 1, "inputs": [{"match": "x", "placements": ["S(0)", "S(-10)", "S(9999)", "S(1, sf=3)",
                                                                     "S(0,sf=999999)", "P(max)"]}]})js",
      "s.json");
  REQUIRE(s.hasValue());
  CHECK(s->inputs[0].byPosition ==
        std::vector<Placement>{Placement::shard(0), Placement::shard(-10), Placement::shard(9999),
                               Placement::stridedShard(1, 3), Placement::stridedShard(0, 999999),
                               Placement::partial(ReduceOp::Max)});
}

TEST_CASE("bad schema: mesh.shape nested 100,000 deep", "[schema][bad][limits]") {
  std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  // '{' of the document and of "mesh" are levels 1 and 2: the 63rd '[' is level 65.
  std::string head = R"js({"version": 1, "mesh": {"shape": )js";
  CHECK(parseError(head + deep + "}}") == "s.json:1:" + std::to_string(head.size() + 63) +
                                              ": JSON nested more than 64 levels deep; a placement schema "
                                              "needs at most 4");
}

TEST_CASE("bad schema: a deep but allowed value is quoted short", "[schema][bad][limits]") {
  std::string value = std::string(60, '[') + std::string(60, ']');
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [)js" + value + "]}}") ==
        "s.json: /mesh/shape/0: expected an integer >= 1, got " + value.substr(0, 80) +
            "... (120 characters)");
}

TEST_CASE("bad schema: a 10 MB match glob is refused at once", "[schema][bad][limits]") {
  std::string glob;
  for (int i = 0; i < 5'000'000; ++i) glob += "*a";
  auto start = std::chrono::steady_clock::now();
  std::string message =
      parseError(R"js({"version": 1, "params": [{"match": ")js" + glob + R"js(", "placements": ["R"]}]})js");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(message == "s.json: /params/0/match: the glob \"" + glob.substr(0, 79) +
                       "... (10,000,002 characters) has 10,000,000 characters; at most 4096 are allowed");
  CHECK(parsePlacementSchema(R"js({"version": 1, "params": [{"match": ")js" + glob.substr(0, 4096) +
                                 R"js(", "placements": ["R"]}]})js",
                             "s.json")
            .hasValue());
}

TEST_CASE("bad schema: a mesh beyond 2^20 ranks or 16 axes", "[schema][bad][limits]") {
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [1024, 1024, 2]}})js") ==
        "s.json: /mesh/shape: the mesh [1024,1024,2] has more than 1,048,576 ranks");
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [18446744073709551615]}})js") ==
        "s.json: /mesh/shape/0: expected an integer >= 1, got 18446744073709551615");
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [9223372036854775807]}})js") ==
        "s.json: /mesh/shape: the mesh [9223372036854775807] has more than 1,048,576 ranks");
  CHECK(parseError(R"js({"version": 1, "mesh": {"shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}})js") ==
        "s.json: /mesh/shape: the mesh has 17 axes; at most 16 are allowed");
}

TEST_CASE("bad schema: a huge axis name is quoted short in the pointer", "[schema][bad][limits]") {
  std::string axis(10'000, 'x');
  CHECK(parseError(R"js({"version": 1, "params": [{"match": "w", "placements": {")js" + axis +
                   R"js(": "S(x)"}}]})js") == "s.json: /params/0/placements/" + std::string(179, 'x') +
                                                  "... (10,021 characters): \"S(x)\" is not a placement "
                                                  "(expected R, S(d), P, P(sum|avg|max|min))");
}
