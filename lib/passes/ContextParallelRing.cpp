// Ring attention for context parallelism (see ContextParallelRing.h).
//
// Invariants: every attention of the graph becomes a ring op or the pass
// fails (no mix of ring and all-gather); the new nodes sit right after the
// node whose value they last need (the forward after the values matmul or
// the fused op, the backward after the output gradient's producer), and
// every reader of a replaced value reads its new form; the replaced nodes
// are erased when nothing reads them any more.
#include "passes/ContextParallelRing.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/Anchors.h"
#include "passes/ContextParallelMask.h"
#include "passes/Pass.h"

namespace spmd::passes {
namespace {

using Argument = ir::Argument;
using detail::isCausalMask;
using detail::scalarOf;
using detail::tensorInput;
using sharding::Placement;
using sharding::ShardingSpec;

constexpr const char* kRing = "spmdc.ring_attention.default";
constexpr const char* kRingBackward = "spmdc.ring_attention_backward.default";
constexpr int64_t kContiguousFormat = 1;  // torch.contiguous_format in the export schema

std::vector<ir::Dim> contiguousStrides(const std::vector<ir::Dim>& sizes) {
  std::vector<ir::Dim> strides(sizes.size(), ir::Dim(1));
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = ir::Dim(s);
    s *= sizes[i].value();
  }
  return strides;
}

bool isContiguous(const ir::TensorType& t) { return t.strides == contiguousStrides(t.sizes); }

ir::TensorType typeOf(const ir::TensorType& like, std::vector<int64_t> sizes,
                      std::optional<ir::ScalarType> dtype = std::nullopt) {
  ir::TensorType t = like;
  t.sizes.assign(sizes.begin(), sizes.end());
  t.strides = contiguousStrides(t.sizes);
  if (dtype) t.dtype = *dtype;
  return t;
}

std::vector<int64_t> staticSizes(const ir::Value& v) {
  std::vector<int64_t> out;
  for (const ir::Dim& d : v.type().sizes) out.push_back(d.isStatic() ? d.value() : -1);
  return out;
}

/// New nodes of one rewrite, each placed right after a given node.
class Inserter {
 public:
  explicit Inserter(ir::Graph& g) : g_(g) {}

  /// A node of `target` with one tensor result per type, after `anchor`.
  Expected<std::vector<ir::Value*>> add(const ir::Node& anchor, const std::string& target,
                                        std::vector<ir::NamedArgument> args,
                                        const std::vector<ir::TensorType>& types, const std::string& base) {
    std::string name = unique(base);
    std::vector<ir::Value*> out;
    std::vector<Argument> results;
    for (size_t i = 0; i < types.size(); ++i) {
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, g_.addValue(i == 0 ? name : unique(name + "_" + std::to_string(i)),
                                                       ir::ValueKind::Tensor));
      v->mutableType() = types[i];
      out.push_back(v);
      results.push_back(Argument::tensor(v));
    }
    SPMD_ASSIGN_OR_RETURN(ir::Node * n, g_.addNode(name, target, std::move(args), std::move(results)));
    n->mutableMetadata().stackTrace = anchor.metadata().stackTrace;
    n->mutableMetadata().nnModuleStack = anchor.metadata().nnModuleStack;
    n->mutableMetadata().other["spmd_context_parallel"] = "1";
    after_[&anchor].push_back(n);
    made_.insert(n);
    return out;
  }

  /// `x` viewed (or reshaped, when not contiguous) as `sizes`.
  Expected<ir::Value*> view(const ir::Node& anchor, ir::Value* x, const std::vector<int64_t>& sizes,
                            const std::string& base) {
    bool plain = isContiguous(x->type());
    SPMD_ASSIGN_OR_RETURN(auto v, add(anchor, plain ? "aten.view.default" : "aten.reshape.default",
                                      {{"self", Argument::tensor(x), false},
                                       {plain ? "size" : "shape", Argument::integers(sizes), false}},
                                      {typeOf(x->type(), sizes)}, base));
    return v[0];
  }

  /// `x` with its last two dims swapped (a strided view).
  Expected<ir::Value*> swapLast(const ir::Node& anchor, ir::Value* x, const std::string& base) {
    ir::TensorType t = x->type();
    size_t r = t.sizes.size();
    std::swap(t.sizes[r - 1], t.sizes[r - 2]);
    std::swap(t.strides[r - 1], t.strides[r - 2]);
    std::vector<int64_t> dims;
    for (size_t i = 0; i < r; ++i) dims.push_back(static_cast<int64_t>(i));
    std::swap(dims[r - 1], dims[r - 2]);
    SPMD_ASSIGN_OR_RETURN(
        auto v,
        add(anchor, "aten.permute.default",
            {{"self", Argument::tensor(x), false}, {"dims", Argument::integers(dims), false}}, {t}, base));
    return v[0];
  }

  /// A contiguous copy of `x`.
  Expected<ir::Value*> contiguous(const ir::Node& anchor, ir::Value* x, const std::string& base) {
    Argument format;
    format.kind = Argument::Kind::MemoryFormat;
    format.ints = {kContiguousFormat};
    ir::TensorType t = x->type();
    t.strides = contiguousStrides(t.sizes);
    SPMD_ASSIGN_OR_RETURN(
        auto v, add(anchor, "aten.clone.default",
                    {{"self", Argument::tensor(x), false}, {"memory_format", format, true}}, {t}, base));
    return v[0];
  }

  /// `x` (contiguous) copied into the memory layout of `like` (same sizes,
  /// static strides): permuted into that layout's dim order, made
  /// contiguous, permuted back. The fused CPU kernels return their
  /// outputs as [b, s, h, d] in memory; the graph's views rely on it.
  Expected<ir::Value*> restride(const ir::Node& anchor, ir::Value* x, const ir::TensorType& like,
                                const std::string& base) {
    const size_t r = like.sizes.size();
    std::vector<int64_t> order(r);
    for (size_t i = 0; i < r; ++i) order[i] = static_cast<int64_t>(i);
    for (const ir::Dim& d : like.strides)
      if (!d.isStatic()) return Status::error("ring attention: " + base + ": a symbolic stride");
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return like.strides[static_cast<size_t>(a)].value() > like.strides[static_cast<size_t>(b)].value();
    });
    std::vector<int64_t> back(r);
    for (size_t i = 0; i < r; ++i) back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    ir::TensorType t = x->type();
    for (size_t i = 0; i < r; ++i) t.sizes[i] = x->type().sizes[static_cast<size_t>(order[i])];
    t.strides = contiguousStrides(t.sizes);
    SPMD_ASSIGN_OR_RETURN(
        auto p, add(anchor, "aten.permute.default",
                    {{"self", Argument::tensor(x), false}, {"dims", Argument::integers(order), false}}, {t},
                    base + "_perm"));
    SPMD_ASSIGN_OR_RETURN(ir::Value * c, contiguous(anchor, p[0], base + "_c"));
    SPMD_ASSIGN_OR_RETURN(
        auto v,
        add(anchor, "aten.permute.default",
            {{"self", Argument::tensor(c), false}, {"dims", Argument::integers(back), false}}, {like}, base));
    return v[0];
  }

  void replace(ir::Value* from, ir::Value* to) { replace_[from] = to; }

  /// `a` with a value replaced so far by its replacement: a fused
  /// backward's logsumexp is its (rewritten) forward's result.
  Argument current(const Argument& a) const {
    Argument out = a;
    if (ir::Value* v = a.value(); v != nullptr)
      if (auto it = replace_.find(v); it != replace_.end()) out = Argument::tensor(it->second);
    return out;
  }

  /// Rewires the replaced values' readers, orders the new nodes, erases
  /// the nodes nothing reads any more.
  Status finish() {
    g_.replaceUses(replace_, [&](const ir::Node& n) { return made_.count(&n) != 0; });
    std::vector<ir::Node*> order;
    for (const auto& n : g_.nodes()) {
      if (made_.count(n.get())) continue;
      order.push_back(n.get());
      appendAfter(n.get(), order);
    }
    g_.setNodeOrder(order);
    g_.rebuildUses();
    eraseDead();
    return g_.verify();
  }

 private:
  void appendAfter(const ir::Node* n, std::vector<ir::Node*>& order) {
    auto it = after_.find(n);
    if (it == after_.end()) return;
    for (ir::Node* m : it->second) {
      order.push_back(m);
      appendAfter(m, order);
    }
  }

  // Nodes with tensor results only, none of them read (nor a graph
  // output), repeatedly: the replaced attentions' forward and backward
  // (the export's functional graph has no other effects).
  void eraseDead() {
    std::unordered_set<const ir::Value*> outputs;
    for (const Argument& a : g_.outputs())
      for (const ir::Value* v : a.values) outputs.insert(v);
    for (bool changed = true; changed;) {
      std::unordered_set<const ir::Node*> dead;
      for (const auto& n : g_.nodes()) {
        auto res = n->outputValues();
        bool unused = !res.empty() && n->target().rfind("aten.", 0) == 0;
        for (const ir::Value* v : res) unused &= v->isTensor() && v->users().empty() && !outputs.count(v);
        if (unused) dead.insert(n.get());
      }
      changed = !dead.empty();
      if (changed) {
        g_.eraseNodes([&](const ir::Node& n) { return dead.count(&n) != 0; });
        g_.rebuildUses();
      }
    }
  }

 private:
  std::string unique(const std::string& base) const { return freshName(g_, base); }

  ir::Graph& g_;
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> after_;
  std::unordered_set<const ir::Node*> made_;
  std::unordered_map<ir::Value*, ir::Value*> replace_;
};

/// One eager attention of a joint (or forward) graph.
struct EagerAttention {
  ir::Node* qk = nullptr;
  ir::Node* softmax = nullptr;
  ir::Node* pv = nullptr;
  ir::Value *q3 = nullptr, *kt3 = nullptr, *v3 = nullptr, *out3 = nullptr, *mask = nullptr;
  double scale = 1;
  int64_t b = 0, h = 1;
  /// Backward: the output's gradient and the gradients of q3, kt3, v3.
  ir::Value *gradOut3 = nullptr, *dq3 = nullptr, *dkt3 = nullptr, *dv3 = nullptr;
};

std::string at(const ir::Node& n) { return "%" + n.name() + " (" + n.target() + ")"; }

// From softmax's input up to the scores matmul: views, scalar scalings and
// one additive mask; fills qk, scale, mask, b, h.
Status scoresChain(ir::Value* v, EagerAttention& a) {
  for (int i = 0; i < 10; ++i) {
    ir::Node* p = v->producer();
    if (p == nullptr) break;
    const std::string& t = p->target();
    if (t == "aten.bmm.default") {
      a.qk = p;
      return Status::ok();
    }
    ir::Value* self = tensorInput(*p, "self");
    if (detail::isViewLike(t)) {
      if (v->type().rank() == 4 && a.b == 0) a.b = staticSizes(*v)[0], a.h = staticSizes(*v)[1];
    } else if (auto c = scalarOf(p->input("other"));
               c && (t == "aten.mul.Tensor" || t == "aten.mul.Scalar" || t == "aten.div.Tensor" ||
                     t == "aten.div.Scalar")) {
      a.scale = t.rfind("aten.mul", 0) == 0 ? a.scale * *c : a.scale / *c;
    } else if (t == "aten.add.Tensor" && a.mask == nullptr && tensorInput(*p, "other") != nullptr) {
      ir::Value* other = tensorInput(*p, "other");
      if (self->type().sizes != v->type().sizes) std::swap(self, other);
      a.mask = other;
    } else {
      return Status::error("ring attention: the scores of " + at(*a.softmax) + " pass through " + at(*p) +
                           "; only views, scalar scalings and one additive mask are supported (or use "
                           "\"rotate\": \"allgather\")");
    }
    v = self;
  }
  return Status::error("ring attention: no matmul of queries and keys found above %" + v->name());
}

// The backward bmm(permute(x), y) (or bmm(y, permute(x)) when `xRight`)
// whose result has `shape`: (result, y), or nulls.
std::pair<ir::Value*, ir::Value*> gradMatmul(ir::Value* x, bool xRight, const std::vector<ir::Dim>& shape,
                                             const ir::Node* skip) {
  for (ir::Node* t : x->users()) {
    if (t == skip || t->target() != "aten.permute.default" || t->outputValues().empty()) continue;
    ir::Value* xt = t->outputValues()[0];
    for (ir::Node* u : xt->users()) {
      if (u->target() != "aten.bmm.default" || u->outputValues().empty()) continue;
      ir::Value* self = tensorInput(*u, "self");
      ir::Value* mat2 = tensorInput(*u, "mat2");
      if ((xRight ? mat2 : self) != xt || u->outputValues()[0]->type().sizes != shape) continue;
      return {u->outputValues()[0], xRight ? self : mat2};
    }
  }
  return {nullptr, nullptr};
}

Expected<std::optional<EagerAttention>> matchEager(ir::Node& softmax) {
  ir::Value* scores = tensorInput(softmax, "self");
  const Argument* dim = softmax.input("dim");
  if (scores == nullptr || dim == nullptr || dim->ints.size() != 1 || softmax.outputValues().empty())
    return std::optional<EagerAttention>();
  if (dim->ints[0] != -1 && dim->ints[0] != scores->type().rank() - 1) return std::optional<EagerAttention>();
  EagerAttention a;
  a.softmax = &softmax;
  a.pv = detail::valuesMatmul(softmax.outputValues()[0]);
  if (a.pv == nullptr) return std::optional<EagerAttention>();
  SPMD_RETURN_IF_ERROR(scoresChain(scores, a));
  a.q3 = tensorInput(*a.qk, "self");
  a.kt3 = tensorInput(*a.qk, "mat2");
  a.v3 = tensorInput(*a.pv, "mat2");
  a.out3 = a.pv->outputValues()[0];
  for (ir::Value* v : {a.q3, a.kt3, a.v3, a.out3})
    if (v == nullptr || v->type().rank() != 3 || !v->type().isStatic())
      return Status::error("ring attention: " + at(*a.qk) + ": expected 3-d static batched matmuls");
  auto q = staticSizes(*a.q3), kt = staticSizes(*a.kt3), v = staticSizes(*a.v3);
  if (a.b == 0) a.b = q[0], a.h = 1;
  if (a.b * a.h != q[0] || kt[0] != q[0] || kt[1] != q[2] || v[1] != kt[2])
    return Status::error("ring attention: " + at(*a.qk) + ": queries, keys and values do not match");
  if (q[1] != kt[2])
    return Status::error("ring attention: " + at(*a.qk) + ": queries (" + std::to_string(q[1]) +
                         ") and keys (" + std::to_string(kt[2]) + ") of different lengths");
  ir::Value* p3 = tensorInput(*a.pv, "self");
  auto [dv3, go3] = gradMatmul(p3, false, a.v3->type().sizes, a.pv);
  a.dv3 = dv3, a.gradOut3 = go3;
  a.dkt3 = gradMatmul(a.q3, false, a.kt3->type().sizes, a.qk).first;
  a.dq3 = gradMatmul(a.kt3, true, a.q3->type().sizes, a.qk).first;
  int found = (a.dv3 != nullptr) + (a.dkt3 != nullptr) + (a.dq3 != nullptr);
  if (found != 0 && found != 3)
    return Status::error("ring attention: " + at(*a.qk) +
                         ": found the backward of only some of queries, keys and values");
  return std::optional<EagerAttention>(a);
}

/// The ring op pair's values for one attention.
struct RingValues {
  ir::Value *q = nullptr, *k = nullptr, *v = nullptr;
};

/// A float32 key or value tensor made from a half-dtype one: `dtype`, and
/// the one scaling `scale` on the way (1 when none).
struct HalfSource {
  ir::ScalarType dtype = ir::ScalarType::Float;
  double scale = 1.0;
};

// `v` made from a bf16 / f16 tensor x by a cast to float32 (torch's SDPA
// decomposition upcasts before the scores), then layout ops and at most one
// mul by a scalar c (its sqrt(scale) on the keys): v = fl(c * x). Then
// half(fl(v / c)) is x again (two float32 roundings move it far less than
// half a bf16 / f16 ulp; overflow and subnormals aside), and the receiver's
// fl(c * x) is v bit for bit. nullopt otherwise.
std::optional<HalfSource> halfSource(const ir::Value* v) {
  static const std::unordered_set<std::string> kLayout = {
      "aten.view.default",   "aten._unsafe_view.default", "aten.clone.default",
      "aten.expand.default", "aten.permute.default",      "aten.transpose.int",
      "aten.alias.default",  "aten.reshape.default",      "aten.unsqueeze.default"};
  std::optional<double> scale;
  while (const ir::Node* p = v->producer()) {
    const ir::Value* in = tensorInput(*p, "self");
    if (in == nullptr) return std::nullopt;
    if (p->target() == "aten._to_copy.default") {
      ir::ScalarType from = in->type().dtype;
      bool half = from == ir::ScalarType::BFloat16 || from == ir::ScalarType::Half;
      if (!half || v->type().dtype != ir::ScalarType::Float) return std::nullopt;
      return HalfSource{from, scale.value_or(1.0)};
    }
    if (p->target() == "aten.mul.Scalar") {
      auto c = scalarOf(p->input("other"));
      if (scale || !c || !std::isnormal(*c)) return std::nullopt;  // one finite, nonzero scaling
      scale = c;
    } else if (kLayout.count(p->target()) == 0) {
      return std::nullopt;
    }
    v = in;
  }
  return std::nullopt;
}

Status rewriteEager(Inserter& ins, const EagerAttention& a, std::vector<RingValues>& pins) {
  auto q = staticSizes(*a.q3), kt = staticSizes(*a.kt3), v = staticSizes(*a.v3);
  int64_t b = a.b, h = a.h, l = q[1], d = q[2], s = kt[2], dv = v[2];
  const ir::Node& fwd = *a.pv;
  SPMD_ASSIGN_OR_RETURN(ir::Value * q4, ins.view(fwd, a.q3, {b, h, l, d}, "ring_q"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * kt4, ins.view(fwd, a.kt3, {b, h, d, s}, "ring_kt"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * k4, ins.swapLast(fwd, kt4, "ring_k"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * v4, ins.view(fwd, a.v3, {b, h, s, dv}, "ring_v"));
  std::vector<ir::NamedArgument> common = {{"query", Argument::tensor(q4), false},
                                           {"key", Argument::tensor(k4), false},
                                           {"value", Argument::tensor(v4), false}};
  bool causal = isCausalMask(a.mask, l, s);  // the flag says it: the kernels skip what it masks
  std::vector<ir::NamedArgument> opts = {{"scale", Argument::floating(a.scale), false},
                                         {"causal", Argument::boolean(causal), false}};
  if (a.mask != nullptr && !causal) opts.push_back({"mask", Argument::tensor(a.mask), false});
  // float32 keys and values upcast from one half dtype cross the ring in it (exact; half the bytes)
  if (auto kd = halfSource(a.kt3), vd = halfSource(a.v3); kd && vd && kd->dtype == vd->dtype) {
    opts.push_back({"kv_dtype", Argument::scalarType(kd->dtype), true});
    opts.push_back({"key_scale", Argument::floating(kd->scale), true});
    opts.push_back({"value_scale", Argument::floating(vd->scale), true});
  }
  auto args = common;
  args.insert(args.end(), opts.begin(), opts.end());
  SPMD_ASSIGN_OR_RETURN(auto ring, ins.add(fwd, kRing, args,
                                           {typeOf(a.out3->type(), {b, h, l, dv}),
                                            typeOf(a.out3->type(), {b, h, l}, ir::ScalarType::Float)},
                                           "ring"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * out3, ins.view(fwd, ring[0], {b * h, l, dv}, "ring_out"));
  ins.replace(a.out3, out3);
  pins.push_back({q4, k4, v4});
  if (a.gradOut3 == nullptr) return Status::ok();
  const ir::Node& bwd = *a.gradOut3->producer();
  SPMD_ASSIGN_OR_RETURN(ir::Value * go4, ins.view(bwd, a.gradOut3, {b, h, l, dv}, "ring_grad_out"));
  std::vector<ir::NamedArgument> bargs = {{"grad_out", Argument::tensor(go4), false}};
  bargs.insert(bargs.end(), common.begin(), common.end());
  bargs.push_back({"out", Argument::tensor(ring[0]), false});
  bargs.push_back({"lse", Argument::tensor(ring[1]), false});
  bargs.insert(bargs.end(), opts.begin(), opts.end());
  SPMD_ASSIGN_OR_RETURN(auto grads,
                        ins.add(bwd, kRingBackward, bargs,
                                {typeOf(a.dq3->type(), {b, h, l, d}), typeOf(a.dq3->type(), {b, h, s, d}),
                                 typeOf(a.dv3->type(), {b, h, s, dv})},
                                "ring_bwd"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * dq3, ins.view(bwd, grads[0], {b * h, l, d}, "ring_dq"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * dkt4, ins.swapLast(bwd, grads[1], "ring_dkt"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * dktc, ins.contiguous(bwd, dkt4, "ring_dkt_c"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * dkt3, ins.view(bwd, dktc, {b * h, d, s}, "ring_dkt3"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * dv3, ins.view(bwd, grads[2], {b * h, s, dv}, "ring_dv"));
  ins.replace(a.dq3, dq3);
  ins.replace(a.dkt3, dkt3);
  ins.replace(a.dv3, dv3);
  return Status::ok();
}

// Which fused ops map onto the ring pair, and how their arguments read.
bool fusedForward(const std::string& t) {
  return t == "aten.scaled_dot_product_attention.default" ||
         t == "aten._scaled_dot_product_flash_attention_for_cpu.default";
}
bool fusedBackward(const std::string& t) {
  return t == "aten._scaled_dot_product_flash_attention_for_cpu_backward.default";
}

Status rewriteFused(Inserter& ins, ir::Node& n, std::vector<RingValues>& pins) {
  bool backward = fusedBackward(n.target());
  ir::Value *q = tensorInput(n, "query"), *k = tensorInput(n, "key"), *v = tensorInput(n, "value");
  if (q == nullptr || k == nullptr || v == nullptr || q->type().rank() != 4 || k->type().rank() != 4 ||
      !q->type().isStatic() || !k->type().isStatic())
    return Status::error("ring attention: " + at(n) + ": expected static 4-d query, key and value");
  auto qs = staticSizes(*q), ks = staticSizes(*k);
  if (qs[1] != ks[1])
    return Status::error("ring attention: " + at(n) +
                         ": grouped-query heads (expand the keys and values to the query heads before the "
                         "op, or use \"rotate\": \"allgather\")");
  if (qs[2] != ks[2])
    return Status::error("ring attention: " + at(n) + ": queries and keys of different lengths");
  if (auto p = scalarOf(n.input("dropout_p")); p && *p != 0)
    return Status::error("ring attention: " + at(n) + ": dropout is not supported");
  const Argument* causal = n.input("is_causal");
  const Argument* scaleArg = n.input("scale");
  double scale = 1.0 / std::sqrt(static_cast<double>(qs[3]));
  if (auto s = scalarOf(scaleArg)) scale = *s;
  std::vector<ir::NamedArgument> args;
  if (backward) args.push_back({"grad_out", *n.input("grad_out"), false});
  args.push_back({"query", Argument::tensor(q), false});
  args.push_back({"key", Argument::tensor(k), false});
  args.push_back({"value", Argument::tensor(v), false});
  if (backward) {
    args.push_back({"out", ins.current(*n.input("out")), false});
    args.push_back({"lse", ins.current(*n.input("logsumexp")), false});
  }
  args.push_back({"scale", Argument::floating(scale), false});
  // A mask that is the causal one (transformers builds it from positions) becomes the flag, as in
  // rewriteEager: the kernels skip what it masks, and the load-balanced split applies.
  ir::Value* mask = tensorInput(n, "attn_mask");
  bool isCausal = causal != nullptr && !causal->ints.empty() && causal->ints[0] != 0;
  if (!isCausal && isCausalMask(mask, qs[2], ks[2])) isCausal = true, mask = nullptr;
  args.push_back({"causal", Argument::boolean(isCausal), false});
  if (mask != nullptr) args.push_back({"mask", Argument::tensor(mask), false});
  auto old = n.outputValues();
  std::vector<ir::TensorType> types;
  if (backward) {
    for (size_t i = 0; i < 3; ++i) types.push_back(typeOf(old.at(i)->type(), staticSizes(*old.at(i))));
  } else {
    types.push_back(typeOf(old.at(0)->type(), staticSizes(*old.at(0))));
    std::vector<int64_t> lse = {qs[0], qs[1], qs[2]};
    types.push_back(old.size() > 1 ? old[1]->type() : typeOf(q->type(), lse, ir::ScalarType::Float));
  }
  SPMD_ASSIGN_OR_RETURN(auto made, ins.add(n, backward ? kRingBackward : kRing, args, types, "ring"));
  for (size_t i = 0; i < old.size() && i < made.size(); ++i) {
    ir::Value* out =
        made[i];  // the ring kernels return contiguous tensors; the graph may want the fused layout
    if (!isContiguous(old[i]->type())) {
      SPMD_ASSIGN_OR_RETURN(out, ins.restride(n, out, old[i]->type(), made[i]->name() + "_layout"));
    }
    ins.replace(old[i], out);
  }
  if (!backward) pins.push_back({q, k, v});
  return Status::ok();
}

// Pins each ring op's query, key and value to S(2) on `axis`, keeping the
// other axes' layouts propagation gives them.
Status pinRing(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
               const schema::ResolvedPlacements& placements, const CompileOptions& options, int64_t axis,
               const std::vector<RingValues>& rings) {
  std::vector<ir::Value*> values;
  std::unordered_set<const ir::Value*> seen;
  for (const RingValues& r : rings)
    for (ir::Value* v : {r.q, r.k, r.v})
      if (seen.insert(v).second) values.push_back(v);
  SPMD_ASSIGN_OR_RETURN(std::vector<ShardingSpec> specs,
                        baseLayouts(program, schema, placements, options, values, /*always=*/true));
  std::vector<std::pair<ir::Value*, ShardingSpec>> pins;
  for (size_t i = 0; i < values.size(); ++i) {
    specs[i].placements[static_cast<size_t>(axis)] = Placement::shard(2);
    pins.emplace_back(values[i], specs[i]);
  }
  return insertLayoutAnchors(program.graph, pins, "_cp", "spmd_context_parallel");
}

}  // namespace

Expected<RingCount> applyRingAttention(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                                       const schema::ResolvedPlacements& placements,
                                       const CompileOptions& options, int64_t axis) {
  ir::Graph& g = program.graph;
  Inserter ins(g);
  std::vector<RingValues> pins;
  RingCount count;
  std::vector<ir::Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (ir::Node* n : nodes) {
    const std::string& t = n->target();
    if (detail::isSoftmax(t)) {
      SPMD_ASSIGN_OR_RETURN(auto eager, matchEager(*n));
      if (!eager) continue;
      SPMD_RETURN_IF_ERROR(rewriteEager(ins, *eager, pins));
      ++count.attentions;
    } else if (fusedForward(t) || fusedBackward(t)) {
      SPMD_RETURN_IF_ERROR(rewriteFused(ins, *n, pins));
      if (fusedForward(t)) ++count.attentions, ++count.fused;
    } else if (detail::isFused(t)) {
      return Status::error("ring attention: " + at(*n) +
                           " has no ring form; export the attention as F.scaled_dot_product_attention on CPU "
                           "or as matmul, mask, softmax, matmul, or use \"rotate\": \"allgather\"");
    }
  }
  SPMD_RETURN_IF_ERROR(ins.finish());
  SPMD_RETURN_IF_ERROR(pinRing(program, schema, placements, options, axis, pins));
  return count;
}

}  // namespace spmd::passes
