// Rules no test model exercises in a sharded way, checked numerically on
// hand-built one-op graphs with random inputs: reductions leaving pending
// sums, means, maxima and minima, data movement (cat, transpose, split into
// several results), scans, backward ops, indexing with random in-range
// indices, pooling and factories. Every strategy each rule offers runs on 2
// and 4 simulated ranks and a 2x2 mesh against the op run unsharded; each
// case also names the strategies it must see (on 2 ranks), so a rule that
// stops offering them fails here.
#include "OneOp.h"

using namespace spmd;
using namespace spmd::numeric::oneop;

TEST_CASE("hand-built reductions leave pending sums, means, maxima and minima") {
  at::manual_seed(1);
  CheckStats total;
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.sum.dim_IntList", {{"self", x}, {"dim", Is({1})}}, {{"y", {8}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [P(sum)]",
                       "operands [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.sum.default", {{"self", x}}, {{"y", {}}})
        .check(total, {"operands [S(2)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.mean.dim", {{"self", x}, {"dim", Is({-1})}, {"keepdim", B(true)}}, {{"y", {8, 1}}})
        .check(total, {"operands [S(1)] -> results [P(avg)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.mean.default", {{"self", x}}, {{"y", {}}})
        .check(total, {"operands [S(0)] -> results [P(avg)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.amax.default", {{"self", x}, {"dim", Is({1})}}, {{"y", {8}}})
        .check(total, {"operands [S(1)] -> results [P(max)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6, 4}));
    op.node("aten.amin.default", {{"self", x}, {"dim", Is({0, 2})}, {"keepdim", B(true)}}, {{"y", {1, 6, 1}}})
        .check(total, {"operands [S(0)] -> results [P(min)]", "operands [S(2)] -> results [P(min)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.cumsum.default", {{"self", x}, {"dim", I(1)}}, {{"y", {8, 6}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  }
  printTotal("reductions", total);
}

TEST_CASE("hand-built data movement: cat, transpose, split, reshape, slice, select") {
  at::manual_seed(2);
  CheckStats total;
  {
    OneOp op;
    auto a = op.in("a", randn({4, 6})), b = op.in("b", randn({4, 2})), c = op.in("c", randn({4, 4}));
    op.node("aten.cat.default", {{"tensors", OneOp::list({a, b, c})}, {"dim", I(1)}}, {{"y", {4, 12}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] -> results [S(0)]",
                       "operands [P(sum)] [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  {  // equal parts: sharded parts concatenate into a strided shard (fused QKV's gradient)
    OneOp op;
    auto a = op.in("a", randn({4, 6})), b = op.in("b", randn({4, 6})), c = op.in("c", randn({4, 6}));
    op.node("aten.cat.default", {{"tensors", OneOp::list({a, b, c})}, {"dim", I(1)}}, {{"y", {4, 18}}})
        .check(total, {"operands [S(1)] [S(1)] [S(1)] -> results [S(1,sf=3)]",
                       "operands [S(0)] [S(0)] [S(0)] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.transpose.int", {{"self", x}, {"dim0", I(0)}, {"dim1", I(-1)}}, {{"y", {8, 6, 4}}})
        .check(total, {"operands [S(0)] -> results [S(2)]", "operands [S(2)] -> results [S(0)]",
                       "operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6}));
    op.node("aten.t.default", {{"self", x}}, {{"y", {6, 4}}})
        .check(total, {"operands [S(0)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.split.Tensor", {{"self", x}, {"split_size", I(2)}, {"dim", I(1)}},
            {{"y0", {8, 2}}, {"y1", {8, 2}}, {"y2", {8, 2}}}, /*listOutput=*/true)
        .check(total, {"operands [S(0)] -> results [S(0)] [S(0)] [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({6, 8}));
    op.node("aten.split_with_sizes.default", {{"self", x}, {"split_sizes", Is({2, 4})}, {"dim", I(0)}},
            {{"y0", {2, 8}}, {"y1", {4, 8}}}, /*listOutput=*/true)
        .check(total, {"operands [S(1)] -> results [S(1)] [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.reshape.default", {{"self", x}, {"shape", Is({24, 8})}}, {{"y", {24, 8}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(0,sf=4)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 48}));
    op.node("aten._unsafe_view.default", {{"self", x}, {"size", Is({4, 6, 8})}}, {{"y", {4, 6, 8}}})
        .check(total, {"operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 1, 8}));
    op.node("aten.squeeze.dim", {{"self", x}, {"dim", I(1)}}, {{"y", {4, 8}}})
        .check(total, {"operands [S(2)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.slice.Tensor", {{"self", x}, {"dim", I(1)}, {"start", I(1)}, {"end", I(5)}},
            {{"y", {8, 4}}})
        .check(total, {"operands [S(0)] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.select.int", {{"self", x}, {"dim", I(1)}, {"index", I(3)}}, {{"y", {4, 8}}})
        .check(total, {"operands [S(2)] -> results [S(1)]"});
  }
  printTotal("data movement", total);
}

TEST_CASE("hand-built pointwise and backward ops") {
  at::manual_seed(3);
  CheckStats total;
  {
    // add(x, 1.0) is not linear: no pending pass-through.
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.add.Tensor", {{"self", x}, {"other", F(1.0)}}, {{"y", {8, 6}}})
        .check(total, {"operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6})), w = op.in("w", randn({6}));
    op.node("aten.mul.Tensor", {{"self", x}, {"other", w}}, {{"y", {8, 6}}})
        .check(total,
               {"operands [S(1)] [S(0)] -> results [S(1)]", "operands [P(sum)] [R] -> results [P(sum)]",
                "operands [R] [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6})), y = op.in("y", randn({1, 6}));
    op.node("aten.maximum.default", {{"self", x}, {"other", y}}, {{"z", {8, 6}}})
        .check(total, {"operands [S(0)] [R] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto c = op.in("c", randn({8, 6}).gt(0)), x = op.in("x", randn({8, 6})), y = op.in("y", randn({6}));
    op.node("aten.where.self", {{"condition", c}, {"self", x}, {"other", y}}, {{"z", {8, 6}}})
        .check(total, {"operands [R] [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), y = op.in("y", at::sigmoid(randn({8, 6})));
    op.node("aten.sigmoid_backward.default", {{"grad_output", g}, {"output", y}}, {{"z", {8, 6}}})
        .check(total, {"operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), x = op.in("x", randn({8, 6}));
    op.node("aten.threshold_backward.default", {{"grad_output", g}, {"self", x}, {"threshold", F(0.0)}},
            {{"z", {8, 6}}})
        .check(total, {"operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), x = op.in("x", randn({8, 6}));
    op.node("aten.gelu_backward.default", {{"grad_output", g}, {"self", x}}, {{"z", {8, 6}}})
        .check(total, {"operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({4, 8, 6})), y = op.in("y", at::softmax(randn({4, 8, 6}), -1));
    op.node("aten._softmax_backward_data.default",
            {{"grad_output", g},
             {"output", y},
             {"dim", I(-1)},
             {"input_dtype", Argument::scalarType(ir::ScalarType::Float)}},
            {{"z", {4, 8, 6}}})
        .check(total,
               {"operands [S(1)] [S(1)] -> results [S(1)]", "operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), y = op.in("y", at::log_softmax(randn({8, 6}), -1));
    op.node("aten._log_softmax_backward_data.default",
            {{"grad_output", g},
             {"output", y},
             {"dim", I(1)},
             {"input_dtype", Argument::scalarType(ir::ScalarType::Float)}},
            {{"z", {8, 6}}})
        .check(total, {"operands [S(0)] [S(0)] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6})), w = op.in("w", randn({4, 6})), b = op.in("b", randn({4}));
    op.node("aten.linear.default", {{"input", x}, {"weight", w}, {"bias", b}}, {{"y", {8, 4}}})
        .check(total, {"operands [S(1)] [S(1)] [P(sum)] -> results [P(sum)]",
                       "operands [R] [S(0)] [S(0)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({4, 6, 8})), x = op.in("x", randn({4, 6, 8}));
    auto mean = op.in("mean", randn({4, 6, 1})), rstd = op.in("rstd", at::rand({4, 6, 1}) + 0.5);
    auto w = op.in("w", randn({8})), b = op.in("b", randn({8}));
    op.node("aten.native_layer_norm_backward.default",
            {{"grad_out", g},
             {"input", x},
             {"normalized_shape", Is({8})},
             {"mean", mean},
             {"rstd", rstd},
             {"weight", w},
             {"bias", b},
             {"output_mask", Bs({1, 1, 1})}},
            {{"gx", {4, 6, 8}}, {"gw", {8}}, {"gb", {8}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] [S(0)] [R] [R] -> results [S(0)] [P(sum)] [P(sum)]"});
  }
  printTotal("pointwise and backward", total);
}

TEST_CASE("hand-built indexing, pooling and factories") {
  at::manual_seed(4);
  CheckStats total;
  {
    OneOp op;
    auto x = op.in("x", randn({10, 6})), i = op.in("i", randint(10, {4, 2}));
    op.node("aten.index.Tensor",
            {{"self", x}, {"indices", OneOp::list({i}, Argument::Kind::OptionalTensors)}}, {{"y", {4, 2, 6}}})
        .check(total, {"operands [R] [S(0)] -> results [S(0)]", "operands [S(1)] [R] -> results [S(2)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 10})), i = op.in("i", randint(10, {4}));
    op.node("aten.index_select.default", {{"self", x}, {"dim", I(1)}, {"index", i}}, {{"y", {8, 4}}})
        .check(total, {"operands [R] [S(0)] -> results [S(1)]", "operands [S(0)] [R] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 10})), i = op.in("i", randint(10, {4, 6})), s = op.in("s", randn({4, 6}));
    op.node("aten.scatter_add.default", {{"self", x}, {"dim", I(1)}, {"index", i}, {"src", s}},
            {{"y", {4, 10}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] -> results [S(0)]",
                       "operands [P(sum)] [S(1)] [S(1)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({2, 8, 6})), i = op.in("i", randint(10, {2, 8}));
    op.node("aten.embedding_dense_backward.default",
            {{"grad_output", g},
             {"indices", i},
             {"num_weights", I(10)},
             {"padding_idx", I(-1)},
             {"scale_grad_by_freq", B(false)}},
            {{"y", {10, 6}}})
        .check(total,
               {"operands [S(1)] [S(1)] -> results [P(sum)]", "operands [S(2)] [R] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({6, 8}));
    op.node("aten.sort.default", {{"self", x}, {"dim", I(1)}},
            {{"v", {6, 8}}, {"i", {6, 8}, ir::ScalarType::Long}})
        .check(total, {"operands [S(0)] -> results [S(0)] [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8, 8}));
    op.node("aten.avg_pool2d.default", {{"self", x}, {"kernel_size", Is({2, 2})}, {"stride", Is({2, 2})}},
            {{"y", {4, 6, 4, 4}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8, 8}));
    op.node("aten._adaptive_avg_pool2d.default", {{"self", x}, {"output_size", Is({1, 1})}},
            {{"y", {4, 6, 1, 1}}})
        .check(total, {"operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    op.node("aten.ones.default", {{"size", Is({4, 6})}}, {{"y", {4, 6}}})
        .check(total, {"operands () -> results [S(0)]", "operands () -> results [S(1)]"});
  }
  {
    OneOp op;
    op.node("aten.empty.memory_format", {{"size", Is({4, 6})}}, {{"y", {4, 6}}})
        .check(total, {"operands () -> results [S(1)]"});
  }
  printTotal("indexing, pooling, factories", total);
}
