// The hand-built samples (see OpSamples.h) of convolution, pooling,
// normalization, indexing, attention, factory and metadata ops.
#include "OpSamples.h"

namespace spmd::testing {
namespace {

using namespace samples;

void convSamples(std::vector<OpSample>& s) {
  s.push_back(
      {"aten._adaptive_avg_pool2d.default", image({{"output_size", Is({1, 1})}}, {{"y", {2, 4, 1, 1}}})});
  s.push_back(
      {"aten.adaptive_avg_pool2d.default", image({{"output_size", Is({2, 2})}}, {{"y", {2, 4, 2, 2}}})});
  s.push_back({"aten._adaptive_avg_pool2d_backward.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"grad_output", T(g.input("g", {2, 4, 1, 1}))},
                                 {"self", T(g.input("x", {2, 4, 8, 8}))}};
                   },
                   {{"y", {2, 4, 8, 8}}})});
  s.push_back({"aten._adaptive_avg_pool3d.default",
               image({{"output_size", Is({1, 1, 1})}}, {{"y", {2, 4, 1, 1, 1}}}, {2, 4, 4, 4, 4})});
  s.push_back({"aten.avg_pool2d.default", image({{"kernel_size", Is({2, 2})}}, {{"y", {2, 4, 4, 4}}})});
  s.push_back({"aten.avg_pool2d_backward.default", op(
                                                       [](TestGraph& g) {
                                                         return Args{
                                                             {"grad_output", T(g.input("g", {2, 4, 4, 4}))},
                                                             {"self", T(g.input("x", {2, 4, 8, 8}))},
                                                             {"kernel_size", Is({2, 2})},
                                                             {"stride", Is({2, 2})},
                                                             {"padding", Is({0, 0})},
                                                             {"ceil_mode", B(false)},
                                                             {"count_include_pad", B(true)}};
                                                       },
                                                       {{"y", {2, 4, 8, 8}}})});
  s.push_back({"aten.avg_pool3d.default",
               image({{"kernel_size", Is({2, 2, 2})}}, {{"y", {2, 4, 2, 2, 2}}}, {2, 4, 4, 4, 4})});
  s.push_back({"aten.max_pool2d.default", image({{"kernel_size", Is({2, 2})}}, {{"y", {2, 4, 4, 4}}})});
  s.push_back({"aten.max_pool3d_with_indices.default",
               image({{"kernel_size", Is({2, 2, 2})}}, {{"y", {2, 4, 2, 2, 2}}, {"i", {2, 4, 2, 2, 2}, i64}},
                     {2, 4, 4, 4, 4})});
  s.push_back({"aten.upsample_bilinear2d.vec", op(
                                                   [](TestGraph& g) {
                                                     return Args{{"input", T(g.input("x", {2, 4, 4, 4}))},
                                                                 {"output_size", Is({8, 8})},
                                                                 {"align_corners", B(false)}};
                                                   },
                                                   {{"y", {2, 4, 8, 8}}})});
  s.push_back({"aten.upsample_nearest2d.vec",
               op(
                   [](TestGraph& g) {
                     return Args{{"input", T(g.input("x", {2, 4, 4, 4}))}, {"output_size", Is({8, 8})}};
                   },
                   {{"y", {2, 4, 8, 8}}})});
  s.push_back({"aten.grid_sampler_2d.default", op(
                                                   [](TestGraph& g) {
                                                     return Args{{"input", T(g.input("x", {2, 4, 8, 8}))},
                                                                 {"grid", T(g.input("gr", {2, 6, 6, 2}))},
                                                                 {"interpolation_mode", I(0)},
                                                                 {"padding_mode", I(0)},
                                                                 {"align_corners", B(false)}};
                                                   },
                                                   {{"y", {2, 4, 6, 6}}})});
  s.push_back({"aten.col2im.default", image({{"output_size", Is({4, 4})},
                                             {"kernel_size", Is({2, 2})},
                                             {"dilation", Is({1, 1})},
                                             {"padding", Is({0, 0})},
                                             {"stride", Is({1, 1})}},
                                            {{"y", {2, 3, 4, 4}}}, {2, 12, 9})});
  auto conv = [](std::vector<int64_t> x, std::vector<int64_t> w, std::vector<int64_t> y) {
    return op(
        [x, w](TestGraph& g) {
          return Args{{"input", T(g.input("x", x))},
                      {"weight", T(g.input("w", w))},
                      {"bias", T(g.input("b", {w[0]}))}};
        },
        {{"y", y}});
  };
  s.push_back({"aten.conv1d.default", conv({2, 4, 8}, {6, 4, 3}, {2, 6, 6})});
  s.push_back({"aten.conv2d.default", conv({2, 4, 8, 8}, {6, 4, 1, 1}, {2, 6, 8, 8})});
  s.push_back({"aten.conv3d.default", conv({2, 4, 4, 4, 4}, {6, 4, 3, 3, 3}, {2, 6, 2, 2, 2})});
}

void batchNormSamples(std::vector<OpSample>& s) {
  auto vec = [](TestGraph& g, const char* name) { return T(g.input(name, {4})); };
  s.push_back({"aten._native_batch_norm_legit.default", op(
                                                            [vec](TestGraph& g) {
                                                              return Args{
                                                                  {"input", T(g.input("x", {2, 4, 8}))},
                                                                  {"weight", vec(g, "w")},
                                                                  {"bias", vec(g, "b")},
                                                                  {"running_mean", vec(g, "rm")},
                                                                  {"running_var", vec(g, "rv")},
                                                                  {"training", B(true)},
                                                                  {"momentum", F(0.1)},
                                                                  {"eps", F(1e-5)}};
                                                            },
                                                            {{"y", {2, 4, 8}}, {"m", {4}}, {"r", {4}}})});
  s.push_back({"aten._native_batch_norm_legit.no_stats", op(
                                                             [vec](TestGraph& g) {
                                                               return Args{
                                                                   {"input", T(g.input("x", {2, 4, 8}))},
                                                                   {"weight", vec(g, "w")},
                                                                   {"bias", vec(g, "b")},
                                                                   {"training", B(true)},
                                                                   {"momentum", F(0.1)},
                                                                   {"eps", F(1e-5)}};
                                                             },
                                                             {{"y", {2, 4, 8}}, {"m", {4}}, {"r", {4}}})});
  s.push_back({"aten.batch_norm.default", op(
                                              [vec](TestGraph& g) {
                                                return Args{{"input", T(g.input("x", {2, 4, 8}))},
                                                            {"weight", vec(g, "w")},
                                                            {"bias", vec(g, "b")},
                                                            {"running_mean", vec(g, "rm")},
                                                            {"running_var", vec(g, "rv")},
                                                            {"training", B(false)},
                                                            {"momentum", F(0.1)},
                                                            {"eps", F(1e-5)},
                                                            {"cudnn_enabled", B(false)}};
                                              },
                                              {{"y", {2, 4, 8}}})});
  auto bnBackward = [vec](const char* train) {
    return op(
        [vec, train](TestGraph& g) {
          return Args{{"grad_out", T(g.input("g", {2, 4, 8}))},
                      {"input", T(g.input("x", {2, 4, 8}))},
                      {"weight", vec(g, "w")},
                      {"running_mean", vec(g, "rm")},
                      {"running_var", vec(g, "rv")},
                      {train, B(false)},
                      {"eps", F(1e-5)},
                      {"output_mask", Bs({1, 1, 1})}};
        },
        {{"gx", {2, 4, 8}}, {"gw", {4}}, {"gb", {4}}});
  };
  s.push_back({"aten.batch_norm_backward.default", bnBackward("update")});
  s.push_back({"aten.native_batch_norm_backward.default", bnBackward("train")});
}

void groupLayerNormSamples(std::vector<OpSample>& s) {
  auto vec = [](TestGraph& g, const char* name) { return T(g.input(name, {4})); };
  s.push_back({"aten.group_norm.default", op(
                                              [vec](TestGraph& g) {
                                                return Args{{"input", T(g.input("x", {2, 4, 8}))},
                                                            {"num_groups", I(2)},
                                                            {"weight", vec(g, "w")},
                                                            {"bias", vec(g, "b")}};
                                              },
                                              {{"y", {2, 4, 8}}})});
  s.push_back({"aten.native_group_norm.default", op(
                                                     [vec](TestGraph& g) {
                                                       return Args{{"input", T(g.input("x", {2, 4, 8}))},
                                                                   {"weight", vec(g, "w")},
                                                                   {"bias", vec(g, "b")},
                                                                   {"N", I(2)},
                                                                   {"C", I(4)},
                                                                   {"HxW", I(8)},
                                                                   {"group", I(2)},
                                                                   {"eps", F(1e-5)}};
                                                     },
                                                     {{"y", {2, 4, 8}}, {"m", {2, 2}}, {"r", {2, 2}}})});
  s.push_back(
      {"aten.native_group_norm_backward.default", op(
                                                      [vec](TestGraph& g) {
                                                        return Args{{"grad_out", T(g.input("g", {2, 4, 8}))},
                                                                    {"input", T(g.input("x", {2, 4, 8}))},
                                                                    {"mean", T(g.input("m", {2, 2}))},
                                                                    {"rstd", T(g.input("r", {2, 2}))},
                                                                    {"weight", vec(g, "w")},
                                                                    {"N", I(2)},
                                                                    {"C", I(4)},
                                                                    {"HxW", I(8)},
                                                                    {"group", I(2)},
                                                                    {"output_mask", Bs({1, 1, 1})}};
                                                      },
                                                      {{"gx", {2, 4, 8}}, {"gw", {4}}, {"gb", {4}}})});
  s.push_back(
      {"aten.native_layer_norm_backward.default", op(
                                                      [vec](TestGraph& g) {
                                                        return Args{{"grad_out", T(g.input("g", {2, 8, 4}))},
                                                                    {"input", T(g.input("x", {2, 8, 4}))},
                                                                    {"normalized_shape", Is({4})},
                                                                    {"mean", T(g.input("m", {2, 8, 1}))},
                                                                    {"rstd", T(g.input("r", {2, 8, 1}))},
                                                                    {"weight", vec(g, "w")},
                                                                    {"bias", vec(g, "b")},
                                                                    {"output_mask", Bs({1, 1, 1})}};
                                                      },
                                                      {{"gx", {2, 8, 4}}, {"gw", {4}}, {"gb", {4}}})});
  s.push_back({"aten.layer_norm.default", op(
                                              [vec](TestGraph& g) {
                                                return Args{{"input", T(g.input("x", {2, 8, 4}))},
                                                            {"normalized_shape", Is({4})},
                                                            {"weight", vec(g, "w")},
                                                            {"bias", vec(g, "b")}};
                                              },
                                              {{"y", {2, 8, 4}}})});
}

void indexingSamples(std::vector<OpSample>& s) {
  s.push_back({"aten._embedding_bag.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"weight", T(g.input("w", {10, 6}))},
                                 {"indices", T(g.input("i", {8}, i64))},
                                 {"offsets", T(g.input("o", {4}, i64))},
                                 {"mode", I(0)}};
                   },
                   {{"y", {4, 6}}, {"o2b", {8}, i64}, {"bs", {4}, i64}, {"mi", {4}, i64}})});
  s.push_back({"aten.embedding_dense_backward.default", op(
                                                            [](TestGraph& g) {
                                                              return Args{
                                                                  {"grad_output", T(g.input("g", {2, 8, 6}))},
                                                                  {"indices", T(g.input("i", {2, 8}, i64))},
                                                                  {"num_weights", I(10)},
                                                                  {"padding_idx", I(-1)},
                                                                  {"scale_grad_by_freq", B(false)}};
                                                            },
                                                            {{"y", {10, 6}}})});
  s.push_back({"aten.index.Tensor", op(
                                        [](TestGraph& g) {
                                          return Args{
                                              {"self", T(g.input("x", {10, 6}))},
                                              {"indices", optionalTensors({g.input("i", {4, 2}, i64)})}};
                                        },
                                        {{"y", {4, 2, 6}}})});
  s.push_back({"aten.index_select.default", op(
                                                [](TestGraph& g) {
                                                  return Args{{"self", T(g.input("x", {8, 10}))},
                                                              {"dim", I(1)},
                                                              {"index", T(g.input("i", {4}, i64))}};
                                                },
                                                {{"y", {8, 4}}})});
  s.push_back({"aten.scatter_add.default", op(
                                               [](TestGraph& g) {
                                                 return Args{{"self", T(g.input("x", {4, 10}))},
                                                             {"dim", I(1)},
                                                             {"index", T(g.input("i", {4, 6}, i64))},
                                                             {"src", T(g.input("s", {4, 6}))}};
                                               },
                                               {{"y", {4, 10}}})});
  s.push_back({"aten.argsort.default", onX({{"dim", I(1)}}, {"y", {8, 6}, i64})});
  s.push_back({"aten.sort.default", op(
                                        [](TestGraph& g) {
                                          return Args{{"self", T(g.input("x", {8, 6}))}, {"dim", I(1)}};
                                        },
                                        {{"v", {8, 6}}, {"i", {8, 6}, i64}})});
  s.push_back({"aten.masked_scatter.default", op(
                                                  [](TestGraph& g) {
                                                    return Args{{"self", T(g.input("x", {8, 6}))},
                                                                {"mask", T(g.input("m", {8, 6}, b8))},
                                                                {"source", T(g.input("s", {48}))}};
                                                  },
                                                  {{"y", {8, 6}}})});
  s.push_back({"aten.nonzero.default", onX({}, {"y", {20, 2}, i64})});
  s.push_back({"aten.scatter_reduce.two", op(
                                              [](TestGraph& g) {
                                                return Args{{"self", T(g.input("x", {4, 10}))},
                                                            {"dim", I(1)},
                                                            {"index", T(g.input("i", {4, 6}, i64))},
                                                            {"src", T(g.input("s", {4, 6}))},
                                                            {"reduce", S("amax")}};
                                              },
                                              {{"y", {4, 10}}})});
}

void attentionSamples(std::vector<OpSample>& s) {
  auto qkv = [](TestGraph& g) {
    return Args{{"query", T(g.input("q", {2, 4, 16, 8}))},
                {"key", T(g.input("k", {2, 4, 12, 8}))},
                {"value", T(g.input("v", {2, 4, 12, 6}))}};
  };
  std::vector<Out> out = {{"o", {2, 4, 16, 6}}};
  s.push_back({"aten.scaled_dot_product_attention.default", op(qkv, out)});
  s.push_back({"aten._scaled_dot_product_flash_attention_for_cpu.default",
               op(qkv, {{"o", {2, 4, 16, 6}}, {"lse", {2, 4, 16}}})});
  s.push_back({"aten._scaled_dot_product_flash_attention.default", op(qkv, {{"o", {2, 4, 16, 6}},
                                                                            {"lse", {2, 4, 16}},
                                                                            {"", {}},
                                                                            {"", {}},
                                                                            {"", {}},
                                                                            {"", {}},
                                                                            {"rng", {2}, i64},
                                                                            {"unused", {}},
                                                                            {"dbg", {}}})});
  s.push_back({"aten._scaled_dot_product_efficient_attention.default",
               op(
                   [qkv](TestGraph& g) {
                     Args a = qkv(g);
                     a.push_back({"compute_log_sumexp", B(true)});
                     return a;
                   },
                   {{"o", {2, 4, 16, 6}}, {"lse", {2, 4, 32}}, {"seed", {}, i64}, {"offset", {}, i64}})});
  auto backward = [qkv](Args more) {
    return [qkv, more](TestGraph& g) {
      Args a{{"grad_out", T(g.input("go", {2, 4, 16, 6}))}};
      Args b = qkv(g);
      a.insert(a.end(), b.begin(), b.end());
      a.push_back({"out", T(g.input("o", {2, 4, 16, 6}))});
      a.push_back({"logsumexp", T(g.input("lse", {2, 4, 16}))});
      a.insert(a.end(), more.begin(), more.end());
      return a;
    };
  };
  std::vector<Out> grads = {{"gq", {2, 4, 16, 8}}, {"gk", {2, 4, 12, 8}}, {"gv", {2, 4, 12, 6}}};
  s.push_back({"aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
               op(backward({{"dropout_p", F(0.0)}, {"is_causal", B(false)}}), grads)});
  s.push_back({"aten._scaled_dot_product_flash_attention_backward.default",
               op(backward({{"dropout_p", F(0.0)}, {"is_causal", B(true)}}), grads)});
  std::vector<Out> grads4 = grads;
  grads4.push_back({"", {}});
  s.push_back({"aten._scaled_dot_product_efficient_attention_backward.default",
               op(backward({{"dropout_p", F(0.0)}, {"grad_input_mask", Bs({1, 1, 1, 0})}}), grads4)});
}

void factorySamples(std::vector<OpSample>& s) {
  s.push_back({"aten.empty_strided.default", op(
                                                 [](TestGraph&) {
                                                   return Args{{"size", Is({8, 6})}, {"stride", Is({6, 1})}};
                                                 },
                                                 {{"y", {8, 6}}})});
  for (const char* t : {"aten.new_empty.default", "aten.new_ones.default", "aten.new_zeros.default"})
    s.push_back({t, onX({{"size", Is({4, 2})}}, {"y", {4, 2}})});
  s.push_back({"aten.randperm.default", op([](TestGraph&) { return Args{{"n", I(8)}}; }, {{"y", {8}, i64}})});
  for (const char* t : {"aten.rand.default", "aten.randn.default"})
    s.push_back({t, op([](TestGraph&) { return Args{{"size", Is({8, 6})}}; }, {{"y", {8, 6}}})});
  s.push_back({"aten.arange.start", op(
                                        [](TestGraph&) {
                                          return Args{{"start", I(2)}, {"end", I(10)}};
                                        },
                                        {{"y", {8}, i64}})});
  for (const char* t : {"aten.empty.memory_format", "aten.ones.default"})
    s.push_back({t, op([](TestGraph&) { return Args{{"size", Is({8, 6})}}; }, {{"y", {8, 6}}})});
  for (const char* t : {"aten.ones_like.default", "aten.zeros_like.default"}) s.push_back({t, onX({})});
}

void metaSamples(std::vector<OpSample>& s) {
  s.push_back({"aten._assert_async.default", op(
                                                 [](TestGraph& g) {
                                                   return Args{{"self", T(g.input("x", {}, b8))}};
                                                 },
                                                 {})});
  s.push_back({"aten._assert_async.msg",
               op(
                   [](TestGraph& g) {
                     return Args{{"self", T(g.input("x", {}, b8))}, {"assert_msg", S("ok")}};
                   },
                   {})});
  s.push_back({"aten._functional_assert_async.msg", op(
                                                        [](TestGraph& g) {
                                                          return Args{{"self", T(g.input("x", {}, b8))},
                                                                      {"assert_msg", S("ok")},
                                                                      {"dep_token", T(g.input("t", {0}))}};
                                                        },
                                                        {{"y", {0}}})});
  s.push_back({"aten._local_scalar_dense.default", op(
                                                       [](TestGraph& g) {
                                                         return Args{{"self", T(g.input("x", {}, i64))}};
                                                       },
                                                       {{"", {}}})});
  s.push_back(
      {"aten.sym_constrain_range.default", op(
                                               [](TestGraph&) {
                                                 return Args{{"size", I(4)}, {"min", I(0)}, {"max", I(16)}};
                                               },
                                               {})});
  s.push_back({"aten.sym_storage_offset.default", onX({}, {"", {}})});
}

}  // namespace

void addNnOpSamples(std::vector<OpSample>& s) {
  convSamples(s);
  batchNormSamples(s);
  groupLayerNormSamples(s);
  indexingSamples(s);
  attentionSamples(s);
  factorySamples(s);
  metaSamples(s);
}

}  // namespace spmd::testing
