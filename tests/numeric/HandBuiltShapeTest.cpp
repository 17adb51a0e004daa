// Views, data movement and products no test model exercises, checked
// numerically on hand-built one-op graphs on every mesh (2, 4, 2x2 ranks):
// flatten/unflatten, view_as, expand_as, chunk, unbind, stack, diagonal,
// select_scatter, padding of every kind, flip, repeat, repeat_interleave,
// diff, tril/triu, meshgrid, matmul's broadcasting cases, baddbmm, einsum
// and pairwise distances.
#include "OneOp.h"

using namespace spmd;
using namespace spmd::numeric::oneop;

namespace {

using Args = std::vector<std::pair<std::string, Argument>>;

// op(self = x, more...) -> one f32 result of `out` sizes.
void onXSized(CheckStats& total, const std::string& target, const at::Tensor& x, Args more,
              std::vector<int64_t> out, const std::vector<std::string>& mustSee) {
  onX(total, target, x, std::move(more), {{"y", std::move(out)}}, mustSee);
}

}  // namespace

TEST_CASE("hand-built views: flatten, unflatten, view_as, expand_as, chunk, unbind, stack") {
  at::manual_seed(21);
  CheckStats total;
  onXSized(total, "aten.flatten.using_ints", randn({4, 2, 8}), {{"start_dim", I(1)}}, {4, 16},
           {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]",
            "operands [S(2)] -> results [S(1,sf=2)]"});
  // The sizes are global: the unflattened dim stays whole.
  onXSized(total, "aten.unflatten.int", randn({8, 12, 4}), {{"dim", I(1)}, {"sizes", Is({4, 3})}},
           {8, 4, 3, 4},
           {"operands [S(0)] -> results [S(0)]", "operands [S(2)] -> results [S(3)]",
            "operands [S(0), S(2)] -> results [S(0), S(3)] on 2x2"});
  {
    OneOp op;
    auto x = op.in("x", randn({8, 4})), o = op.in("o", randn({32}));
    op.node("aten.view_as.default", {{"self", x}, {"other", o}}, {{"y", {32}}})
        .check(total,
               {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({1, 4})), o = op.in("o", randn({8, 4}));
    op.node("aten.expand_as.default", {{"self", x}, {"other", o}}, {{"y", {8, 4}}})
        .check(total, {"operands [R] [S(0)] -> results [S(0)]", "operands [S(1)] [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 12}));
    op.node("aten.chunk.default", {{"self", x}, {"chunks", I(3)}, {"dim", I(1)}},
            {{"a", {8, 4}}, {"b", {8, 4}}, {"c", {8, 4}}}, /*listOutput=*/true)
        .check(total, {"operands [S(0)] -> results [S(0)] [S(0)] [S(0)]",
                       "operands [S(1,sf=3)] -> results [S(1)] [S(1)] [S(1)]",
                       "operands [P(sum)] -> results [P(sum)] [P(sum)] [P(sum)]"});
  }
  {
    OneOp op;  // 7 rows in 3 chunks: 3, 3, 1
    auto x = op.in("x", randn({7, 4}));
    op.node("aten.chunk.default", {{"self", x}, {"chunks", I(3)}},
            {{"a", {3, 4}}, {"b", {3, 4}}, {"c", {1, 4}}},
            /*listOutput=*/true)
        .check(total, {"operands [S(1)] -> results [S(1)] [S(1)] [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({3, 8, 4}));
    op.node("aten.unbind.int", {{"self", x}, {"dim", I(0)}}, {{"a", {8, 4}}, {"b", {8, 4}}, {"c", {8, 4}}},
            /*listOutput=*/true)
        .check(total, {"operands [S(2)] -> results [S(1)] [S(1)] [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 2, 4}));
    op.node("aten.unbind.int", {{"self", x}, {"dim", I(-2)}}, {{"a", {8, 4}}, {"b", {8, 4}}},
            /*listOutput=*/true)
        .check(total, {"operands [S(0)] -> results [S(0)] [S(0)]",
                       "operands [P(sum)] -> results [P(sum)] [P(sum)]"});
  }
  {
    OneOp op;
    auto a = op.in("a", randn({8, 4})), b = op.in("b", randn({8, 4}));
    op.node("aten.stack.default", {{"tensors", OneOp::list({a, b})}, {"dim", I(1)}}, {{"y", {8, 2, 4}}})
        .check(total, {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [S(1)] [S(1)] -> results [S(2)]",
                       "operands [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto a = op.in("a", randn({8, 4})), b = op.in("b", randn({8, 4}));
    op.node("aten.stack.default", {{"tensors", OneOp::list({a, b})}, {"dim", I(-1)}}, {{"y", {8, 4, 2}}})
        .check(total, {"operands [S(1)] [S(1)] -> results [S(1)]"});
  }
  printTotal("views", total);
}

// squeeze keeps its global meaning where a shard has one row: the local
// [1, 3] of a global [2, 3] keeps its dim 0 (issue: squeeze(0) gave [6]).
TEST_CASE("hand-built squeeze at local size 1, every overload") {
  at::manual_seed(23);
  CheckStats total;
  onXSized(total, "aten.squeeze.dim", randn({2, 4}), {{"dim", I(0)}}, {2, 4},
           {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]"});
  onXSized(total, "aten.squeeze.dim", randn({4, 1, 4}), {{"dim", I(-2)}}, {4, 4},
           {"operands [S(0)] -> results [S(0)]", "operands [S(0), S(2)] -> results [S(0), S(1)] on 2x2"});
  onXSized(total, "aten.squeeze.default", randn({4, 1, 2}), {}, {4, 2},
           {"operands [S(0)] -> results [S(0)]", "operands [S(2)] -> results [S(1)]"});
  onXSized(total, "aten.squeeze.dims", randn({2, 2, 1}), {{"dim", Is({0, 2})}}, {2, 2},
           {"operands [S(0)] -> results [S(0)]", "operands [S(0), S(1)] -> results [S(0), S(1)] on 2x2"});
  // Uneven shards (3 rows on 2 ranks: 2 and 1) run end to end in
  // tests/e2e/local_shapes.py.
  printTotal("squeeze", total);
}

TEST_CASE("hand-built strided views and scatters: as_strided, diagonal, select_scatter") {
  at::manual_seed(22);
  CheckStats total;
  onXSized(total, "aten.as_strided.default", randn({8, 4}), {{"size", Is({4, 4})}, {"stride", Is({1, 4})}},
           {4, 4}, {"operands [R] -> results [R]"});
  onXSized(total, "aten.diagonal.default", randn({4, 6, 6}),
           {{"offset", I(1)}, {"dim1", I(1)}, {"dim2", I(2)}}, {4, 5},
           {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.diagonal.default", randn({6, 4, 6}), {{"dim1", I(0)}, {"dim2", I(-1)}}, {4, 6},
           {"operands [S(1)] -> results [S(0)]"});
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6, 4})), src = op.in("s", randn({8, 4}));
    op.node("aten.select_scatter.default", {{"self", x}, {"src", src}, {"dim", I(1)}, {"index", I(-2)}},
            {{"y", {8, 6, 4}}})
        .check(total, {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [S(2)] [S(1)] -> results [S(2)]",
                       "operands [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  printTotal("strided views and scatters", total);
}

TEST_CASE("hand-built padding, flips, repeats, differences and triangles") {
  at::manual_seed(23);
  CheckStats total;
  at::Tensor img = randn({2, 4, 8, 8});
  onXSized(total, "aten.constant_pad_nd.default", randn({8, 4}), {{"pad", Is({1, 2})}, {"value", F(0.0)}},
           {8, 7}, {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.constant_pad_nd.default", randn({8, 4}),
           {{"pad", Is({0, 0, -1, 1})}, {"value", F(2.0)}}, {8, 4}, {"operands [S(1)] -> results [S(1)]"});
  onXSized(total, "aten.pad.default", img, {{"pad", Is({1, 1, 2, 2})}, {"mode", Str("reflect")}},
           {2, 4, 12, 10}, {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.pad.default", img, {{"pad", Is({1, 1, 0, 0})}, {"mode", Str("circular")}},
           {2, 4, 8, 10}, {"operands [S(2)] -> results [S(2)]"});
  onXSized(total, "aten.pad.default", img,
           {{"pad", Is({1, 1})}, {"mode", Str("constant")}, {"value", F(1.0)}}, {2, 4, 8, 10},
           {"operands [S(0)] -> results [S(0)]"});
  onXSized(total, "aten.reflection_pad1d.default", randn({2, 4, 8}), {{"padding", Is({2, 3})}}, {2, 4, 13},
           {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.reflection_pad2d.default", img, {{"padding", Is({1, 0, 2, 1})}}, {2, 4, 11, 9},
           {"operands [S(0)] -> results [S(0)]"});
  onXSized(total, "aten.reflection_pad3d.default", randn({2, 4, 4, 4, 4}),
           {{"padding", Is({1, 1, 0, 0, 2, 2})}}, {2, 4, 8, 4, 6}, {"operands [S(3)] -> results [S(3)]"});
  onXSized(total, "aten.replication_pad2d.default", img, {{"padding", Is({1, 1, 0, 0})}}, {2, 4, 8, 10},
           {"operands [S(2)] -> results [S(2)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.replication_pad3d.default", randn({2, 4, 4, 4, 4}),
           {{"padding", Is({0, 0, 1, 1, 0, 0})}}, {2, 4, 4, 6, 4}, {"operands [S(4)] -> results [S(4)]"});
  onXSized(total, "aten.flip.default", randn({8, 4, 4}), {{"dims", Is({0, -1})}}, {8, 4, 4},
           {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.repeat.default", randn({8, 4}), {{"repeats", Is({2, 1})}}, {16, 4},
           {"operands [S(0)] -> results [S(0,sf=2)]", "operands [S(1)] -> results [S(1)]"});
  onXSized(total, "aten.repeat.default", randn({8, 4}), {{"repeats", Is({3, 1, 2})}}, {3, 8, 8},
           {"operands [S(0)] -> results [S(1)]", "operands [S(1)] -> results [S(2,sf=2)]",
            "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.repeat_interleave.self_int", randn({8, 4}), {{"repeats", I(3)}, {"dim", I(0)}},
           {24, 4}, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]"});
  onXSized(total, "aten.repeat_interleave.self_int", randn({8, 4}), {{"repeats", I(2)}}, {64},
           {"operands [R] -> results [R]"});
  onXSized(total, "aten.repeat_interleave.self_int", randn({8, 4}),
           {{"repeats", I(2)}, {"dim", I(1)}, {"output_size", I(8)}}, {8, 8},
           {"operands [R] -> results [R]"});
  onXSized(total, "aten.diff.default", randn({8, 4}), {{"dim", I(0)}}, {7, 4},
           {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"});
  onXSized(total, "aten.diff.default", randn({8, 6}), {{"n", I(2)}}, {8, 4},
           {"operands [S(0)] -> results [S(0)]"});
  {
    OneOp op;
    auto x = op.in("x", randn({8, 4})), pre = op.in("p", randn({8, 1})), app = op.in("a", randn({8, 3}));
    op.node("aten.diff.default", {{"self", x}, {"dim", I(1)}, {"prepend", pre}, {"append", app}},
            {{"y", {8, 7}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] -> results [S(0)]",
                       "operands [P(sum)] [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  for (const char* t : {"aten.tril.default", "aten.triu.default"})
    onXSized(total, t, randn({4, 8, 6}), {{"diagonal", I(-1)}}, {4, 8, 6},
             {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  {
    OneOp op;
    auto a = op.in("a", randn({8})), b = op.in("b", randn({4}));
    op.node("aten.meshgrid.default", {{"tensors", OneOp::list({a, b})}}, {{"p", {8, 4}}, {"q", {8, 4}}},
            /*listOutput=*/true)
        .check(total, {"operands [S(0)] [R] -> results [S(0)] [S(0)]",
                       "operands [R] [S(0)] -> results [S(1)] [S(1)]",
                       "operands [S(0), R] [R, S(0)] -> results [S(0), S(1)] [S(0), S(1)] on 2x2"});
  }
  printTotal("padding, flips, repeats", total);
}

TEST_CASE("hand-built products: matmul, baddbmm, einsum, cdist, pdist") {
  at::manual_seed(24);
  CheckStats total;
  auto mm = [&](std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t> out,
                const std::vector<std::string>& mustSee) {
    OneOp op;
    auto x = op.in("a", randn(a)), y = op.in("b", randn(b));
    op.node("aten.matmul.default", {{"self", x}, {"other", y}}, {{"y", out}}).check(total, mustSee);
  };
  mm({8}, {8}, {},
     {"operands [S(0)] [S(0)] -> results [P(sum)]", "operands [P(sum)] [R] -> results [P(sum)]"});
  mm({4, 8}, {8}, {4},
     {"operands [S(0)] [R] -> results [S(0)]", "operands [S(1)] [S(0)] -> results [P(sum)]"});
  mm({8}, {8, 4}, {4},
     {"operands [R] [S(1)] -> results [S(0)]", "operands [S(0)] [S(0)] -> results [P(sum)]"});
  mm({2, 4, 8}, {8, 4}, {2, 4, 4},
     {"operands [S(0)] [R] -> results [S(0)]", "operands [S(2)] [S(0)] -> results [P(sum)]",
      "operands [S(0), S(2)] [R, S(0)] -> results [S(0), P(sum)] on 2x2"});
  mm({4, 1, 4, 8}, {2, 8, 4}, {4, 2, 4, 4},
     {"operands [S(0)] [R] -> results [S(0)]", "operands [R] [S(0)] -> results [S(1)]",
      "operands [R] [S(2)] -> results [S(3)]"});
  {
    OneOp op;
    auto c = op.in("c", randn({4, 4})), a = op.in("a", randn({2, 4, 8})), b = op.in("b", randn({2, 8, 4}));
    op.node("aten.baddbmm.default",
            {{"self", c}, {"batch1", a}, {"batch2", b}, {"beta", F(0.5)}, {"alpha", F(2.0)}},
            {{"y", {2, 4, 4}}})
        .check(total, {"operands [R] [S(0)] [S(0)] -> results [S(0)]",
                       "operands [P(sum)] [S(2)] [S(1)] -> results [P(sum)]",
                       "operands [S(1)] [R] [S(2)] -> results [S(2)]",
                       "operands [P(sum)] [P(sum)] [R] -> results [P(sum)]"});
  }
  auto einsum = [&](const std::string& eq, std::vector<at::Tensor> ins, std::vector<int64_t> out,
                    const std::vector<std::string>& mustSee) {
    OneOp op;
    std::vector<Argument> ts;
    for (size_t i = 0; i < ins.size(); ++i) ts.push_back(op.in("t" + std::to_string(i), ins[i]));
    op.node("aten.einsum.default", {{"equation", Str(eq)}, {"tensors", OneOp::list(ts)}}, {{"y", out}})
        .check(total, mustSee);
  };
  einsum("bij,bjk->bik", {randn({2, 4, 8}), randn({2, 8, 4})}, {2, 4, 4},
         {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [S(2)] [S(1)] -> results [P(sum)]",
          "operands [R] [P(sum)] -> results [P(sum)]"});
  einsum("...qd,...kd->...qk", {randn({2, 4, 8, 4}), randn({4, 8, 4})}, {2, 4, 8, 8},
         {"operands [S(1)] [S(0)] -> results [S(1)]", "operands [S(3)] [S(2)] -> results [P(sum)]"});
  einsum("ij,jk", {randn({8, 4}), randn({4, 8})}, {8, 8}, {"operands [S(1)] [S(0)] -> results [P(sum)]"});
  einsum("ii->i", {randn({8, 8})}, {8},
         {"operands [R] -> results [R]", "operands [P(sum)] -> results [P(sum)]"});
  einsum("ij->", {randn({8, 4})}, {}, {"operands [S(0)] -> results [P(sum)]"});
  {
    OneOp op;
    auto a = op.in("a", randn({2, 8, 4})), b = op.in("b", randn({1, 4, 4}));
    op.node("aten._cdist_forward.default",
            {{"x1", a}, {"x2", b}, {"p", F(2.0)}, {"compute_mode", Argument::none()}}, {{"y", {2, 8, 4}}})
        .check(total, {"operands [S(0)] [R] -> results [S(0)]", "operands [S(1)] [R] -> results [S(1)]",
                       "operands [R] [S(1)] -> results [S(2)]"});
  }
  onXSized(total, "aten._pdist_forward.default", randn({8, 4}), {{"p", F(1.0)}}, {28},
           {"operands [R] -> results [R]"});
  printTotal("products", total);
}
