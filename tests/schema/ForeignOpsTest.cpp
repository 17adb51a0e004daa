// Ops from outside LibTorch are refused at compile time unless the schema
// gives them a rule (spmd-run --load-library then brings the kernel).
#include "../TestCatch.h"
#include "schema/ForeignOps.h"

using namespace spmd;
using namespace spmd::schema;

namespace {

// A program calling `targets` in order, one node each ("n0", "n1", ...).
ir::ExportedProgram programCalling(const std::vector<std::string>& targets) {
  ir::ExportedProgram p;
  for (size_t i = 0; i < targets.size(); ++i) {
    std::string name = "n" + std::to_string(i);
    auto v = p.graph.addValue(name, ir::ValueKind::Tensor);
    REQUIRE(v.hasValue());
    REQUIRE(p.graph.addNode(name, targets[i], {}, {ir::Argument::tensor(*v)}).hasValue());
  }
  return p;
}

PlacementSchema schemaWithRule(const std::string& target) {
  auto s = parsePlacementSchema(R"js({"version": 1, "rules": {")js" + target + R"js(": "([b]) -> ([b])"}})js",
                                "s.json");
  REQUIRE(s.hasValue());
  return std::move(*s);
}

}  // namespace

TEST_CASE("LibTorch's namespaces and spmd-run's own", "[schema][foreign]") {
  for (const char* t : {"aten.mm.default", "_operator.getitem", "torch.sym_max", "math.trunc",
                        "spmd.all_gather", "_c10d_functional.all_reduce.default"})
    CHECK(isLibTorchOp(t));
  for (const char* t : {"transformers.grouped_mm_fallback.default", "spmdtest.scaled_add.default",
                        "prims.convert_element_type.default", "aten_extra.op.default"})
    CHECK_FALSE(isLibTorchOp(t));
}

TEST_CASE("an op registered from Python is refused naming the node, the op and the fix",
          "[schema][foreign][bad]") {
  ir::ExportedProgram p = programCalling({"aten.mm.default", "transformers.grouped_mm_fallback.default",
                                          "transformers.grouped_mm_fallback.default", "mylib.rope.default"});
  p.graph.nodes()[1]->mutableMetadata().stackTrace =
      "File \"/src/moe.py\", line 40, in forward\n    return grouped_mm_fallback(x, w)";
  Status st = checkForeignOps(p, PlacementSchema{});
  CHECK(st.message() ==
        "node %n1 (transformers.grouped_mm_fallback.default, moe.py:40: return grouped_mm_fallback(x, w)): "
        "the op is not LibTorch's (namespace 'transformers', registered from Python?), so spmd-run has no "
        "kernel for it: export its ATen form instead (transformers' MoE: config._experts_implementation = "
        "\"batched_mm\"), or give it a rule in the schema's \"rules\" and run spmd-run --load-library with a "
        "TORCH_LIBRARY kernel for it (and 2 more nodes of such ops)");
  CHECK(st.message().find('\n') == std::string::npos);
  // A schema rule for one op leaves the other to refuse.
  st = checkForeignOps(p, schemaWithRule("transformers.grouped_mm_fallback.default"));
  CHECK_THAT(st.message(), Catch::StartsWith("node %n3 (mylib.rope.default): the op is not LibTorch's "
                                             "(namespace 'mylib', registered from Python?)") &&
                               Catch::Contains("(torch.export with the op decomposed)") &&
                               !Catch::Contains("more node"));
  CHECK(checkForeignOps(programCalling({"aten.mm.default", "mylib.rope.default"}),
                        schemaWithRule("mylib.rope.default"))
            .isOk());
  CHECK(checkForeignOps(programCalling({"aten.mm.default", "_operator.getitem"}), PlacementSchema{}).isOk());
}
