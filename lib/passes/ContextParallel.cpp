// Context parallelism (see ContextParallel.h).
//
// Invariants: attentions are found from forward ops only; every anchor sits
// right after its value's producer and every other reader (the backward of
// a train step included) reads it, so the backward's attention reads the
// same gathered keys and values; a causal fused attention and its backward
// read one shared mask per (queries, keys, dtype).
#include "passes/ContextParallel.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "passes/Anchors.h"
#include "passes/ContextParallelRing.h"
#include "passes/GraphPass.h"
#include "passes/Pass.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

using sharding::Placement;
using sharding::ShardingSpec;
using Argument = ir::Argument;

}  // namespace

namespace detail {

ir::Value* tensorInput(const ir::Node& n, std::string_view name) {
  const Argument* a = n.input(name);
  return a != nullptr && a->kind == Argument::Kind::Tensor ? a->value() : nullptr;
}

bool isSoftmax(const std::string& t) {
  return t == "aten._softmax.default" || t == "aten._safe_softmax.default" || t == "aten.softmax.int";
}

bool isFused(const std::string& t) {
  return t.rfind("aten.scaled_dot_product_attention", 0) == 0 || t.rfind("aten._scaled_dot_product_", 0) == 0;
}

bool isBackward(const std::string& t) { return t.find("_backward.") != std::string::npos; }

bool isViewLike(const std::string& t) {
  return t == "aten.view.default" || t == "aten._unsafe_view.default" || t == "aten.reshape.default";
}

}  // namespace detail

namespace {

using namespace detail;  // NOLINT(google-build-using-namespace)

bool isMatmul(const std::string& t) { return t == "aten.bmm.default" || t == "aten.matmul.default"; }

// Ops between a key / value projection and the attention that change no
// element's sequence position: gathering before them is gathering after.
bool movesOnly(const std::string& t) {
  static const std::set<std::string> kOps = {
      "aten.clone.default",    "aten.expand.default",    "aten.permute.default", "aten.transpose.int",
      "aten.t.default",        "aten.unsqueeze.default", "aten.mul.Scalar",      "aten.div.Scalar",
      "aten._to_copy.default", "aten.alias.default"};
  return kOps.count(t) != 0 || isViewLike(t);
}

// Up from `v` through movesOnly ops (at most 8), not into a tensor of rank
// < 3 (a [batch x seq, hidden] view holds the sequence as a strided shard).
ir::Value* traceBack(ir::Value* v) {
  for (int i = 0; i < 8 && v->producer() != nullptr && movesOnly(v->producer()->target()); ++i) {
    ir::Value* in = tensorInput(*v->producer(), "self");
    if (in == nullptr || in->type().rank() < 3) break;
    v = in;
  }
  return v;
}

// Down from the gradient `g` of an attention operand through movesOnly ops
// and sums (an expand's backward) to the first value shaped like `x` (the
// traced-back key or value): x's gradient; null when none within 10 ops.
ir::Value* gradientLike(ir::Value* g, const ir::Value& x) {
  for (int i = 0; i < 10 && g != nullptr; ++i) {
    if (i > 0 && g->type().sizes == x.type().sizes) return g;
    ir::Value* next = nullptr;
    for (ir::Node* u : g->users())
      if (next == nullptr && (movesOnly(u->target()) || u->target() == "aten.sum.dim_IntList") &&
          tensorInput(*u, "self") == g && !u->outputValues().empty())
        next = u->outputValues()[0];
    g = next;
  }
  return nullptr;
}

// The backward's bmm(permute(a), grad) computing the gradient of the right
// operand `b` of the forward matmul `mm` (= bmm(a, b)); its result, or null.
ir::Value* rhsGradient(const ir::Node& mm, const ir::Value& b) {
  ir::Value* a = tensorInput(mm, "self");
  if (a == nullptr) return nullptr;
  for (ir::Node* t : a->users()) {
    if (t == &mm || t->target() != "aten.permute.default" || t->outputValues().empty()) continue;
    for (ir::Node* u : t->outputValues()[0]->users())
      if (u->target() == "aten.bmm.default" && tensorInput(*u, "self") == t->outputValues()[0] &&
          !u->outputValues().empty() && u->outputValues()[0]->type().sizes == b.type().sizes)
        return u->outputValues()[0];
  }
  return nullptr;
}

// The matmul of queries and keys that softmax's input `v` comes from,
// through a mask add, a scaling, masked_fill and views (at most 8 ops).
ir::Node* scoresMatmul(ir::Value* v) {
  static const std::set<std::string> kThrough = {
      "aten.add.Tensor",         "aten.sub.Tensor",       "aten.mul.Tensor",    "aten.div.Tensor",
      "aten.mul.Scalar",         "aten.div.Scalar",       "aten.where.self",    "aten.masked_fill.Scalar",
      "aten.masked_fill.Tensor", "aten._to_copy.default", "aten.clone.default", "aten.alias.default"};
  for (int i = 0; i < 8 && v != nullptr; ++i) {
    ir::Node* p = v->producer();
    if (p == nullptr) return nullptr;
    if (isMatmul(p->target())) return p;
    if (isViewLike(p->target())) {
      v = tensorInput(*p, "self");
      continue;
    }
    if (kThrough.count(p->target()) == 0) return nullptr;
    ir::Value* next = nullptr;  // the operand shaped like the result (not the mask)
    for (std::string_view name : {"self", "other"})
      if (ir::Value* in = tensorInput(*p, name);
          next == nullptr && in != nullptr && in->type().sizes == v->type().sizes)
        next = in;
    v = next;
  }
  return nullptr;
}

}  // namespace

// The first matmul (in graph order) reading the probabilities `probs` as
// its left operand, through where / casts / expands / views (depth 6).
ir::Node* detail::valuesMatmul(ir::Value* probs) {
  static const std::set<std::string> kThrough = {"aten.where.self",       "aten.alias.default",
                                                 "aten._to_copy.default", "aten.expand.default",
                                                 "aten.clone.default",    "aten.masked_fill.Scalar"};
  std::vector<ir::Value*> frontier{probs};
  ir::Node* best = nullptr;
  for (int depth = 0; depth < 6 && !frontier.empty(); ++depth) {
    std::vector<ir::Value*> next;
    for (ir::Value* v : frontier)
      for (ir::Node* u : v->users()) {
        if (isMatmul(u->target()) && tensorInput(*u, "self") == v) {
          if (best == nullptr || u->index() < best->index()) best = u;
        } else if (kThrough.count(u->target()) != 0 || isViewLike(u->target())) {
          for (ir::Value* r : u->outputValues())
            if (r->isTensor()) next.push_back(r);
        }
      }
    frontier = std::move(next);
  }
  return best;
}

namespace {

ir::Value* rhs(const ir::Node& mm) {
  ir::Value* v = tensorInput(mm, "mat2");
  return v != nullptr ? v : tensorInput(mm, "other");
}

std::optional<AttentionSite> eagerSite(const ir::Node& softmax) {
  ir::Value* scores = tensorInput(softmax, "self");
  const Argument* dim = softmax.input("dim");
  if (scores == nullptr || dim == nullptr || dim->ints.size() != 1 || scores->type().rank() < 2)
    return std::nullopt;
  int64_t rank = scores->type().rank();
  if (dim->ints[0] != -1 && dim->ints[0] != rank - 1) return std::nullopt;
  ir::Node* qk = scoresMatmul(scores);
  ir::Node* pv = softmax.outputValues().empty() ? nullptr : valuesMatmul(softmax.outputValues()[0]);
  if (qk == nullptr || pv == nullptr || rhs(*qk) == nullptr || rhs(*pv) == nullptr) return std::nullopt;
  AttentionSite s;
  s.node = qk;
  s.query = tensorInput(*qk, "self");
  if (s.query == nullptr || s.query->type().rank() < 2) return std::nullopt;
  s.queryDim = s.query->type().rank() - 2;
  s.key = traceBack(rhs(*qk));
  s.value = traceBack(rhs(*pv));
  if (ir::Value* g = rhsGradient(*qk, *rhs(*qk))) s.keyGrad = gradientLike(g, *s.key);
  if (ir::Value* g = rhsGradient(*pv, *rhs(*pv))) s.valueGrad = gradientLike(g, *s.value);
  s.length = scores->type().sizes.back();
  return s;
}

}  // namespace

std::vector<AttentionSite> findAttention(const ir::Graph& g) {
  std::vector<AttentionSite> out;
  for (const auto& n : g.nodes()) {
    const std::string& t = n->target();
    if (isSoftmax(t)) {
      if (auto s = eagerSite(*n)) out.push_back(*s);
    } else if (isFused(t) && !isBackward(t)) {
      AttentionSite s;
      s.node = n.get();
      s.fused = true;
      s.query = tensorInput(*n, "query");
      ir::Value* k = tensorInput(*n, "key");
      ir::Value* v = tensorInput(*n, "value");
      if (s.query == nullptr || k == nullptr || v == nullptr || k->type().rank() < 2) continue;
      s.queryDim = s.query->type().rank() - 2;
      s.key = traceBack(k);
      s.value = traceBack(v);
      for (const auto& b : g.nodes())  // the backward op: (grad_query, grad_key, grad_value, ...)
        if (isFused(b->target()) && isBackward(b->target()) && tensorInput(*b, "key") == k &&
            b->outputValues().size() >= 3) {
          s.keyGrad = gradientLike(b->outputValues()[1], *s.key);
          s.valueGrad = gradientLike(b->outputValues()[2], *s.value);
        }
      s.length = k->type().sizes[k->type().sizes.size() - 2];
      out.push_back(s);
    }
  }
  return out;
}

namespace {

// Fused ops whose is_causal can become an additive attn_mask.
bool takesMask(const std::string& t) {
  return t == "aten.scaled_dot_product_attention.default" ||
         t == "aten._scaled_dot_product_flash_attention_for_cpu.default" ||
         t == "aten._scaled_dot_product_flash_attention_for_cpu_backward.default";
}

Expected<ir::Value*> addOp(ir::Graph& g, const std::string& target, std::vector<ir::NamedArgument> args,
                           const ir::TensorType& type, const std::string& base,
                           std::vector<ir::Node*>& made) {
  std::string name = freshName(g, base);
  SPMD_ASSIGN_OR_RETURN(ir::Value * v, g.addValue(name, ir::ValueKind::Tensor));
  v->mutableType() = type;
  SPMD_ASSIGN_OR_RETURN(ir::Node * n, g.addNode(name, target, std::move(args), {Argument::tensor(v)}));
  n->mutableMetadata().other["spmd_context_parallel"] = "1";
  made.push_back(n);
  return v;
}

// The additive causal mask [L, S] (0 where key <= query, -inf above):
// full(-inf).triu(1), as torch's is_causal (top-left aligned).
Expected<ir::Value*> causalMask(ir::Graph& g, int64_t l, int64_t s, ir::ScalarType dtype,
                                std::vector<ir::Node*>& made) {
  ir::TensorType t;
  t.dtype = dtype;
  t.sizes = {ir::Dim(l), ir::Dim(s)};
  t.strides = {ir::Dim(s), ir::Dim(1)};
  SPMD_ASSIGN_OR_RETURN(
      ir::Value * full,
      addOp(g, "aten.full.default",
            {{"size", Argument::integers({l, s}), false},
             {"fill_value", Argument::floating(-std::numeric_limits<double>::infinity()), false},
             {"dtype", Argument::scalarType(dtype), true}},
            t, "cp_causal_full", made));
  return addOp(g, "aten.triu.default",
               {{"self", Argument::tensor(full), false}, {"diagonal", Argument::integer(1), false}}, t,
               "cp_causal_mask", made);
}

// Rewrites every causal fused attention (forward and backward) to
// is_causal=false with an explicit mask; returns how many masks it made.
Expected<int> explicitCausalMasks(ir::Graph& g) {
  std::map<std::tuple<int64_t, int64_t, ir::ScalarType>, ir::Value*> masks;
  std::vector<ir::Node*> made;
  for (const auto& n : g.nodes()) {
    const Argument* causal = n->input("is_causal");
    if (!isFused(n->target()) || causal == nullptr || causal->ints.empty() || causal->ints[0] == 0) continue;
    if (!takesMask(n->target()))
      return Status::error("a causal " + n->target() + " (%" + n->name() +
                           ") takes no mask to carry the queries' global positions; export the attention as "
                           "F.scaled_dot_product_attention on CPU or as matmul, mask, softmax, matmul");
    ir::Value* q = tensorInput(*n, "query");
    ir::Value* k = tensorInput(*n, "key");
    const auto& qs = q->type().sizes;
    const auto& ks = k->type().sizes;
    if (!qs[qs.size() - 2].isStatic() || !ks[ks.size() - 2].isStatic())
      return Status::error("a causal " + n->target() + " (%" + n->name() + ") over a symbolic length");
    auto key = std::make_tuple(qs[qs.size() - 2].value(), ks[ks.size() - 2].value(), q->type().dtype);
    if (masks.count(key) == 0) {
      SPMD_ASSIGN_OR_RETURN(masks[key],
                            causalMask(g, std::get<0>(key), std::get<1>(key), std::get<2>(key), made));
    }
    std::vector<ir::NamedArgument> inputs;
    for (const auto& a : n->inputs())
      if (a.name != "attn_mask")
        inputs.push_back(
            a.name == "is_causal" ? ir::NamedArgument{a.name, Argument::boolean(false), a.keyword} : a);
    inputs.push_back({"attn_mask", Argument::tensor(masks[key]), true});
    n->setInputs(std::move(inputs));
  }
  if (made.empty()) return 0;
  std::vector<ir::Node*> order = made;
  std::unordered_set<const ir::Node*> fresh(made.begin(), made.end());
  for (const auto& n : g.nodes())
    if (fresh.count(n.get()) == 0) order.push_back(n.get());
  g.setNodeOrder(order);
  g.rebuildUses();
  SPMD_RETURN_IF_ERROR(g.verify());
  return static_cast<int>(masks.size());
}

}  // namespace

namespace {

Expected<int64_t> axisOf(const schema::PlacementSchema& s, const sharding::Mesh& mesh,
                         const std::string& where) {
  const std::string& name = s.contextParallel->axis;
  if (int64_t a = mesh.axisIndex(name); a >= 0) return a;
  return Status::error(where + "the mesh " + mesh.str() + " has no axis '" + name +
                       "' (axes: " + joined(mesh.axisNames()) + "); name the context-parallel axis");
}

// Sets every user input whose dim 1 is `length` to S(1) on `axis`, the
// other user inputs to R there; returns how many it sharded.
Expected<int> shardUserInputs(const ir::ExportedProgram& program, schema::ResolvedPlacements& placements,
                              int64_t axis, const ir::Dim& length) {
  const auto& inputs = program.graph.inputs();
  std::unordered_set<const ir::Value*> user;
  for (const ir::InputSpec& spec : program.signature.inputs)
    if (spec.kind == ir::InputKind::UserInput && spec.value != nullptr) user.insert(spec.value);
  int sharded = 0;
  for (size_t i = 0; i < inputs.size() && i < placements.inputs.size(); ++i) {
    if (user.count(inputs[i]) == 0 || !inputs[i]->isTensor()) continue;
    const ir::TensorType& t = inputs[i]->type();
    bool seq = t.rank() >= 2 && t.sizes[1] == length;
    placements.inputs[i].placements[static_cast<size_t>(axis)] =
        seq ? Placement::shard(1) : Placement::replicate();
    sharded += seq ? 1 : 0;
  }
  return sharded;
}

// Queries S(their length dim), keys and values R on `axis`; the other axes
// keep what propagation gives them.
Status pinAttention(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                    const schema::ResolvedPlacements& placements, const CompileOptions& options, int64_t axis,
                    const std::vector<AttentionSite>& sites) {
  std::vector<ir::Value*> values;
  std::vector<Placement> want;
  std::unordered_set<const ir::Value*> seen;
  auto add = [&](ir::Value* v, Placement p) {
    if (seen.insert(v).second) values.push_back(v), want.push_back(p);
  };
  for (const AttentionSite& s : sites) {
    add(s.query, Placement::shard(s.queryDim));
    add(s.key, Placement::replicate());
    add(s.value, Placement::replicate());
  }
  SPMD_ASSIGN_OR_RETURN(std::vector<ShardingSpec> specs,
                        baseLayouts(program, schema, placements, options, values, /*always=*/true));
  std::vector<std::pair<ir::Value*, ShardingSpec>> pins;
  std::unordered_map<const ir::Value*, ShardingSpec> base;
  for (size_t i = 0; i < values.size(); ++i) {
    base.emplace(values[i], specs[i]);
    specs[i].placements[static_cast<size_t>(axis)] = want[i];
    pins.emplace_back(values[i], specs[i]);
  }
  // A gradient keeps its tensor's plain sequence shard: the sum over the
  // query shards becomes a reduce-scatter.
  for (const AttentionSite& s : sites)
    for (auto [x, grad] : {std::pair{s.key, s.keyGrad}, std::pair{s.value, s.valueGrad}}) {
      const Placement& p = base.at(x).placements[static_cast<size_t>(axis)];
      if (grad != nullptr && p.isShard() && !p.isStrided() && seen.insert(grad).second)
        pins.emplace_back(grad, base.at(x));
    }
  return insertLayoutAnchors(program.graph, pins, "_cp", "spmd_context_parallel");
}

bool isRingOp(const std::string& t) {
  return t == "spmdc.ring_attention.default" || t == "spmdc.ring_attention_backward.default";
}

// A node that reorders or shifts a sequence input along the sequence
// while it is integral (ids, labels, positions and the masks made of them;
// HF's labels[..., 1:] after a pad, its
// packed-sequence check of position ids): in the permuted order of the
// load-balanced split it would compute something else. Null when none.
const ir::Node* shiftsSequence(const std::vector<ir::Value*>& inputs, int64_t length) {
  std::vector<const ir::Value*> todo(inputs.begin(), inputs.end());
  std::unordered_set<const ir::Value*> seen(todo.begin(), todo.end());
  while (!todo.empty()) {
    const ir::Value* v = todo.back();
    todo.pop_back();
    for (const ir::Node* u : v->users()) {
      const std::string& t = u->target();
      if (t == "aten.embedding.default") continue;
      if (t == "aten.constant_pad_nd.default" || t == "aten.roll.default" || t == "aten.cumsum.default" ||
          t == "aten.flip.default" || t == "aten.narrow.default" || t == "aten.cat.default")
        return u;
      if (t == "aten.slice.Tensor" && !u->outputValues().empty()) {
        const auto& in = v->type().sizes;
        const auto& out = u->outputValues()[0]->type().sizes;
        for (size_t d = 0; d < in.size() && d < out.size(); ++d)
          if (in[d] != out[d] && in[d].isStatic() && in[d].value() >= length) return u;
      }
      for (const ir::Value* o : u->outputValues()) {  // ids, labels, positions, masks: not activations
        ir::ScalarType d = o->isTensor() ? o->type().dtype : ir::ScalarType::Unknown;
        bool integral = d == ir::ScalarType::Long || d == ir::ScalarType::Int || d == ir::ScalarType::Bool ||
                        d == ir::ScalarType::Short || d == ir::ScalarType::Byte || d == ir::ScalarType::Char;
        if (integral && seen.insert(o).second) todo.push_back(o);
      }
    }
  }
  return nullptr;
}

// The ring's load-balanced causal split (docs/CONTEXT_PARALLEL.md): on by
// request, or by default when a ring op is causal and no parameter is
// sharded on the axis. Marks the ring ops load_balance=true and stores the
// sequence inputs replicated on the axis with an S(1) anchor after them, so
// that cp-load-balance (ContextParallelBalance.cpp) permutes them before
// their local slice. `why`: what the note says ("" when off by default).
Expected<bool> balanceRing(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                           schema::ResolvedPlacements& placements, int64_t axis, const ir::Dim& length,
                           std::string& why) {
  ir::Graph& g = program.graph;
  const std::optional<bool>& asked = schema.contextParallel->loadBalance;
  bool causal = false;
  for (const auto& n : g.nodes())
    if (const Argument* c = n->input("causal"); isRingOp(n->target()) && c && !c->ints.empty() && c->ints[0])
      causal = true;
  if (!asked.value_or(causal)) return false;
  const std::string& name = placements.mesh.axisNames()[static_cast<size_t>(axis)];
  int64_t size = placements.mesh.size(axis);
  const auto& specs = program.signature.inputs;
  for (size_t i = 0; i < specs.size() && i < placements.inputs.size(); ++i) {
    if (specs[i].kind == ir::InputKind::UserInput ||
        !placements.inputs[i].placements[static_cast<size_t>(axis)].isShard())
      continue;
    if (!asked) {
      why = ", not load-balanced: parameters are sharded on '" + name + "'";
      return false;
    }
    return Status::error("load_balance with parameters sharded on '" + name +
                         "' (fsdp over the cp axis) is not built; set \"load_balance\": false or keep the "
                         "parameters off '" +
                         name + "'");
  }
  std::vector<ir::Value*> seq;
  for (size_t i = 0; i < g.inputs().size() && i < placements.inputs.size(); ++i)
    if (specs[i].kind == ir::InputKind::UserInput &&
        placements.inputs[i].placements[static_cast<size_t>(axis)].isShard())
      seq.push_back(g.inputs()[i]);
  if (const ir::Node* n = shiftsSequence(seq, length.isStatic() ? length.value() : 0)) {
    std::string what = "%" + n->name() + " (" + n->target() + ") shifts or reorders a sequence input";
    if (!asked) {
      why = ", not load-balanced: " + what;
      return false;
    }
    return Status::error(what +
                         ", which the load-balanced split's permuted order would break; shift it "
                         "before export (as torchtitan's data loader does) or set \"load_balance\": false");
  }
  if (!length.isStatic() || length.value() % (2 * size) != 0)
    return Status::error("the sequence length " + length.str() + " does not split into 2 x " +
                         std::to_string(size) +
                         " chunks for the load-balanced causal split; pad the sequence "
                         "to a multiple of " +
                         std::to_string(2 * size) + " or set \"load_balance\": false");
  for (const auto& n : g.nodes()) {
    if (!isRingOp(n->target())) continue;
    std::vector<ir::NamedArgument> in = n->inputs();
    in.push_back({"load_balance", Argument::boolean(true), true});
    n->setInputs(std::move(in));
  }
  std::vector<std::pair<ir::Value*, ShardingSpec>> pins;
  const auto& inputs = g.inputs();
  for (size_t i = 0; i < inputs.size() && i < placements.inputs.size(); ++i) {
    Placement& p = placements.inputs[i].placements[static_cast<size_t>(axis)];
    if (specs[i].kind != ir::InputKind::UserInput || !p.isShard()) continue;
    pins.emplace_back(inputs[i], placements.inputs[i]);
    p = Placement::replicate();
  }
  SPMD_RETURN_IF_ERROR(insertLayoutAnchors(g, pins, "_cp", "spmd_context_parallel"));
  why = ", load-balanced: rank r holds chunks r and " + std::to_string(2 * size - 1) + "-r of " +
        std::to_string(2 * size) + " (head + tail)";
  return true;
}

}  // namespace

Status applyContextParallel(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                            schema::ResolvedPlacements& placements, const CompileOptions& options) {
  if (!schema.contextParallel) return Status::ok();
  std::string where = schema.source + ": " + schema.contextParallel->pointer + ": context parallelism: ";
  SPMD_ASSIGN_OR_RETURN(int64_t axis, axisOf(schema, placements.mesh, where));
  const std::string& axisName = placements.mesh.axisNames()[static_cast<size_t>(axis)];
  int64_t size = placements.mesh.size(axis);
  std::vector<AttentionSite> sites = findAttention(program.graph);
  if (sites.empty())
    return Status::error(where +
                         "found no attention (a scaled-dot-product op, or a softmax over the last dim "
                         "between a matmul of queries and keys and a matmul with the values)");
  const ir::Dim length = sites.front().length;
  for (const AttentionSite& s : sites)
    if (!(s.length == length))
      return Status::error(where + "attentions of different lengths (" + length.str() + " and " +
                           s.length.str() + ", %" + s.node->name() + "); one sequence is sharded");
  if (length.isStatic() && length.value() % size != 0)
    return Status::error(where + "the sequence length " + length.str() + " does not divide over '" +
                         axisName + "' (size " + std::to_string(size) +
                         "); pad the sequence to a multiple of " + std::to_string(size));
  SPMD_ASSIGN_OR_RETURN(int sharded, shardUserInputs(program, placements, axis, length));
  if (sharded == 0)
    return Status::error(where + "no user input has the sequence (length " + length.str() + ") as its dim 1");
  if (schema.contextParallel->rotate == "ring") {
    auto rung = applyRingAttention(program, schema, placements, options, axis);
    if (!rung) return Status::error(where + rung.status().message());
    const RingCount& ring = *rung;
    if (ring.attentions != static_cast<int>(sites.size()))
      return Status::error(where + "ring attention took " + std::to_string(ring.attentions) + " of the " +
                           std::to_string(sites.size()) + " attentions found; use \"rotate\": \"allgather\"");
    std::string balance;
    if (auto lb = balanceRing(program, schema, placements, axis, length, balance); !lb)
      return Status::error(where + lb.status().message());
    placements.notes.push_back(
        "context parallelism on '" + axisName + "' (" + schema.contextParallel->pointer.substr(1) +
        ", rotate ring): " + std::to_string(sharded) + " user inputs sharded on dim 1 (sequence " +
        length.str() + " over " + std::to_string(size) + "), " + std::to_string(ring.attentions) +
        " attentions (" + std::to_string(ring.fused) + " fused) rotate key/value blocks around '" + axisName +
        "' (ring attention)" + balance);
    return Status::ok();
  }
  if (schema.contextParallel->loadBalance.value_or(false))
    return Status::error(
        where +
        "\"load_balance\": true is built for \"rotate\": \"ring\" only (the all-gather "
        "form computes every rank's whole [seq/cp, seq] block, so there is no skipped work to "
        "balance); set \"rotate\": \"ring\" or drop \"load_balance\"");
  auto masks = explicitCausalMasks(program.graph);
  if (!masks) return Status::error(where + masks.status().message());
  sites = findAttention(program.graph);  // the rewrite kept the nodes; refind after reordering
  if (Status st = pinAttention(program, schema, placements, options, axis, sites); !st.isOk())
    return Status::error(where + st.message());
  int fused = static_cast<int>(std::count_if(sites.begin(), sites.end(), [](auto& s) { return s.fused; }));
  placements.notes.push_back(
      "context parallelism on '" + axisName + "' (" + schema.contextParallel->pointer.substr(1) +
      "): " + std::to_string(sharded) + " user inputs sharded on dim 1 (sequence " + length.str() + " over " +
      std::to_string(size) + "), " + std::to_string(sites.size()) + " attentions (" + std::to_string(fused) +
      " fused) read sharded queries and all-gathered keys and values" +
      (*masks > 0 ? ", " + std::to_string(*masks) + " causal masks made explicit" : ""));
  return Status::ok();
}

Status ContextParallel::run(ir::ExportedProgram& program, GraphPassContext& context) {
  return applyContextParallel(program, context.schema, *context.placements, context.options);
}

}  // namespace spmd::passes
