// Resolving placement schemas against hand-built programs: the specs each
// input and output gets, the mesh, the presets, and one test per mistake.
//
//   mlp + {"fc1.*": {"x": "S(0)"}, "fc2.weight": {"x": "S(1)"}} on mesh 4
//   -> fc1.weight [S(0)], fc1.bias [S(0)], fc2.weight [S(1)], fc2.bias [R], x [R]
#include "../TestCatch.h"

#include "TestPrograms.h"
#include "schema/Resolve.h"

using spmd::sharding::Placement;
using spmd::sharding::ReduceOp;
using spmd::sharding::ShardingSpec;
using namespace spmd::schema;
using spmd::schema::testing::mlpProgram;
using spmd::schema::testing::mlpTrainProgram;
using spmd::schema::testing::ProgramBuilder;
namespace ir = spmd::ir;

namespace {

const Placement kR = Placement::replicate();
Placement S(int64_t d) { return Placement::shard(d); }
ShardingSpec spec(std::vector<Placement> p) { return ShardingSpec{std::move(p)}; }

PlacementSchema schemaOf(const std::string& text) {
  auto s = parsePlacementSchema(text, "s.json");
  INFO(s.status().message());
  REQUIRE(s.hasValue());
  return *s;
}

/// Resolves `text` against `p`; fails the test on error.
ResolvedPlacements resolved(const std::string& text, const ir::ExportedProgram& p,
                            std::optional<std::vector<int64_t>> mesh = std::nullopt) {
  auto r = resolvePlacements(schemaOf(text), p, mesh);
  INFO(r.status().message());
  REQUIRE(r.hasValue());
  return *r;
}

/// The error of resolving `text` against `p`; fails the test if it resolves.
std::string resolveError(const std::string& text, const ir::ExportedProgram& p,
                         std::optional<std::vector<int64_t>> mesh = std::nullopt) {
  auto r = resolvePlacements(schemaOf(text), p, mesh);
  REQUIRE_FALSE(r.hasValue());
  return r.status().message();
}

const std::string kMegatronMlp = R"js({"version": 1, "mesh": {"shape": [4]},
  "params": [{"match": "fc1.*", "placements": {"x": "S(0)"}},
             {"match": "fc2.weight", "placements": ["S(-1)"]}]})js";

}  // namespace

TEST_CASE("Megatron mlp: colwise fc1, rowwise fc2, the rest replicated", "[schema][resolve]") {
  ResolvedPlacements r = resolved(kMegatronMlp, mlpProgram());
  CHECK(r.mesh.str() == "4 (x)");
  REQUIRE(r.inputs.size() == 5);
  CHECK(r.inputs[0] == spec({S(0)}));  // fc1.weight
  CHECK(r.inputs[1] == spec({S(0)}));  // fc1.bias
  CHECK(r.inputs[2] == spec({S(1)}));  // fc2.weight: S(-1) normalized
  CHECK(r.inputs[3] == spec({kR}));    // fc2.bias: unmatched
  CHECK(r.inputs[4] == spec({kR}));    // x: unmatched
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0] == spec({kR}));
  CHECK(r.notes.empty());
}

TEST_CASE("the first matching rule wins", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]}, "params": [
      {"match": "fc1.weight", "placements": ["S(1)"]},
      {"match": "fc1.*", "placements": ["S(0)"]}]})js",
                                  mlpProgram());
  CHECK(r.inputs[0] == spec({S(1)}));
  CHECK(r.inputs[1] == spec({S(0)}));
}

TEST_CASE("user inputs match by name or by input.<i>", "[schema][resolve]") {
  ir::ExportedProgram p = mlpTrainProgram();
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]},
      "inputs": [{"match": "x", "placements": {"dp": "S(0)"}},
                 {"match": "input.1", "placements": {"tp": "S(1)"}}]})js",
                                  p);
  CHECK(r.inputs[4] == spec({S(0), kR}));
  CHECK(r.inputs[5] == spec({kR, S(1)}));
}

TEST_CASE("axes a placement object leaves out are R; shards may nest", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]},
      "params": [{"match": "fc1.weight", "placements": {"tp": "S(0)"}},
                 {"match": "fc1.bias", "placements": {"dp": "S(0)", "tp": "S(0)"}}]})js",
                                  mlpProgram());
  CHECK(r.inputs[0] == spec({kR, S(0)}));
  CHECK(r.inputs[1] == spec({S(0), S(0)}));
}

TEST_CASE("Partial placements are allowed on inputs", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [2]},
      "inputs": [{"match": "x", "placements": ["P(max)"]}]})js",
                                  mlpProgram());
  CHECK(r.inputs[4] == spec({Placement::partial(ReduceOp::Max)}));
}

TEST_CASE("an optional rule may match nothing", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [2]},
      "params": [{"match": "encoder.*", "placements": ["S(0)"], "optional": true}]})js",
                                  mlpProgram());
  CHECK(r.inputs[0] == spec({kR}));
}

TEST_CASE("tensor constants and buffers match params rules", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]},
      "params": [{"match": "lifted_tensor_*", "placements": ["S(0)"]},
                 {"match": "bn.*", "placements": ["S(0)"]}]})js",
                                  spmd::schema::testing::bufferProgram());
  CHECK(r.inputs[0] == spec({S(0)}));
  CHECK(r.inputs[1] == spec({S(0)}));
  CHECK(r.inputs[2] == spec({S(0)}));
  CHECK(r.inputs[3] == spec({kR}));
}

TEST_CASE("outputs replicate: gradients follow their parameters", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]},
      "params": [{"match": "mlp.fc1.*", "placements": ["S(0)"]},
                 {"match": "mlp.fc2.weight", "placements": ["S(1)"]}],
      "inputs": [{"match": "*", "placements": ["S(0)"]}]})js",
                                  mlpTrainProgram());
  REQUIRE(r.outputs.size() == 5);
  CHECK(r.outputs[0] == spec({kR}));    // loss
  CHECK(r.outputs[1] == spec({S(0)}));  // grad.mlp.fc1.weight
  CHECK(r.outputs[2] == spec({S(0)}));  // grad.mlp.fc1.bias
  CHECK(r.outputs[3] == spec({S(1)}));  // grad.mlp.fc2.weight
  CHECK(r.outputs[4] == spec({kR}));    // grad.mlp.fc2.bias
}

TEST_CASE("outputs any: user outputs keep propagation's choice, gradients follow", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]}, "outputs": "any",
      "params": [{"match": "mlp.fc1.weight", "placements": ["S(0)"]}]})js",
                                  mlpTrainProgram());
  CHECK_FALSE(r.outputs[0].has_value());
  CHECK(r.outputs[1] == spec({S(0)}));
  CHECK(r.outputs[2] == spec({kR}));
}

TEST_CASE("output rules override; unmatched outputs as replicate", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]},
      "params": [{"match": "mlp.fc1.*", "placements": ["S(0)"]}],
      "outputs": [{"match": "loss", "placements": ["P(avg)"]},
                  {"match": "grad.mlp.fc1.weight", "placements": ["S(-1)"]}]})js",
                                  mlpTrainProgram());
  CHECK(r.outputs[0] == spec({Placement::partial(ReduceOp::Avg)}));
  CHECK(r.outputs[1] == spec({S(1)}));  // the rule beats following the parameter
  CHECK(r.outputs[2] == spec({S(0)}));  // follows mlp.fc1.bias
  CHECK(r.outputs[3] == spec({kR}));
}

TEST_CASE("user outputs are output.<i>", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]},
      "outputs": [{"match": "output.0", "placements": ["S(0)"]}]})js",
                                  mlpProgram());
  CHECK(r.outputs[0] == spec({S(0)}));
}

TEST_CASE("buffer mutations follow their buffer", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]}, "outputs": "any",
      "params": [{"match": "bn.*", "placements": ["S(0)"]}]})js",
                                  spmd::schema::testing::bufferProgram());
  CHECK(r.outputs[0] == spec({S(0)}));  // buffer.bn.running_mean
  CHECK_FALSE(r.outputs[1].has_value());
  CHECK(r.outputs[2] == spec({S(0)}));  // grad.bn.weight
}

TEST_CASE("outputNames names every output kind", "[schema][resolve]") {
  ProgramBuilder b;
  b.input(ir::InputKind::UserInput, "x", {4});
  b.output(ir::OutputKind::UserOutput, "a", {4});
  b.output(ir::OutputKind::LossOutput, "b", {});
  b.output(ir::OutputKind::UserOutput, "c", {4});
  b.output(ir::OutputKind::GradientToParameter, "d", {4}, "w");
  b.output(ir::OutputKind::BufferMutation, "e", {4}, "m");
  b.output(ir::OutputKind::GradientToUserInput, "f", {4}, "x");
  b.output(ir::OutputKind::UserInputMutation, "g", {4}, "x");
  b.output(ir::OutputKind::ParameterMutation, "h", {4}, "w");
  b.output(ir::OutputKind::Token, "i", {});
  b.output(ir::OutputKind::LossOutput, "j", {});
  CHECK(outputNames(b.take()) == std::vector<std::string>{"output.0", "loss", "output.1", "grad.w",
                                                          "buffer.m", "grad_input.x", "input_mutation.x",
                                                          "param_mutation.w", "token.0", "loss.1"});
}

TEST_CASE("input mutations and input gradients follow their user input", "[schema][resolve]") {
  ProgramBuilder b;
  b.input(ir::InputKind::UserInput, "x", {8, 4});
  b.output(ir::OutputKind::UserInputMutation, "x_new", {8, 4}, "x");
  b.output(ir::OutputKind::GradientToUserInput, "x_grad", {8, 4}, "x");
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]},
      "inputs": [{"match": "x", "placements": ["S(0)"]}]})js",
                                  b.take());
  CHECK(r.outputs[0] == spec({S(0)}));
  CHECK(r.outputs[1] == spec({S(0)}));
}

TEST_CASE("symbolic sizes: the trace-time size decides an even or a torch.chunk split, with a note",
          "[schema][resolve][uneven]") {
  ProgramBuilder b;
  auto s77 = ir::parseSymExpr("Symbol('s77', positive=True, integer=True)", 32);
  REQUIRE(s77.hasValue());
  b.input(ir::InputKind::UserInput, "x", {*s77, 64});
  ir::ExportedProgram p = b.take();
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [4]},
      "inputs": [{"match": "x", "placements": ["S(0)"]}]})js",
                                  p);
  CHECK(r.inputs[0] == spec({S(0)}));
  CHECK(r.notes == std::vector<std::string>{"s.json: /inputs/0: rule 'x': input 'x': dim 0 is symbolic "
                                            "(s77); its trace-time size 32 divides by 4: at run time it "
                                            "must divide by 4 too"});
  ResolvedPlacements three = resolved(R"js({"version": 1, "mesh": {"shape": [3]},
      "inputs": [{"match": "x", "placements": ["S(0)"]}]})js",
                                      p);
  CHECK(three.inputs[0] == spec({S(0)}));
  CHECK(three.notes == std::vector<std::string>{"s.json: /inputs/0: rule 'x': input 'x': dim 0 is symbolic "
                                                "(s77); its trace-time size 32 does not divide by 3: split "
                                                "unevenly as torch.chunk does, each rank's size computed "
                                                "from the symbol at run time"});
  // Strided shards must still divide.
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [3]},
      "inputs": [{"match": "x", "placements": ["S(0, sf=2)"]}]})js",
                     p)
            .find("does not divide evenly over mesh axis 'x' of size 3") != std::string::npos);
}

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

TEST_CASE("bad mesh: none at all", "[schema][mesh][bad]") {
  CHECK(resolveError(R"js({"version": 1})js", mlpProgram()) ==
        "s.json: no mesh: give \"mesh\": {\"shape\": [...]} in the schema, or --mesh (e.g. --mesh 8 or "
        "--mesh 2x4)");
  CHECK(resolveError(R"js({"version": 1, "mesh": {"axes": ["tp"]}})js", mlpProgram()) ==
        "s.json: no mesh: give \"mesh\": {\"shape\": [...]} in the schema, or --mesh (e.g. --mesh 8 or "
        "--mesh 2x4)");
}

TEST_CASE("bad mesh: --mesh of another rank than the named axes", "[schema][mesh][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]}})js", mlpProgram(),
                     std::vector<int64_t>{8}) ==
        "s.json: /mesh/axes: --mesh 8 has 1 axes but the schema names 2 (dp, tp); give a 2-axis --mesh such "
        "as 2x2, or drop the axis names");
}

TEST_CASE("bad mesh: size 0 in --mesh", "[schema][mesh][bad]") {
  CHECK(resolveError(R"js({"version": 1})js", mlpProgram(), std::vector<int64_t>{2, 0}) ==
        "s.json: mesh axis 1 has size 0: every mesh axis needs size >= 1");
}

TEST_CASE("bad rule: matches no parameter, with a suggestion", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "params": [
      {"match": "fc1.*", "placements": ["S(0)"]},
      {"match": "fc2.weight", "placements": ["S(1)"]},
      {"match": "fc*.weigth", "placements": ["S(0)"]}]})js",
                     mlpProgram()) ==
        "s.json: /params/2: rule 'fc*.weigth' matches no parameter or buffer (did you mean "
        "'fc*.weight'?; add \"optional\": true to allow)");
}

TEST_CASE("bad rule: matches no parameter, nothing close", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "params": [
      {"match": "encoder.layers.*.attention.q_proj.weight", "placements": ["S(0)"]}]})js",
                     mlpProgram()) ==
        "s.json: /params/0: rule 'encoder.layers.*.attention.q_proj.weight' matches no parameter or buffer "
        "(add \"optional\": true to allow)");
}

TEST_CASE("bad rule: FQNs are matched, not graph input names", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "params": [
      {"match": "p_fc1_weight", "placements": ["S(0)"]}]})js",
                     mlpProgram()) ==
        "s.json: /params/0: rule 'p_fc1_weight' matches no parameter or buffer (did you mean 'fc1.weight'?; "
        "add \"optional\": true to allow)");
}

TEST_CASE("bad rule: matches no user input", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "inputs": [
      {"match": "tagret", "placements": ["S(0)"]}]})js",
                     mlpTrainProgram()) ==
        "s.json: /inputs/0: rule 'tagret' matches no user input (did you mean 'target'?; add \"optional\": "
        "true to allow)");
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "inputs": [
      {"match": "tokens", "placements": ["S(0)"]}]})js",
                     mlpTrainProgram()) ==
        "s.json: /inputs/0: rule 'tokens' matches no user input (add \"optional\": true to allow)");
}

TEST_CASE("bad rule: matches no output", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "outputs": [
      {"match": "output.1", "placements": ["S(0)"]}]})js",
                     mlpProgram()) ==
        "s.json: /outputs/0: rule 'output.1' matches no output (did you mean 'output.0'?; add \"optional\": "
        "true to allow)");
}

TEST_CASE("bad rule: unknown mesh axis", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]}, "params": [
      {"match": "fc1.*", "placements": {"tpp": "S(0)"}}]})js",
                     mlpProgram()) ==
        "s.json: /params/0/placements/tpp: unknown mesh axis 'tpp' (did you mean 'tp'?; mesh axes: dp, tp)");
}

TEST_CASE("bad rule: axis name of a 2-D mesh without names", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2, 4]}, "params": [
      {"match": "fc1.*", "placements": {"x": "S(0)"}}]})js",
                     mlpProgram()) ==
        "s.json: /params/0/placements/x: unknown mesh axis 'x' (mesh axes: d0, d1)");
}

TEST_CASE("bad rule: placement list of the wrong length", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]}, "params": [
      {"match": "fc1.*", "placements": ["S(0)"]}]})js",
                     mlpProgram()) ==
        "s.json: /params/0/placements: 1 placement given for the 2-axis mesh 2x4 (dp, tp); give one per mesh "
        "axis, or an object keyed by axis name");
}

TEST_CASE("bad rule: shard dim out of range", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "params": [
      {"match": "fc1.*", "placements": ["S(1)"]}]})js",
                     mlpProgram()) ==
        "s.json: /params/0: rule 'fc1.*' shards dim 1 of parameter 'fc1.bias' f32[256] on mesh axis 'x', "
        "which has rank 1; use a dim in [-1, 0] or narrow the match");
}

TEST_CASE("bad rule: negative shard dim out of range", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "inputs": [
      {"match": "x", "placements": ["S(-3)"]}]})js",
                     mlpProgram()) ==
        "s.json: /inputs/0: rule 'x' shards dim -3 of input 'x' f32[32, 64] on mesh axis 'x', which has "
        "rank 2; use a dim in [-2, 1] or narrow the match");
}

TEST_CASE("bad rule: sharding a scalar", "[schema][resolve][bad]") {
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [4]}, "outputs": [
      {"match": "loss", "placements": ["S(0)"]}]})js",
                     mlpTrainProgram()) ==
        "s.json: /outputs/0: rule 'loss' shards dim 0 of output 'loss' f32[] on mesh axis 'x', which has "
        "no dims to shard; replicate it (R) or narrow the match");
}

TEST_CASE("a shard that does not divide splits unevenly, a strided one too; its rows must divide",
          "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [2, 3], "axes": ["dp", "tp"]},
      "params": [{"match": "fc2.weight", "placements": {"tp": "S(0)"}}]})js",
                                  mlpProgram());
  CHECK(r.inputs[2] == spec({kR, S(0)}));  // 64 rows: 22, 22, 20
  r = resolved(R"js({"version": 1, "mesh": {"shape": [2, 3], "axes": ["dp", "tp"]},
      "params": [{"match": "fc2.weight", "placements": {"tp": "S(0,sf=2)"}}]})js",
               mlpProgram());  // 2 rows of 32: 11, 11, 10 of each
  CHECK(r.inputs[2] == ShardingSpec{{kR, Placement::stridedShard(0, 2)}});
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2, 3], "axes": ["dp", "tp"]}, "params": [
      {"match": "fc2.weight", "placements": {"tp": "S(0,sf=3)"}}]})js",
                     mlpProgram()) ==
        "s.json: /params/0: rule 'fc2.weight' on parameter 'fc2.weight' f32[64, 256]: dim 0 of size 64 does "
        "not split into 3 equal rows for S(0,sf=3) on mesh axis 'tp': a strided shard views the dim as [sf, "
        "size / sf], so sf must divide it (a fused weight of k parts has k * n rows: sf=k); the mesh axis "
        "need not divide it");
  // The cause is the split factor, not the mesh: sf=3 of 64 rows fails on
  // an axis of 2 (which divides 64) just the same; sf=4 on an axis of 3
  // (which does not) is fine.
  CHECK_THAT(resolveError(R"js({"version": 1, "mesh": {"shape": [2, 2], "axes": ["dp", "tp"]}, "params": [
      {"match": "fc2.weight", "placements": {"tp": "S(0,sf=3)"}}]})js",
                          mlpProgram()),
             Catch::Contains("dim 0 of size 64 does not split into 3 equal rows for S(0,sf=3) on mesh axis "
                             "'tp'") &&
                 !Catch::Contains("divide evenly over mesh axis"));
  r = resolved(R"js({"version": 1, "mesh": {"shape": [2, 3], "axes": ["dp", "tp"]},
      "params": [{"match": "fc2.weight", "placements": {"tp": "S(0,sf=4)"}}]})js",
               mlpProgram());
  CHECK(r.inputs[2] == ShardingSpec{{kR, Placement::stridedShard(0, 4)}});
}

TEST_CASE("preset dp: user inputs S(0) on every axis, parameters replicated", "[schema][preset]") {
  auto r = resolvePlacements(*presetSchema("dp"), mlpTrainProgram(), std::vector<int64_t>{2, 4});
  REQUIRE(r.hasValue());
  for (size_t i = 0; i < 4; ++i) CHECK(r->inputs[i] == spec({kR, kR}));
  CHECK(r->inputs[4] == spec({S(0), S(0)}));
  CHECK(r->inputs[5] == spec({S(0), S(0)}));
  for (const auto& out : r->outputs) CHECK(out == spec({kR, kR}));
  CHECK(r->notes.empty());
}

TEST_CASE("preset dp: a batch that does not divide splits unevenly (torch.chunk)", "[schema][preset]") {
  auto r = resolvePlacements(*presetSchema("dp"), mlpProgram(), std::vector<int64_t>{3});
  REQUIRE(r.hasValue());
  CHECK(r->inputs[4] == spec({S(0)}));
  CHECK(r->notes == std::vector<std::string>{"preset 'dp': input 'x' f32[32, 64]: dim 0 does not divide over "
                                             "the 3 ranks; split unevenly as torch.chunk does (11, 11, 10)"});
}

TEST_CASE("preset dp: no mesh", "[schema][preset][bad]") {
  CHECK(resolvePlacements(*presetSchema("dp"), mlpProgram(), std::nullopt).status().message() ==
        "preset 'dp': no mesh: give \"mesh\": {\"shape\": [...]} in the schema, or --mesh (e.g. --mesh 8 or "
        "--mesh 2x4)");
}

TEST_CASE("preset fsdp: dim 0 sharded where it divides, gradients follow", "[schema][preset]") {
  ProgramBuilder b;
  b.input(ir::InputKind::Parameter, "p_w", {256, 64}, "w");
  b.input(ir::InputKind::Parameter, "p_b", {10}, "b");
  b.input(ir::InputKind::Parameter, "p_scale", {}, "scale");
  b.input(ir::InputKind::Buffer, "b_mean", {64}, "mean");
  b.input(ir::InputKind::UserInput, "x", {16, 64});
  b.input(ir::InputKind::UserInput, "t", {});
  b.output(ir::OutputKind::LossOutput, "loss", {});
  b.output(ir::OutputKind::GradientToParameter, "gw", {256, 64}, "w");
  b.output(ir::OutputKind::GradientToParameter, "gb", {10}, "b");
  auto r = resolvePlacements(*presetSchema("fsdp"), b.take(), std::vector<int64_t>{2, 4});
  REQUIRE(r.hasValue());
  CHECK(r->mesh.str() == "2x4 (d0, d1)");
  CHECK(r->inputs[0] == spec({S(0), S(0)}));
  CHECK(r->inputs[1] == spec({kR, kR}));
  CHECK(r->inputs[2] == spec({kR, kR}));
  CHECK(r->inputs[3] == spec({kR, kR}));  // buffers stay replicated
  CHECK(r->inputs[4] == spec({S(0), S(0)}));
  CHECK(r->inputs[5] == spec({kR, kR}));
  CHECK(r->outputs[0] == spec({kR, kR}));
  CHECK(r->outputs[1] == spec({S(0), S(0)}));  // reduce-scattered gradient
  CHECK(r->outputs[2] == spec({kR, kR}));
  CHECK(r->notes ==
        std::vector<std::string>{
            "preset 'fsdp': input 't' f32[] is a scalar: replicated",
            "preset 'fsdp': parameter 'b' f32[10] stays replicated: dim 0 (10) does not divide by "
            "the 8 ranks",
            "preset 'fsdp': parameter 'scale' f32[] stays replicated: it is a scalar"});
  // ZeRO-3: the sharded parameter is gathered before use, the rest are not.
  CHECK(r->gathered[0] == spec({kR, kR}));
  for (size_t i = 1; i < r->gathered.size(); ++i) CHECK_FALSE(r->gathered[i].has_value());
}

TEST_CASE("preset ddp is dp", "[schema][preset]") {
  auto r = resolvePlacements(*presetSchema("ddp"), mlpTrainProgram(), std::vector<int64_t>{2});
  REQUIRE(r.hasValue());
  for (size_t i = 0; i < 4; ++i) CHECK(r->inputs[i] == spec({kR}));
  CHECK(r->inputs[4] == spec({S(0)}));
  for (const auto& g : r->gathered) CHECK_FALSE(g.has_value());
}

TEST_CASE("preset hsdp: replicate over axis 0, fsdp over axis 1", "[schema][preset]") {
  auto r = resolvePlacements(*presetSchema("hsdp"), mlpTrainProgram(), std::vector<int64_t>{2, 2});
  REQUIRE(r.hasValue());
  CHECK(r->inputs[0] == spec({kR, S(0)}));  // fc1.weight
  CHECK(r->gathered[0] == spec({kR, kR}));
  CHECK(r->inputs[4] == spec({S(0), S(0)}));  // x
  CHECK(r->outputs[1] == spec({kR, S(0)}));   // its gradient: all-reduced over axis 0, scattered over 1
  CHECK(resolvePlacements(*presetSchema("hsdp"), mlpTrainProgram(), std::vector<int64_t>{4})
            .status()
            .message() ==
        "preset 'hsdp': hsdp needs a 2-D mesh (replicate x shard), e.g. --mesh 2x4; the mesh is 4 (x)");
}

TEST_CASE("presets split a batch over the leading axes it divides by", "[schema][preset]") {
  ProgramBuilder b;
  b.input(ir::InputKind::UserInput, "x", {2, 64});
  auto r = resolvePlacements(*presetSchema("dp"), b.take(), std::vector<int64_t>{2, 2});
  REQUIRE(r.hasValue());
  CHECK(r->inputs[0] == spec({S(0), kR}));
  CHECK(r->notes ==
        std::vector<std::string>{"preset 'dp': input 'x' f32[2, 64]: dim 0 does not divide over all "
                                 "4 ranks; split [S(0), R] instead"});
}

TEST_CASE("a preset in the file, refined by rules (rules win)", "[schema][preset]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "preset": "fsdp", "mesh": {"shape": [2]},
      "params": [{"match": "*fc2.*", "placements": ["R"]}]})js",
                                  mlpTrainProgram());
  CHECK(r.inputs[0] == spec({S(0)}));  // fc1.weight: the preset's
  CHECK(r.gathered[0] == spec({kR}));
  CHECK(r.inputs[2] == spec({kR}));  // fc2.weight: the rule's, not gathered
  CHECK_FALSE(r.gathered[2].has_value());
  CHECK(r.inputs[4] == spec({S(0)}));  // x: the preset's
}

TEST_CASE("gather: stored sharded, gathered on the named axes before use", "[schema][resolve]") {
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [2, 2], "axes": ["fsdp", "tp"]},
      "params": [{"match": "*fc1.weight", "placements": {"fsdp": "S(1)", "tp": "S(0)"}, "gather": ["fsdp"]},
                 {"match": "*fc2.weight", "placements": {"fsdp": "S(0)"}, "gather": true}]})js",
                                  mlpTrainProgram());
  CHECK(r.inputs[0] == spec({S(1), S(0)}));
  CHECK(r.gathered[0] == spec({kR, S(0)}));  // tp's shard stays
  CHECK(r.gathered[2] == spec({kR, kR}));
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2]},
      "inputs": [{"match": "x", "placements": ["S(0)"], "gather": true}]})js",
                     mlpTrainProgram()) ==
        "s.json: /inputs/0/gather: gather applies to parameters only, not to user inputs");
  CHECK(resolveError(R"js({"version": 1, "mesh": {"shape": [2]},
      "params": [{"match": "*fc1.weight", "placements": ["S(0)"], "gather": ["tp"]}]})js",
                     mlpTrainProgram())
            .find("s.json: /params/0/gather/tp: unknown mesh axis 'tp'") == 0);
}

TEST_CASE("where_divisible: tensors the placements do not fit keep their layout, with a note",
          "[schema][resolve]") {
  ProgramBuilder b;
  b.input(ir::InputKind::Parameter, "p_a", {6, 4}, "a");
  b.input(ir::InputKind::Parameter, "p_b", {4}, "b");
  ResolvedPlacements r = resolved(R"js({"version": 1, "mesh": {"shape": [3]},
      "params": [{"match": "*", "placements": ["S(0)"], "where_divisible": true}]})js",
                                  b.take());
  CHECK(r.inputs[0] == spec({S(0)}));
  CHECK(r.inputs[1] == spec({kR}));
  CHECK(r.notes ==
        std::vector<std::string>{
            "s.json: /params/0: rule '*' on parameter 'b' f32[4]: dim 0 of size 4 does not divide "
            "evenly over mesh axis 'x' of size 3: shard it over axes whose sizes divide it, or pad "
            "it; where_divisible: left as it was"});
}
