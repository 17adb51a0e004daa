// Loss parallelism (passes/ExpandLossParallel.cpp): log-softmax, its
// backward, the target's pick (gather) and the backward's one-hot write
// (scatter) with the class dim sharded, on 2, 4 and 2x2 simulated ranks
// against the op unsharded. Each case names the class-sharded strategy it
// must have run.
#include "OneOp.h"

using namespace spmd;
using namespace spmd::numeric::oneop;

TEST_CASE("loss parallel: log-softmax and its backward on class shards", "[numeric][loss_parallel]") {
  at::manual_seed(71);
  CheckStats total;
  {
    OneOp op;
    // Large logits: a local max that is not the global one must not overflow.
    auto x = op.in("x", randn({8, 16}) * 30);
    op.node("aten._log_softmax.default", {{"self", x}, {"dim", I(1)}, {"half_to_float", B(false)}},
            {{"y", {8, 16}}})
        .check(total, {"operands [S(1)] -> results [S(1)]", "operands [S(1)] -> results [S(1)] on 4",
                       "operands [S(0), S(1)] -> results [S(0), S(1)] on 2x2",
                       "operands [S(1), S(1)] -> results [S(1), S(1)] on 2x2"});
  }
  {
    OneOp op;  // 3-D logits, class dim last
    auto x = op.in("x", randn({2, 4, 8}));
    op.node("aten._log_softmax.default", {{"self", x}, {"dim", I(-1)}, {"half_to_float", B(false)}},
            {{"y", {2, 4, 8}}})
        .check(total, {"operands [S(2)] -> results [S(2)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 16})), y = op.in("y", at::log_softmax(randn({8, 16}), -1));
    op.node("aten._log_softmax_backward_data.default",
            {{"grad_output", g},
             {"output", y},
             {"dim", I(1)},
             {"input_dtype", Argument::scalarType(ir::ScalarType::Float)}},
            {{"z", {8, 16}}})
        .check(total,
               {"operands [S(1)] [S(1)] -> results [S(1)]", "operands [S(1)] [S(1)] -> results [S(1)] on 4",
                "operands [S(1), P(sum)] [S(1), R] -> results [S(1), P(sum)] on 2x2"});
  }
  printTotal("loss parallel log-softmax", total);
}

TEST_CASE("loss parallel: the target's pick and one-hot write on class shards", "[numeric][loss_parallel]") {
  at::manual_seed(72);
  CheckStats total;
  at::Tensor target = randint(16, {8, 1});
  target.index_put_({0, 0}, 15);  // the last class, on the last rank
  target.index_put_({1, 0}, 0);
  {
    OneOp op;
    auto x = op.in("x", at::log_softmax(randn({8, 16}), 1)), t = op.in("t", target);
    op.node("aten.gather.default", {{"self", x}, {"dim", I(1)}, {"index", t}}, {{"y", {8, 1}}})
        .check(total,
               {"operands [S(1)] [R] -> results [P(sum)]", "operands [S(1)] [R] -> results [P(sum)] on 4",
                "operands [S(0), S(1)] [S(0), R] -> results [S(0), P(sum)] on 2x2"});
  }
  {
    OneOp op;  // -inf log-probabilities elsewhere must not leak into the pick
    at::Tensor x = at::log_softmax(randn({8, 16}), 1);
    x.index_put_({2, 3}, -std::numeric_limits<float>::infinity());
    auto xv = op.in("x", x), t = op.in("t", target);
    op.node("aten.gather.default", {{"self", xv}, {"dim", I(-1)}, {"index", t}}, {{"y", {8, 1}}})
        .check(total, {"operands [S(1)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto z = op.in("z", at::zeros({8, 16})), t = op.in("t", target);
    op.node("aten.scatter.value", {{"self", z}, {"dim", I(1)}, {"index", t}, {"value", F(-1.0)}},
            {{"y", {8, 16}}})
        .check(total, {"operands [S(1)] [R] -> results [S(1)]", "operands [S(1)] [R] -> results [S(1)] on 4",
                       "operands [S(0), S(1)] [S(0), R] -> results [S(0), S(1)] on 2x2"});
  }
  {
    OneOp op;
    auto z = op.in("z", randn({8, 16})), t = op.in("t", target), s = op.in("s", randn({8, 1}));
    op.node("aten.scatter.src", {{"self", z}, {"dim", I(1)}, {"index", t}, {"src", s}}, {{"y", {8, 16}}})
        .check(total, {"operands [S(1)] [R] [R] -> results [S(1)]"});
  }
  printTotal("loss parallel pick and write", total);
}
