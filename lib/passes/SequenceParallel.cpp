// Sequence parallelism (see SequenceParallel.h).
//
// Invariants: anchors are inserted only on forward values (a norm is found
// from its forward ops: a mean over the last dim, layer_norm or rms_norm),
// each right after its value's producer, and every other reader of the value
// (the backward of a train step included) reads the anchor, so the saved
// activations of the norms and residual adds stay sharded too.
#include "passes/SequenceParallel.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "passes/Anchors.h"
#include "passes/GraphPass.h"
#include "sharding/Propagation.h"
#include "sharding/RuleText.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

using sharding::Placement;
using sharding::ShardingSpec;

bool isFusedNorm(const std::string& t) {
  return t == "aten.native_layer_norm.default" || t == "aten.layer_norm.default" ||
         t == "aten.rms_norm.default" || t == "aten._fused_rms_norm.default";
}

bool isMatmul(const std::string& t) {
  return t == "aten.mm.default" || t == "aten.addmm.default" || t == "aten.bmm.default" ||
         t == "aten.linear.default" || t == "aten.matmul.default";
}

bool isViewLike(const std::string& t) {
  return t == "aten.view.default" || t == "aten._unsafe_view.default" || t == "aten.reshape.default";
}

// The ops a norm is made of once decomposed (RMSNorm, LayerNorm).
bool isNormOp(const std::string& t) {
  static const std::set<std::string> kOps = {
      "aten.pow.Tensor_Scalar",   "aten.mean.dim",         "aten.add.Tensor",         "aten.add.Scalar",
      "aten.sub.Tensor",          "aten.mul.Tensor",       "aten.mul.Scalar",         "aten.div.Tensor",
      "aten.rsqrt.default",       "aten.sqrt.default",     "aten.reciprocal.default", "aten.var.correction",
      "aten.var_mean.correction", "aten._to_copy.default", "aten.neg.default"};
  return kOps.count(t) != 0 || isFusedNorm(t);
}

ir::Value* tensorInput(const ir::Node& n, std::string_view name) {
  const ir::Argument* a = n.input(name);
  return a != nullptr && a->kind == ir::Argument::Kind::Tensor ? a->value() : nullptr;
}

// The value a norm starting at `n` normalizes, or null: the input of a fused
// norm, or X of mean(X) / mean(pow(X, 2)) / mean(X * X) over the last dim
// (through one dtype cast).
ir::Value* normInput(const ir::Node& n) {
  if (isFusedNorm(n.target())) return tensorInput(n, "input");
  if (n.target() != "aten.mean.dim") return nullptr;
  ir::Value* v = tensorInput(n, "self");
  const ir::Argument* dims = n.input("dim");
  if (v == nullptr || dims == nullptr || dims->ints.size() != 1) return nullptr;
  int64_t rank = v->type().rank();
  if (dims->ints[0] != -1 && dims->ints[0] != rank - 1) return nullptr;
  if (const ir::Node* p = v->producer()) {
    bool square = p->target() == "aten.pow.Tensor_Scalar" ||
                  (p->target() == "aten.mul.Tensor" && tensorInput(*p, "self") == tensorInput(*p, "other"));
    if (square && tensorInput(*p, "self") != nullptr) v = tensorInput(*p, "self");
  }
  if (const ir::Node* p = v->producer(); p != nullptr && p->target() == "aten._to_copy.default")
    v = tensorInput(*p, "self") != nullptr ? tensorInput(*p, "self") : v;
  return v->type().rank() >= 2 ? v : nullptr;
}

// The norm ops reachable from `x` whose every tensor operand is `x`, another
// of them, or a weight (a rank <= 1 graph input or constant); their values.
std::unordered_set<const ir::Value*> normRegion(const ir::Graph& g, ir::Value* x) {
  std::unordered_set<const ir::Value*> region{x};
  std::unordered_set<const ir::Value*> inputs(g.inputs().begin(), g.inputs().end());
  int start = x->producer() != nullptr ? x->producer()->index() + 1 : 0;
  for (size_t i = static_cast<size_t>(start); i < g.nodes().size(); ++i) {
    const ir::Node& n = *g.nodes()[i];
    if (!isNormOp(n.target())) continue;
    bool reads = false, closed = true;
    for (ir::Value* v : n.inputValues()) {
      if (!v->isTensor()) continue;
      bool in = region.count(v) != 0;
      reads = reads || in;
      closed = closed && (in || (inputs.count(v) != 0 && v->type().rank() <= 1) || v->type().rank() == 0);
    }
    if (!reads || !closed) continue;
    for (ir::Value* r : n.outputValues()) region.insert(r);
  }
  return region;
}

// True when a matmul reads `v`, directly or through view ops.
bool readByMatmul(const ir::Value& v, int depth = 0) {
  for (const ir::Node* u : v.users()) {
    if (isMatmul(u->target())) return true;
    if (isViewLike(u->target()) && depth < 4)
      for (const ir::Value* r : u->outputValues())
        if (readByMatmul(*r, depth + 1)) return true;
  }
  return false;
}

void addOnce(std::vector<ir::Value*>& list, ir::Value* v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

// Up from `v` through view ops (at most 4).
ir::Value* throughViews(ir::Value* v) {
  for (int i = 0; i < 4 && v->producer() != nullptr && isViewLike(v->producer()->target()); ++i)
    if (ir::Value* in = tensorInput(*v->producer(), "self")) v = in;
  return v;
}

// For a block output made by a linear (view(mm(x, Wt))): the gradient the
// backward's mm(grad, permute(Wt)) reads, shaped like the block output where
// a view allows.
void addBlockOutputGrad(ir::Value& b, SequenceParallelPlan& plan) {
  ir::Value* mmOut = throughViews(&b);
  const ir::Node* mm = mmOut->producer();
  if (mm == nullptr || (mm->target() != "aten.mm.default" && mm->target() != "aten.addmm.default")) return;
  const ir::Value* wt = tensorInput(*mm, "mat2");
  if (wt == nullptr) return;
  for (const ir::Node* t : wt->users()) {
    if (t == mm || (t->target() != "aten.permute.default" && t->target() != "aten.t.default")) continue;
    for (const ir::Value* tv : t->outputValues())
      for (const ir::Node* back : tv->users()) {
        ir::Value* grad = back->target() == "aten.mm.default" ? tensorInput(*back, "self") : nullptr;
        if (grad == nullptr || tensorInput(*back, "mat2") != tv) continue;
        ir::Value* g = throughViews(grad);
        addOnce(plan.blockOutputGrads, g->type().sizes == b.type().sizes ? g : grad);
      }
  }
}

// True when `v` is `root`, or computed from it alone by at most 4 nodes of
// one tensor operand (clamp, casts, views).
bool derivedFrom(const ir::Value* v, const ir::Value* root) {
  for (int i = 0; i < 5 && v != nullptr; ++i) {
    if (v == root) return true;
    const ir::Node* p = v->producer();
    std::vector<ir::Value*> ins;
    if (p != nullptr)
      for (ir::Value* in : p->inputValues())
        if (in->isTensor()) ins.push_back(in);
    v = ins.size() == 1 ? ins[0] : nullptr;
  }
  return false;
}

// For a stream value an embedding produces: the gradient its backward
// (embedding_dense_backward, or index_put over the same indices) reads,
// with the embedding's weight.
void addEmbeddingGrads(const ir::Graph& g, const ir::Value& x, SequenceParallelPlan& plan) {
  const ir::Node* emb = x.producer();
  if (emb == nullptr || emb->target() != "aten.embedding.default") return;
  const ir::Value* indices = tensorInput(*emb, "indices");
  const ir::Value* weight = tensorInput(*emb, "weight");
  if (indices == nullptr || weight == nullptr) return;
  for (const auto& n : g.nodes()) {
    const std::string& t = n->target();
    bool dense = t == "aten.embedding_dense_backward.default";
    if (!dense && t != "aten.index_put.default" && t != "aten._unsafe_index_put.default") continue;
    const ir::Argument* idx = n->input("indices");
    if (idx == nullptr || idx->values.size() != 1 || !derivedFrom(idx->values[0], indices)) continue;
    ir::Value* grad = tensorInput(*n, dense ? "grad_output" : "values");
    if (grad != nullptr && grad->type().sizes == x.type().sizes)
      plan.embeddingGrads.emplace_back(grad, weight);
  }
}

// The keys' lengths of the attention ops (softmax's dim, SDPA's key dim -2).
std::vector<ir::Dim> attentionLengths(const ir::Graph& g) {
  std::vector<ir::Dim> out;
  for (const auto& n : g.nodes()) {
    const std::string& t = n->target();
    if (t == "aten._softmax.default" || t == "aten._safe_softmax.default" || t == "aten.softmax.int") {
      ir::Value* self = tensorInput(*n, "self");
      const ir::Argument* dim = n->input("dim");
      if (self == nullptr || dim == nullptr || dim->ints.size() != 1) continue;
      int64_t rank = self->type().rank(), d = dim->ints[0] < 0 ? dim->ints[0] + rank : dim->ints[0];
      if (d >= 0 && d < rank) out.push_back(self->type().sizes[static_cast<size_t>(d)]);
    } else if (t.rfind("aten.scaled_dot_product", 0) == 0 || t.rfind("aten._scaled_dot_product", 0) == 0) {
      ir::Value* key = tensorInput(*n, "key");
      if (key != nullptr && key->type().rank() >= 2)
        out.push_back(key->type().sizes[key->type().sizes.size() - 2]);
    }
  }
  return out;
}

// The sequence dim of the residual stream `x` ([..., hidden]): the one dim
// before the hidden one as long as the attention's keys; else 1 (batch
// first) for rank >= 3, 0 for rank 2.
std::pair<int64_t, std::string> findSeqDim(const ir::Graph& g, const ir::Value& x) {
  std::vector<ir::Dim> lengths = attentionLengths(g);
  std::vector<int64_t> hits;
  int64_t rank = x.type().rank();
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (std::find(lengths.begin(), lengths.end(), x.type().sizes[static_cast<size_t>(d)]) != lengths.end())
      hits.push_back(d);
  if (hits.size() == 1)
    return {hits[0], "the dim as long as the attention's keys (" +
                         x.type().sizes[static_cast<size_t>(hits[0])].str() + ")"};
  int64_t d = rank >= 3 ? 1 : 0;
  return {d, std::string(hits.empty() ? "no attention length found" : "several dims as long as the keys") +
                 ": dim " + std::to_string(d) + " (batch first); give {\"axis\": ..., \"dim\": d} to choose"};
}

}  // namespace

Expected<SequenceParallelPlan> findSequenceParallelPlan(const ir::Graph& g, std::optional<int64_t> dim) {
  SequenceParallelPlan plan;
  std::unordered_map<const ir::Value*, std::unordered_set<const ir::Value*>> regions;
  std::vector<ir::Value*> normInputs;
  for (const auto& n : g.nodes()) {
    ir::Value* x = normInput(*n);
    if (x == nullptr || regions.count(x) != 0) continue;
    regions[x] = normRegion(g, x);
    normInputs.push_back(x);
  }
  std::unordered_set<const ir::Value*> addResults;
  for (ir::Value* x : normInputs) {
    for (ir::Node* u : x->users()) {
      ir::Value* self = tensorInput(*u, "self");
      ir::Value* other = tensorInput(*u, "other");
      if (u->target() != "aten.add.Tensor" || self == nullptr || other == nullptr) continue;
      ir::Value* branch = self == x ? other : self;
      if (regions[x].count(branch) != 0 || branch->type().sizes != x->type().sizes) continue;
      addOnce(plan.stream, x);
      if (regions.count(branch) == 0) addOnce(plan.blockOutputs, branch);
      for (ir::Value* r : u->outputValues()) addResults.insert(r);
    }
  }
  for (ir::Value* x : normInputs)
    if (addResults.count(x) != 0) addOnce(plan.stream, x);
  if (plan.stream.empty())
    return Status::error(
        "found no transformer block: no norm (a mean over the last dim, layer_norm or rms_norm) whose input "
        "also feeds a residual add; drop the \"sequence_parallel\" field, or the tp_plan's sequence_parallel "
        "entries, to run tensor parallelism without it");
  std::sort(plan.stream.begin(), plan.stream.end(), [](auto* a, auto* b) { return a->id() < b->id(); });
  for (const ir::Value* x : plan.stream) addEmbeddingGrads(g, *x, plan);
  for (ir::Value* b : plan.blockOutputs) addBlockOutputGrad(*b, plan);
  for (ir::Value* x : plan.stream) {
    std::vector<ir::Value*> outs;  // in value order: the program must not depend on hashing
    for (const ir::Value* v : regions[x])
      if (v != x && v->type().sizes == x->type().sizes && readByMatmul(*v))
        outs.push_back(const_cast<ir::Value*>(v));
    std::sort(outs.begin(), outs.end(), [](auto* a, auto* b) { return a->id() < b->id(); });
    for (ir::Value* v : outs) addOnce(plan.normOutputs, v);
  }
  const ir::Value& first = *plan.stream.front();
  int64_t rank = first.type().rank();
  if (dim) {
    if (*dim < 0 || *dim >= rank - 1)
      return Status::error("dim " + std::to_string(*dim) + " is not a sequence dim of the residual stream %" +
                           first.name() + " " + first.type().str() + " (dims 0 to " +
                           std::to_string(rank - 2) + "; the last one is the hidden dim)");
    plan.seqDim = *dim;
    plan.seqDimHow = "given";
  } else {
    std::tie(plan.seqDim, plan.seqDimHow) = findSeqDim(g, first);
  }
  return plan;
}

namespace {

// The mesh axis the request names (empty: the tp_plan's axis).
Expected<int64_t> axisOf(const schema::PlacementSchema& s, const sharding::Mesh& mesh) {
  const schema::SequenceParallelRequest& req = *s.sequenceParallel;
  std::string name = !req.axis.empty() ? req.axis : !s.tpAxis.empty() ? s.tpAxis : "tp";
  if (int64_t a = mesh.axisIndex(name); a >= 0) return a;
  if (req.axis.empty() && s.tpAxis.empty() && mesh.numAxes() == 1) return int64_t{0};
  return Status::error(s.source + ": " + req.pointer + ": the mesh " + mesh.str() + " has no axis '" + name +
                       "' (axes: " + joined(mesh.axisNames()) + "); name the tensor-parallel axis");
}

}  // namespace

Status applySequenceParallel(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                             schema::ResolvedPlacements& placements, const CompileOptions& options) {
  if (!schema.sequenceParallel) return Status::ok();
  const schema::SequenceParallelRequest& req = *schema.sequenceParallel;
  std::string where = schema.source + ": " + req.pointer + ": ";
  SPMD_ASSIGN_OR_RETURN(int64_t axis, axisOf(schema, placements.mesh));
  auto plan = findSequenceParallelPlan(program.graph, req.dim);
  if (!plan) return Status::error(where + "sequence parallelism: " + plan.status().message());
  const std::string& axisName = placements.mesh.axisNames()[static_cast<size_t>(axis)];
  std::vector<ir::Value*> values = plan->stream;
  values.insert(values.end(), plan->blockOutputs.begin(), plan->blockOutputs.end());
  values.insert(values.end(), plan->normOutputs.begin(), plan->normOutputs.end());
  values.insert(values.end(), plan->blockOutputGrads.begin(), plan->blockOutputGrads.end());
  const auto& graphInputs = program.graph.inputs();
  for (const auto& [grad, weight] : plan->embeddingGrads) {
    auto it = std::find(graphInputs.begin(), graphInputs.end(), weight);
    size_t i = static_cast<size_t>(it - graphInputs.begin());
    if (it != graphInputs.end() && placements.inputs[i].placements[static_cast<size_t>(axis)].isReplicate())
      addOnce(values, grad);
  }
  SPMD_ASSIGN_OR_RETURN(std::vector<ShardingSpec> specs,
                        baseLayouts(program, schema, placements, options, values));
  std::vector<std::pair<ir::Value*, ShardingSpec>> pins;
  size_t sharded = plan->stream.size() + plan->blockOutputs.size();
  for (size_t i = 0; i < values.size(); ++i) {
    specs[i].placements[static_cast<size_t>(axis)] =
        i < sharded ? Placement::shard(plan->seqDim) : Placement::replicate();
    pins.emplace_back(values[i], specs[i]);
  }
  Status st = insertLayoutAnchors(program.graph, pins, "_sp", "spmd_sequence_parallel");
  if (!st.isOk()) return st.withContext(where + "sequence parallelism");
  placements.notes.push_back(
      "sequence parallelism on '" + axisName + "' (" + req.pointer.substr(1) +
      "): " + std::to_string(plan->stream.size()) + " residual-stream values and " +
      std::to_string(plan->blockOutputs.size()) + " block outputs sharded on dim " +
      std::to_string(plan->seqDim) + " (" + plan->seqDimHow + "), " +
      std::to_string(plan->normOutputs.size()) + " norm outputs gathered before their linears" +
      (values.size() > sharded + plan->normOutputs.size()
           ? ", " + std::to_string(values.size() - sharded - plan->normOutputs.size()) +
                 " gradients gathered in the backward"
           : std::string()));
  return Status::ok();
}

Status SequenceParallel::run(ir::ExportedProgram& program, GraphPassContext& context) {
  return applySequenceParallel(program, context.schema, *context.placements, context.options);
}

}  // namespace spmd::passes
