// `spmdc diff`: two small hand-built programs, row- vs column-sharded.
//
//   a: w [S(0)] -> mm -> all_gather        b: w [S(1)], x [S(1)] -> mm -> all_reduce
#include "../TestCatch.h"

#include "ProgramTestUtil.h"
#include "program/Diff.h"

namespace spmd::program {
namespace {

using testing::arg;

// The tiny program with the weight sharded by columns: a partial matmul
// resolved by an all_reduce.
Program columnProgram() {
  testing::ProgramBuilder b("tiny", {2}, {"x"});
  ir::Value* w = b.input(ir::InputKind::Parameter, "p_w", {8, 2}, {8, 4}, {"S(1)"}, "w");
  ir::Value* x = b.input(ir::InputKind::UserInput, "x", {2, 2}, {2, 4}, {"S(1)"});
  ir::Value* t = b.node("t", "aten.t.default", {arg("self", ir::Argument::tensor(w))}, {2, 8});
  ir::Value* mm =
      b.node("mm", "aten.mm.default",
             {arg("self", ir::Argument::tensor(x)), arg("mat2", ir::Argument::tensor(t))}, {2, 8});
  ir::Value* r = b.node("all_reduce", "spmd.all_reduce",
                        {arg("input", ir::Argument::tensor(mm)), arg("axis", testing::str("x")),
                         arg("op", testing::str("sum"))},
                        {2, 8});
  b.output(r, {"R"}, {2, 8});
  b.weight("w", {8, 4}, {"S(1)"});
  b.weight("extra", {4}, {"R"});
  return b.take();
}

TEST_CASE("identical programs have no differences", "[program][diff]") {
  DiffResult r = diffPrograms(testing::tinyProgram(), testing::tinyProgram());
  CHECK(r.same);
  CHECK(r.text.empty());
}

TEST_CASE("diff shows placements, nodes, collectives and weights", "[program][diff]") {
  DiffResult r = diffPrograms(testing::tinyProgram(), columnProgram());
  CHECK_FALSE(r.same);
  CHECK(r.text ==
        "input %p_w: [S(0)] -> [S(1)]\n"
        "input %p_w: f32[4, 4] -> f32[8, 2]\n"
        "input %x: [R] -> [S(1)]\n"
        "input %x: f32[2, 4] -> f32[2, 2]\n"
        "output 0: %all_gather user_output -> %all_reduce user_output\n"
        "- %all_gather: f32[2, 8] = spmd.all_gather(input=%mm, axis=\"x\", dim=1)\n"
        "+ %all_reduce: f32[2, 8] = spmd.all_reduce(input=%mm, axis=\"x\", op=\"sum\")\n"
        "~ %t:\n"
        "    - %t: f32[4, 4] = aten.t.default(self=%p_w)\n"
        "    + %t: f32[2, 8] = aten.t.default(self=%p_w)\n"
        "~ %mm:\n"
        "    - %mm: f32[2, 4] = aten.mm.default(self=%x, mat2=%t)\n"
        "    + %mm: f32[2, 8] = aten.mm.default(self=%x, mat2=%t)\n"
        "collective all_gather: 1 -> 0\n"
        "collective all_reduce: 0 -> 1\n"
        "weight w: [S(0)] -> [S(1)]\n"
        "weight + extra  [R]\n");
  // The other direction mirrors it.
  DiffResult back = diffPrograms(columnProgram(), testing::tinyProgram());
  CHECK(back.text.find("weight - extra  [R]\n") != std::string::npos);
  CHECK(back.text.find("- %all_reduce: ") != std::string::npos);
}

TEST_CASE("diff shows mesh, output placement and boundary changes", "[program][diff]") {
  Program a = testing::tinyProgram();
  Program b = testing::tinyProgram();
  b.mesh = *sharding::Mesh::create({4}, {"x"});
  b.outputs[0].spec = testing::spec({"S(1)"});
  ir::Value* y = *b.graph.graph.addValue("y", ir::ValueKind::Tensor);
  y->mutableType() = testing::tensorType({3});
  b.graph.graph.addInput(y);
  b.graph.signature.inputs.push_back({ir::InputKind::UserInput, y, "", true, {}, "y"});
  b.inputs.push_back({testing::spec({"R"}), testing::tensorType({3})});
  DiffResult r = diffPrograms(a, b);
  CHECK(r.text ==
        "mesh: 2 (x) -> 4 (x)\n"
        "input + %y: f32[3]  [R]\n"
        "output 0 (%all_gather user_output): [R] -> [S(1)]\n");
}

}  // namespace
}  // namespace spmd::program
