// Ops from outside LibTorch are refused at compile time unless the schema
// gives them a rule (spmd-run --load-library then brings the kernel). Which
// namespaces are LibTorch's is checked here; the refusal itself, on a model
// in IR text, in tests/lit/schema/foreign-ops.test.
#include "../TestCatch.h"
#include "schema/ForeignOps.h"

using namespace spmd::schema;

TEST_CASE("LibTorch's namespaces and spmd-run's own", "[schema][foreign]") {
  for (const char* t : {"aten.mm.default", "_operator.getitem", "torch.sym_max", "math.trunc",
                        "spmd.all_gather", "_c10d_functional.all_reduce.default"})
    CHECK(isLibTorchOp(t));
  for (const char* t : {"transformers.grouped_mm_fallback.default", "spmdtest.scaled_add.default",
                        "prims.convert_element_type.default", "aten_extra.op.default"})
    CHECK_FALSE(isLibTorchOp(t));
}
