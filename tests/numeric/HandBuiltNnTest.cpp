// Reductions, losses, transforms, convolutions, pooling, normalization,
// indexing, attention and factories no test model exercises, checked
// numerically on hand-built one-op graphs on every mesh (2, 4, 2x2 ranks).
#include "OneOp.h"

using namespace spmd;
using namespace spmd::numeric::oneop;

namespace {

using Args = std::vector<std::pair<std::string, Argument>>;

constexpr ir::ScalarType kLong = ir::ScalarType::Long;
constexpr ir::ScalarType kBool = ir::ScalarType::Bool;

}  // namespace

TEST_CASE("hand-built reductions without a pending form keep their dims whole") {
  at::manual_seed(31);
  CheckStats total;
  at::Tensor x = randn({8, 4});
  onX(total, "aten.any.default", x.gt(1), {}, {{"y", {}, kBool}}, {"operands [R] -> results [R]"});
  onX(total, "aten.any.dims", x.gt(1), {{"dim", Is({0})}, {"keepdim", B(true)}}, {{"y", {1, 4}, kBool}},
      {"operands [S(1)] -> results [S(1)]"});
  onX(total, "aten.argmax.default", x, {{"dim", I(1)}}, {{"y", {8}, kLong}},
      {"operands [S(0)] -> results [S(0)]"});
  onX(total, "aten.argmin.default", x, {}, {{"y", {}, kLong}}, {"operands [R] -> results [R]"});
  onX(total, "aten.argmin.default", x, {{"dim", I(0)}, {"keepdim", B(true)}}, {{"y", {1, 4}, kLong}},
      {"operands [S(1)] -> results [S(1)]"});
  for (const char* t : {"aten.max.dim", "aten.min.dim"})
    onX(total, t, x, {{"dim", I(-1)}}, {{"v", {8}}, {"i", {8}, kLong}},
        {"operands [S(0)] -> results [S(0)] [S(0)]", "operands [S(0)] -> results [S(0)] [S(0)] on 4"});
  onX(total, "aten.prod.default", x, {}, {{"y", {}}}, {"operands [R] -> results [R]"});
  onX(total, "aten.prod.dim_int", x, {{"dim", I(0)}}, {{"y", {4}}}, {"operands [S(1)] -> results [S(0)]"});
  onX(total, "aten.var.correction", x, {{"dim", Is({1})}, {"correction", I(0)}, {"keepdim", B(true)}},
      {{"y", {8, 1}}}, {"operands [S(0)] -> results [S(0)]"});
  onX(total, "aten.var.correction", x, {}, {{"y", {}}}, {"operands [R] -> results [R]"});
  onX(total, "aten.var.dim", x, {{"dim", Is({0})}, {"unbiased", B(true)}}, {{"y", {4}}},
      {"operands [S(1)] -> results [S(0)]"});
  onX(total, "aten.softmax.int", randn({4, 8, 4}), {{"dim", I(1)}}, {{"y", {4, 8, 4}}},
      {"operands [S(0)] -> results [S(0)]", "operands [S(2)] -> results [S(2)]"});
  onX(total, "aten.log_softmax.int", x, {{"dim", I(-1)}}, {{"y", {8, 4}}},
      {"operands [S(0)] -> results [S(0)]"});
  onX(total, "aten._fft_r2c.default", randn({8, 6}),
      {{"dim", Is({1})}, {"normalization", I(0)}, {"onesided", B(true)}},
      {{"y", {8, 4}, ir::ScalarType::ComplexFloat}},
      {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  onX(total, "aten._fft_c2r.default", at::randn({8, 4}, at::kComplexFloat),
      {{"dim", Is({1})}, {"normalization", I(2)}, {"last_dim_size", I(6)}}, {{"y", {8, 6}}},
      {"operands [S(0)] -> results [S(0)]"});
  printTotal("whole reductions and transforms", total);
}

TEST_CASE("hand-built losses: samples pass through or are summed, classes stay whole") {
  at::manual_seed(32);
  CheckStats total;
  at::Tensor logp = at::log_softmax(randn({8, 5}), 1);
  at::Tensor target = randint(5, {8});
  target.index_put_({3}, -100);  // ignored
  at::Tensor weight = at::rand({5}) + 0.5;
  auto nll = [&](int64_t reduction, std::vector<int64_t> out, const std::vector<std::string>& mustSee) {
    OneOp op;
    auto x = op.in("x", logp), t = op.in("t", target), w = op.in("w", weight);
    op.node(
          "aten.nll_loss_forward.default",
          {{"self", x}, {"target", t}, {"weight", w}, {"reduction", I(reduction)}, {"ignore_index", I(-100)}},
          {{"y", out}, {"tw", {}}})
        .check(total, mustSee);
  };
  nll(0, {8}, {"operands [S(0)] [S(0)] [R] -> results [S(0)] [R]"});
  nll(1, {}, {"operands [R] [R] [R] -> results [R] [R]"});
  nll(2, {},
      {"operands [S(0)] [S(0)] [R] -> results [P(sum)] [P(sum)]",
       "operands [S(0), S(0)] [S(0), S(0)] [R, R] -> results [P(sum), P(sum)] [P(sum), P(sum)] on 2x2"});
  for (int64_t reduction : {0, 1, 2}) {
    OneOp op;
    std::vector<int64_t> gshape = reduction == 0 ? std::vector<int64_t>{8} : std::vector<int64_t>{};
    auto g = op.in("g", randn(gshape)), x = op.in("x", logp), t = op.in("t", target), w = op.in("w", weight);
    auto tw = op.in("tw", at::full({}, 3.5));
    op.node("aten.nll_loss_backward.default",
            {{"grad_output", g},
             {"self", x},
             {"target", t},
             {"weight", w},
             {"reduction", I(reduction)},
             {"ignore_index", I(-100)},
             {"total_weight", tw}},
            {{"y", {8, 5}}})
        .check(total, {reduction == 0 ? "operands [S(0)] [S(0)] [S(0)] [R] [R] -> results [S(0)]"
                                      : "operands [R] [S(0)] [S(0)] [R] [R] -> results [S(0)]",
                       "operands [P(sum)] [R] [R] [R] [R] -> results [P(sum)]"});
  }
  auto ce = [&](const at::Tensor& x, const at::Tensor& t, Args more, std::vector<int64_t> out,
                const std::vector<std::string>& mustSee) {
    OneOp op;
    Args args{{"self", op.in("x", x)}, {"target", op.in("t", t)}};
    args.insert(args.end(), more.begin(), more.end());
    op.node("aten.cross_entropy_loss.default", args, {{"y", out}}).check(total, mustSee);
  };
  at::Tensor logits = randn({8, 5, 4});
  at::Tensor classes = randint(5, {8, 4});
  ce(logits, classes, {{"reduction", I(0)}}, {8, 4},
     {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [S(2)] [S(1)] -> results [S(1)]"});
  ce(logits, classes, {{"reduction", I(2)}, {"label_smoothing", F(0.1)}}, {},
     {"operands [S(0)] [S(0)] -> results [P(sum)]", "operands [S(2)] [S(1)] -> results [P(sum)]"});
  ce(logits, classes, {{"reduction", I(1)}}, {}, {"operands [R] [R] -> results [R]"});
  ce(randn({8, 5}), at::softmax(randn({8, 5}), 1), {{"reduction", I(2)}}, {},
     {"operands [S(0)] [S(0)] -> results [P(sum)]"});
  printTotal("losses", total);
}

TEST_CASE("hand-built convolutions, pooling and sampling") {
  at::manual_seed(33);
  CheckStats total;
  auto conv = [&](const std::string& target, std::vector<int64_t> x, std::vector<int64_t> w,
                  std::vector<int64_t> out, Args more, const std::vector<std::string>& mustSee) {
    OneOp op;
    Args args{{"input", op.in("x", randn(x))},
              {"weight", op.in("w", randn(w))},
              {"bias", op.in("b", randn({w[0]}))}};
    args.insert(args.end(), more.begin(), more.end());
    op.node(target, args, {{"y", out}}).check(total, mustSee);
  };
  conv("aten.conv1d.default", {4, 4, 8}, {8, 4, 3}, {4, 8, 8}, {{"padding", Is({1})}},
       {"operands [S(0)] [R] [R] -> results [S(0)]", "operands [R] [S(0)] [S(0)] -> results [S(1)]",
        "operands [S(1)] [S(1)] [P(sum)] -> results [P(sum)]"});
  conv("aten.conv2d.default", {2, 4, 4, 4}, {8, 4, 1, 1}, {2, 8, 4, 4}, {},
       {"operands [S(2)] [R] [R] -> results [S(2)]", "operands [S(1)] [S(1)] [P(sum)] -> results [P(sum)]"});
  conv("aten.conv3d.default", {2, 4, 4, 4, 4}, {4, 4, 3, 3, 3}, {2, 4, 2, 2, 2}, {{"stride", Is({1, 1, 1})}},
       {"operands [S(0)] [R] [R] -> results [S(0)]"});
  at::Tensor img = randn({4, 4, 8, 8});
  onX(total, "aten.max_pool2d.default", img, {{"kernel_size", Is({2, 2})}, {"padding", Is({1, 1})}},
      {{"y", {4, 4, 5, 5}}}, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]"});
  onX(total, "aten.adaptive_avg_pool2d.default", img, {{"output_size", Is({3, 3})}}, {{"y", {4, 4, 3, 3}}},
      {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"});
  at::Tensor vol = randn({2, 4, 4, 4, 4});
  onX(total, "aten.avg_pool3d.default", vol,
      {{"kernel_size", Is({2, 2, 2})}, {"count_include_pad", B(false)}}, {{"y", {2, 4, 2, 2, 2}}},
      {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"});
  onX(total, "aten.max_pool3d_with_indices.default", vol, {{"kernel_size", Is({2, 2, 2})}},
      {{"y", {2, 4, 2, 2, 2}}, {"i", {2, 4, 2, 2, 2}, kLong}}, {"operands [S(1)] -> results [S(1)] [S(1)]"});
  onX(total, "aten._adaptive_avg_pool3d.default", vol, {{"output_size", Is({1, 2, 1})}},
      {{"y", {2, 4, 1, 2, 1}}},
      {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  onX(total, "aten.upsample_bilinear2d.vec", randn({2, 4, 4, 4}),
      {{"output_size", Is({8, 6})}, {"align_corners", B(true)}, {"scale_factors", Argument::none()}},
      {{"y", {2, 4, 8, 6}}}, {"operands [S(1)] -> results [S(1)]", "operands [P(sum)] -> results [P(sum)]"},
      "input");
  onX(total, "aten.upsample_nearest2d.vec", randn({2, 4, 4, 4}),
      {{"output_size", Argument::none()}, {"scale_factors", Fs({2.0, 2.0})}}, {{"y", {2, 4, 8, 8}}},
      {"operands [S(0)] -> results [S(0)]"}, "input");
  {
    OneOp op;
    auto x = op.in("x", randn({2, 4, 8, 8})), grid = op.in("g", at::rand({2, 4, 6, 2}) * 2 - 1);
    op.node("aten.grid_sampler_2d.default",
            {{"input", x},
             {"grid", grid},
             {"interpolation_mode", I(0)},
             {"padding_mode", I(1)},
             {"align_corners", B(false)}},
            {{"y", {2, 4, 4, 6}}})
        .check(total, {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [S(1)] [R] -> results [S(1)]",
                       "operands [R] [S(1)] -> results [S(2)]", "operands [P(sum)] [R] -> results [P(sum)]"});
  }
  onX(total, "aten.col2im.default", randn({2, 16, 9}),
      {{"output_size", Is({4, 4})},
       {"kernel_size", Is({2, 2})},
       {"dilation", Is({1, 1})},
       {"padding", Is({0, 0})},
       {"stride", Is({1, 1})}},
      {{"y", {2, 4, 4, 4}}}, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]"});
  printTotal("convolutions, pooling, sampling", total);
}

TEST_CASE("hand-built group and layer norms") {
  at::manual_seed(34);
  CheckStats total;
  at::Tensor x = randn({4, 4, 8});
  at::Tensor w = randn({4}), b = randn({4});
  {
    OneOp op;
    auto in = op.in("x", randn({4, 8, 4})), wt = op.in("w", w), bs = op.in("b", b);
    op.node("aten.layer_norm.default",
            {{"input", in}, {"normalized_shape", Is({4})}, {"weight", wt}, {"bias", bs}}, {{"y", {4, 8, 4}}})
        .check(total, {"operands [S(1)] [R] [R] -> results [S(1)]",
                       "operands [S(0), S(1)] [R, R] [R, R] -> results [S(0), S(1)] on 2x2"});
  }
  {
    OneOp op;
    auto in = op.in("x", x), wt = op.in("w", w), bs = op.in("b", b);
    op.node("aten.group_norm.default", {{"input", in}, {"num_groups", I(2)}, {"weight", wt}, {"bias", bs}},
            {{"y", {4, 4, 8}}})
        .check(total, {"operands [S(0)] [R] [R] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto in = op.in("x", x), wt = op.in("w", w), bs = op.in("b", b);
    op.node("aten.native_group_norm.default",
            {{"input", in},
             {"weight", wt},
             {"bias", bs},
             {"N", I(4)},
             {"C", I(4)},
             {"HxW", I(8)},
             {"group", I(2)},
             {"eps", F(1e-5)}},
            {{"y", {4, 4, 8}}, {"m", {4, 2}}, {"r", {4, 2}}})
        .check(total, {"operands [R] [R] [R] -> results [R] [R] [R]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({4, 4, 8})), in = op.in("x", x), m = op.in("m", randn({4, 2}));
    auto r = op.in("r", at::rand({4, 2}) + 0.5), wt = op.in("w", w);
    op.node("aten.native_group_norm_backward.default",
            {{"grad_out", g},
             {"input", in},
             {"mean", m},
             {"rstd", r},
             {"weight", wt},
             {"N", I(4)},
             {"C", I(4)},
             {"HxW", I(8)},
             {"group", I(2)},
             {"output_mask", Bs({1, 1, 1})}},
            {{"gx", {4, 4, 8}}, {"gw", {4}}, {"gb", {4}}})
        .check(total, {"operands [R] [R] [R] [R] [R] -> results [R] [R] [R]"});
  }
  printTotal("group and layer norms", total);
}

TEST_CASE("hand-built batch norms: channels pass through, batch statistics need the whole batch") {
  at::manual_seed(38);
  CheckStats total;
  at::Tensor x = randn({4, 4, 8});
  at::Tensor w = randn({4}), b = randn({4}), rm = randn({4}), rv = at::rand({4}) + 0.5;
  for (bool training : {false, true}) {
    OneOp op;
    auto in = op.in("x", x), wt = op.in("w", w), bs = op.in("b", b), mean = op.in("rm", rm),
         var = op.in("rv", rv);
    op.node("aten.batch_norm.default",
            {{"input", in},
             {"weight", wt},
             {"bias", bs},
             {"running_mean", mean},
             {"running_var", var},
             {"training", B(training)},
             {"momentum", F(0.1)},
             {"eps", F(1e-5)},
             {"cudnn_enabled", B(false)}},
            {{"y", {4, 4, 8}}})
        .check(total, {training ? "operands [R] [R] [R] [R] [R] -> results [R]"
                                : "operands [S(2)] [R] [R] [R] [R] -> results [S(2)]",
                       "operands [S(1)] [S(0)] [S(0)] [S(0)] [S(0)] -> results [S(1)]"});
  }
  for (bool update : {false, true}) {
    OneOp op;
    auto g = op.in("g", randn({4, 4, 8})), in = op.in("x", x), wt = op.in("w", w), mean = op.in("rm", rm);
    auto var = op.in("rv", rv), sm = op.in("sm", randn({4})), sv = op.in("sv", at::rand({4}) + 0.5);
    auto reserve = op.in("res", at::zeros({0}, at::kByte));
    op.node("aten.batch_norm_backward.default",
            {{"grad_out", g},
             {"input", in},
             {"weight", wt},
             {"running_mean", mean},
             {"running_var", var},
             {"save_mean", sm},
             {"save_var", sv},
             {"update", B(update)},
             {"eps", F(1e-5)},
             {"output_mask", Bs({1, 1, 1})},
             {"reserve", reserve}},
            {{"gx", {4, 4, 8}}, {"gw", {4}}, {"gb", {4}}})
        .check(total,
               {update ? "operands [R] [R] [R] [R] [R] [R] [R] [R] -> results [R] [R] [R]"
                       : "operands [S(0)] [S(0)] [R] [R] [R] [R] [R] [R] -> results [S(0)] [P(sum)] [P(sum)]",
                "operands [S(1)] [S(1)] [S(0)] [S(0)] [S(0)] [S(0)] [S(0)] [R] -> results [S(1)] [S(0)] "
                "[S(0)]"});
  }
  printTotal("batch norms", total);
}

TEST_CASE("hand-built indexing: argsort, scatter_reduce, masked_scatter, nonzero, embedding bags") {
  at::manual_seed(35);
  CheckStats total;
  onX(total, "aten.argsort.default", randn({8, 4}), {{"dim", I(0)}, {"descending", B(true)}},
      {{"y", {8, 4}, kLong}}, {"operands [S(1)] -> results [S(1)]"});
  onX(total, "aten.argsort.stable", randn({8, 4}), {{"stable", B(true)}}, {{"y", {8, 4}, kLong}},
      {"operands [S(0)] -> results [S(0)]"});
  at::Tensor index = randint(10, {4, 8});
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (bool includeSelf : {true, false}) {
      OneOp op;
      auto x = op.in("x", randn({4, 10})), i = op.in("i", index), s = op.in("s", randn({4, 8}));
      std::vector<std::string> mustSee = {"operands [S(0)] [S(0)] [S(0)] -> results [S(0)]"};
      std::string name = reduce;
      if (includeSelf && name == "sum")
        mustSee.push_back("operands [P(sum)] [S(1)] [S(1)] -> results [P(sum)]");
      if (includeSelf && name == "amax")
        mustSee.push_back("operands [P(max)] [S(1)] [S(1)] -> results [P(max)]");
      if (includeSelf && name == "amin")
        mustSee.push_back("operands [P(min)] [S(1)] [S(1)] -> results [P(min)]");
      op.node("aten.scatter_reduce.two",
              {{"self", x},
               {"dim", I(1)},
               {"index", i},
               {"src", s},
               {"reduce", Str(reduce)},
               {"include_self", B(includeSelf)}},
              {{"y", {4, 10}}})
          .check(total, mustSee);
    }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 4})), m = op.in("m", randn({8, 4}).gt(0)), s = op.in("s", randn({40}));
    op.node("aten.masked_scatter.default", {{"self", x}, {"mask", m}, {"source", s}}, {{"y", {8, 4}}})
        .check(total, {"operands [R] [R] [R] -> results [R]"});
  }
  {
    at::Tensor v = randn({8, 4}).gt(0);
    OneOp op;
    auto x = op.in("x", v);
    op.node("aten.nonzero.default", {{"self", x}}, {{"y", {v.sum().item<int64_t>(), 2}, kLong}})
        .check(total, {"operands [R] -> results [R]"});
  }
  for (int64_t mode : {0, 1, 2}) {
    OneOp op;
    auto w = op.in("w", randn({10, 4})), i = op.in("i", randint(10, {12})),
         o = op.in("o", at::arange(0, 12, 3));
    std::vector<int64_t> maxIdx = mode == 2 ? std::vector<int64_t>{4, 4} : std::vector<int64_t>{4};
    op.node("aten._embedding_bag.default", {{"weight", w}, {"indices", i}, {"offsets", o}, {"mode", I(mode)}},
            {{"y", {4, 4}}, {"o2b", {12}, kLong}, {"bs", {4}, kLong}, {"mi", maxIdx, kLong}})
        .check(total, {mode == 2 ? "operands [S(1)] [R] [R] -> results [S(1)] [R] [R] [S(1)]"
                                 : "operands [S(1)] [R] [R] -> results [S(1)] [R] [R] [R]"});
  }
  printTotal("indexing", total);
}

TEST_CASE("hand-built attention and its backward on CPU") {
  at::manual_seed(36);
  CheckStats total;
  at::Tensor q = randn({2, 4, 8, 4}), k = randn({2, 4, 6, 4}), v = randn({2, 4, 6, 8});
  for (bool causal : {false, true}) {
    OneOp op;
    auto qv = op.in("q", q), kv = op.in("k", k), vv = op.in("v", v);
    op.node("aten.scaled_dot_product_attention.default",
            {{"query", qv}, {"key", kv}, {"value", vv}, {"is_causal", B(causal)}}, {{"o", {2, 4, 8, 8}}})
        .check(total, {"operands [S(1)] [S(1)] [S(1)] -> results [S(1)]",
                       "operands [R] [R] [S(3)] -> results [S(3)]",
                       causal ? "operands [S(0)] [S(0)] [S(0)] -> results [S(0)]"
                              : "operands [S(2)] [R] [R] -> results [S(2)]"});
  }
  // The CPU flash kernel wants one head size for values too.
  v = randn({2, 4, 6, 4});
  {
    OneOp op;
    auto qv = op.in("q", q), kv = op.in("k", k), vv = op.in("v", v), mask = op.in("m", randn({8, 6}));
    op.node("aten._scaled_dot_product_flash_attention_for_cpu.default",
            {{"query", qv}, {"key", kv}, {"value", vv}, {"attn_mask", mask}},
            {{"o", {2, 4, 8, 4}}, {"lse", {2, 4, 8}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] [R] -> results [S(0)] [S(0)]",
                       "operands [S(2)] [R] [R] [S(0)] -> results [S(2)] [S(2)]"});
  }
  {
    OneOp op;
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v);
    auto go = op.in("go", randn({2, 4, 8, 4})), qv = op.in("q", q), kv = op.in("k", k), vv = op.in("v", v);
    auto ov = op.in("o", out), lv = op.in("lse", lse);
    op.node("aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
            {{"grad_out", go},
             {"query", qv},
             {"key", kv},
             {"value", vv},
             {"out", ov},
             {"logsumexp", lv},
             {"dropout_p", F(0.0)},
             {"is_causal", B(false)}},
            {{"gq", {2, 4, 8, 4}}, {"gk", {2, 4, 6, 4}}, {"gv", {2, 4, 6, 4}}})
        .check(total, {"operands [S(1)] [S(1)] [S(1)] [S(1)] [S(1)] [S(1)] -> results [S(1)] [S(1)] [S(1)]",
                       "operands [S(2)] [S(2)] [R] [R] [S(2)] [S(2)] -> results [S(2)] [P(sum)] [P(sum)]"});
  }
  printTotal("attention", total);
}

TEST_CASE("hand-built factories and asserts") {
  at::manual_seed(37);
  CheckStats total;
  for (const char* t : {"aten.new_ones.default", "aten.new_zeros.default", "aten.new_empty.default"})
    onX(total, t, randn({8, 4}), {{"size", Is({4, 8})}}, {{"y", {4, 8}}},
        {"operands [S(0)] -> results [R]", "operands [R] -> results [S(1)]",
         "operands [P(sum)] -> results [R]"});
  {
    OneOp op;
    op.node("aten.empty_strided.default", {{"size", Is({8, 4})}, {"stride", Is({1, 8})}}, {{"y", {8, 4}}})
        .check(total, {"operands () -> results [R]"});
  }
  {
    OneOp op;
    op.node("aten.randperm.default", {{"n", I(8)}}, {{"y", {8}, kLong}})
        .check(total, {"operands () -> results [R]"});
  }
  {
    OneOp op;
    op.node("aten.arange.start", {{"start", I(2)}, {"end", I(10)}}, {{"y", {8}, kLong}})
        .check(total, {"operands () -> results [R]"});
  }
  {
    OneOp op;
    auto ok = op.in("ok", at::ones({}, at::kBool)), token = op.in("t", at::empty({0}));
    op.node("aten._functional_assert_async.msg",
            {{"self", ok}, {"assert_msg", Str("ok")}, {"dep_token", token}}, {{"y", {0}}})
        .check(total, {"operands [R] [R] -> results [R]"});
  }
  printTotal("factories and asserts", total);
}
