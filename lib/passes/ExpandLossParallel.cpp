// Loss parallelism: log-softmax and cross-entropy's pick and scatter on
// logits sharded on their class dim (a column-parallel lm_head), as
// DTensor's loss_parallel. With %view_54 f32[32, 256] [S(1)] on tp = 2:
//
//   %_log_softmax = aten._log_softmax.default(%view_54, 1, false)          (global)
// becomes
//   %_log_softmax_max = aten.amax.default(%view_54, [1], true)              f32[32, 1]
//   %_log_softmax_max_all_reduce = spmd.all_reduce(%_log_softmax_max, "tp", "max")
//   %_log_softmax_shifted = aten.sub.Tensor(%view_54, %_log_softmax_max_all_reduce)
//   %_log_softmax_exp = aten.exp.default(%_log_softmax_shifted)
//   %_log_softmax_sumexp = aten.sum.dim_IntList(%_log_softmax_exp, [1], true)
//   %_log_softmax_sumexp_all_reduce = spmd.all_reduce(%_log_softmax_sumexp, "tp", "sum")
//   %_log_softmax_lse = aten.log.default(%_log_softmax_sumexp_all_reduce)
//   %_log_softmax: f32[32, 128] = aten.sub.Tensor(%_log_softmax_shifted, %_log_softmax_lse)
//
// and the target's pick (one index per row) compares the index with the
// global positions this rank holds:
//   %gather_positions = aten.arange.default(256, dtype=i64) -> spmd.local_slice(.., "tp", 0) -> unsqueeze
//   %gather_hit = aten.eq.Tensor(%unsqueeze_12, %gather_positions)        b8[32, 128]
//   %gather_masked = aten.where.ScalarOther(%gather_hit, %_log_softmax, 0)
//   %gather: f32[32, 1] = aten.sum.dim_IntList(%gather_masked, [1], true) [P(sum)]
// (the pending sum is the target-logit all-reduce reshard() adds where it
// is needed). The backward's scatter of the target's gradient writes only
// where the index hits: where(hit, value, self); the row sum of that one-hot
// gradient (sharding/rules/LossPattern.h) is the per-row factor times the
// value, no collective:
//   %sum_3: f32[32, 1] = aten.mul.Tensor(%where_5, -1.0)
// An undecomposed _log_softmax_backward_data needs one sum all-reduce of [N, 1].
//
// Positions come from spmd.local_slice of the global arange, the same chunk
// every other sharded tensor of that layout gets: uneven chunks need
// nothing here. Where a rank's chunk is empty, amax reads it padded with
// one -inf (aten.constant_pad_nd), which the max all-reduce ignores.
#include "passes/ExpandLossParallel.h"

#include <limits>

#include "sharding/CostModel.h"
#include "sharding/rules/Helpers.h"
#include "sharding/rules/LossPattern.h"

namespace spmd::passes {
namespace detail {
namespace {

int64_t normalizedDim(const ir::Node& n, int64_t rank) {
  const Argument* d = n.input("dim");
  int64_t dim = d && !d->ints.empty() ? d->ints[0] : 0;
  return sharding::normalizeDim(dim, rank);
}

// Mesh axes (of size > 1) that shard `dim` in `spec`. Strided shards are
// fine for everything but the pick's positions (Emitter::positions).
std::vector<int64_t> shardAxes(const ShardingSpec& spec, int64_t dim, const sharding::Mesh& mesh) {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < static_cast<int64_t>(spec.placements.size()); ++a) {
    const Placement& p = spec.placements[static_cast<size_t>(a)];
    if (p.isShard(dim) && mesh.size(a) != 1) axes.push_back(a);
  }
  return axes;
}

const Argument* argOf(const std::vector<ir::NamedArgument>& args, std::string_view name) {
  for (const auto& na : args)
    if (na.name == name) return &na.arg;
  return nullptr;
}

}  // namespace

class LossParallel::Emitter {
 public:
  Emitter(Expander& e, const ir::Node& n, const sharding::NodeSharding& ns, std::vector<int64_t> axes)
      : e_(e),
        n_(n),
        ns_(ns),
        axes_(std::move(axes)),
        where_("node %" + n.name() + " (" + n.target() + ")") {}

  // A local value `type` = target(args), named after the node.
  Expected<ir::Value*> op(const std::string& target, std::vector<ir::NamedArgument> args, ir::TensorType type,
                          const std::string& suffix) {
    std::string name = e_.uniqueName(n_.name() + "_" + suffix);
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, e_.g_->addValue(name, ir::ValueKind::Tensor));
    type.strides.clear();
    v->mutableType() = std::move(type);
    SPMD_ASSIGN_OR_RETURN(ir::Node * node,
                          e_.g_->addNode(name, target, std::move(args), {Argument::tensor(v)}));
    node->mutableMetadata() = n_.metadata();
    return v;
  }

  // `x` all-reduced with `reduce` over every axis that shards the dim.
  Expected<ir::Value*> allReduce(ir::Value* x, const char* reduce) {
    int64_t bytes = ir::elementSize(x->type().dtype);
    for (const auto& d : x->type().sizes) bytes *= d.value();
    for (int64_t a : axes_) {
      const std::string& axis = e_.mesh_.axisNames()[static_cast<size_t>(a)];
      std::string name = e_.uniqueName(x->name() + "_all_reduce");
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, e_.g_->addValue(name, ir::ValueKind::Tensor));
      v->mutableType() = x->type();
      SPMD_ASSIGN_OR_RETURN(ir::Node * node, e_.g_->addNode(name, std::string(ir::kAllReduce),
                                                            {{"self", Argument::tensor(x), false},
                                                             {"axis", stringArg(axis), false},
                                                             {"op", stringArg(reduce), false}},
                                                            {Argument::tensor(v)}));
      std::string reason = where_ + ": loss parallel " + std::string(reduce) + " over the class shards";
      node->mutableMetadata().other["spmd_reason"] = reason;
      int64_t moved = sharding::CostModel::bytesMoved(sharding::CollectiveKind::AllReduce, e_.mesh_.size(a),
                                                      bytes, bytes);
      e_.records_.push_back({name, "all_reduce", axis, moved, reason, x->name(),
                             "[P(" + std::string(reduce) + ")]", "[R]",
                             ir::userSourceLine(n_.metadata().stackTrace)});
      x = v;
    }
    return x;
  }

  // The node's one result = target(args), in its propagated layout.
  Status finish(const std::string& target, std::vector<ir::NamedArgument> args) {
    const ir::Value* src = sharding::tensorResults(n_)[0];
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, e_.cloneValue(*src, src->name(), ns_.results[0]));
    SPMD_ASSIGN_OR_RETURN(ir::Node * node,
                          e_.g_->addNode(n_.name(), target, std::move(args), {Argument::tensor(v)}));
    node->mutableMetadata() = n_.metadata();
    e_.map_[static_cast<size_t>(src->id())] = v;
    return Status::ok();
  }

  // [.., L, ..]: this rank's global positions along `dim` of a rank-`rank`
  // tensor of global size `size` there and local size `local`, as an int64
  // tensor of that rank.
  Expected<ir::Value*> positions(int64_t size, int64_t dim, int64_t rank, const ir::Dim& local) {
    ir::TensorType t;
    t.dtype = ir::ScalarType::Long;
    t.sizes = {ir::Dim(size)};
    SPMD_ASSIGN_OR_RETURN(ir::Value * x, op("aten.arange.default",
                                            {{"end", Argument::integer(size), false},
                                             {"dtype", Argument::scalarType(ir::ScalarType::Long), true}},
                                            t, "positions"));
    const ShardingSpec& spec = ns_.operands[0];
    for (int64_t a : axes_) {
      // Each rank's chunk is its own; the last one is the tensor's local size.
      t.sizes[0] = a == axes_.back() ? local : divideDim(t.sizes[0], e_.mesh_.size(a));
      std::vector<ir::NamedArgument> sliceArgs = {
          {"self", Argument::tensor(x), false},
          {"axis", stringArg(e_.mesh_.axisNames()[static_cast<size_t>(a)]), false},
          {"dim", Argument::integer(0), false}};
      const Placement& p = spec.placements[static_cast<size_t>(a)];
      if (p.isStrided()) {
        // One strided shard alone on the dim: its runs are the slice's.
        if (axes_.size() != 1)
          return Status::error(where_ + ": loss parallelism: the class dim is split by a strided shard " +
                               spec.str() + " and another axis; lay the logits out with plain S(d)");
        sliceArgs.push_back({"split_factor", Argument::integer(p.splitFactor), true});
      }
      SPMD_ASSIGN_OR_RETURN(x, op(std::string(ir::kLocalSlice), std::move(sliceArgs), t, "positions"));
    }
    for (int64_t d = 0; d < rank - 1; ++d) {
      bool before = d < dim;
      t.sizes.insert(before ? t.sizes.begin() : t.sizes.end(), ir::Dim(1));
      SPMD_ASSIGN_OR_RETURN(
          x, op("aten.unsqueeze.default",
                {{"self", Argument::tensor(x), false}, {"dim", Argument::integer(before ? 0 : -1), false}}, t,
                "positions"));
    }
    return x;
  }

  const std::string& where() const { return where_; }

 private:
  Expander& e_;
  const ir::Node& n_;
  const sharding::NodeSharding& ns_;
  std::vector<int64_t> axes_;
  std::string where_;
};

namespace {

using T = std::vector<ir::NamedArgument>;

Argument tensorArg(ir::Value* v) { return Argument::tensor(v); }

ir::TensorType withDimOne(ir::TensorType t, int64_t dim) {
  t.sizes[static_cast<size_t>(dim)] = ir::Dim(1);
  return t;
}

// x with one -inf appended along `dim`: amax of a rank's empty chunk is
// then -inf, which the max all-reduce ignores.
Expected<ir::Value*> padMinusInf(LossParallel::Emitter& em, ir::Value* x, int64_t dim) {
  ir::TensorType t = x->type();
  std::vector<int64_t> pad(static_cast<size_t>(2 * (t.rank() - dim)), 0);  // last dim first
  pad.back() = 1;
  const ir::Dim& d = t.sizes[static_cast<size_t>(dim)];
  t.sizes[static_cast<size_t>(dim)] =
      d.isStatic() ? ir::Dim(d.value() + 1)
                   : ir::Dim(ir::symOp(ir::SymExpr::Kind::Add, {d.expr(), ir::symInteger(1)}), d.value() + 1);
  return em.op("aten.constant_pad_nd.default",
               {{"self", tensorArg(x), false},
                {"pad", Argument::integers(pad), false},
                {"value", Argument::floating(-std::numeric_limits<double>::infinity()), false}},
               t, "max_padded");
}

// log_softmax(x) = (x - max) - log(sum(exp(x - max))), max and sum global.
// `mayBeEmpty`: some rank's chunk of the class dim is empty.
Status logSoftmax(LossParallel::Emitter& em, ir::Value* x, int64_t dim, bool mayBeEmpty) {
  const ir::TensorType& t = x->type();
  T keep = {{"dim", Argument::integers({dim}), false}, {"keepdim", Argument::boolean(true), false}};
  ir::Value* forMax = x;
  if (mayBeEmpty) {
    SPMD_ASSIGN_OR_RETURN(forMax, padMinusInf(em, x, dim));
  }
  T amaxArgs = {{"self", tensorArg(forMax), false}};
  amaxArgs.insert(amaxArgs.end(), keep.begin(), keep.end());
  SPMD_ASSIGN_OR_RETURN(ir::Value * m, em.op("aten.amax.default", amaxArgs, withDimOne(t, dim), "max"));
  SPMD_ASSIGN_OR_RETURN(m, em.allReduce(m, "max"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * sh,
                        em.op("aten.sub.Tensor",
                              {{"self", tensorArg(x), false}, {"other", tensorArg(m), false}}, t, "shifted"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * ex,
                        em.op("aten.exp.default", {{"self", tensorArg(sh), false}}, t, "exp"));
  T sumArgs = {{"self", tensorArg(ex), false}};
  sumArgs.insert(sumArgs.end(), keep.begin(), keep.end());
  SPMD_ASSIGN_OR_RETURN(ir::Value * s, em.op("aten.sum.dim_IntList", sumArgs, withDimOne(t, dim), "sumexp"));
  SPMD_ASSIGN_OR_RETURN(s, em.allReduce(s, "sum"));
  SPMD_ASSIGN_OR_RETURN(
      ir::Value * lse, em.op("aten.log.default", {{"self", tensorArg(s), false}}, withDimOne(t, dim), "lse"));
  return em.finish("aten.sub.Tensor", {{"self", tensorArg(sh), false}, {"other", tensorArg(lse), false}});
}

// d/dx log_softmax: grad - exp(output) * sum(grad), the sum global.
Status logSoftmaxBackward(LossParallel::Emitter& em, ir::Value* grad, ir::Value* out, int64_t dim,
                          ir::ScalarType resultType) {
  const ir::TensorType& t = grad->type();
  SPMD_ASSIGN_OR_RETURN(ir::Value * s, em.op("aten.sum.dim_IntList",
                                             {{"self", tensorArg(grad), false},
                                              {"dim", Argument::integers({dim}), false},
                                              {"keepdim", Argument::boolean(true), false}},
                                             withDimOne(t, dim), "gradsum"));
  SPMD_ASSIGN_OR_RETURN(s, em.allReduce(s, "sum"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * ex,
                        em.op("aten.exp.default", {{"self", tensorArg(out), false}}, t, "exp"));
  SPMD_ASSIGN_OR_RETURN(ir::Value * p,
                        em.op("aten.mul.Tensor",
                              {{"self", tensorArg(ex), false}, {"other", tensorArg(s), false}}, t, "scaled"));
  if (resultType == t.dtype)
    return em.finish("aten.sub.Tensor", {{"self", tensorArg(grad), false}, {"other", tensorArg(p), false}});
  SPMD_ASSIGN_OR_RETURN(ir::Value * d,
                        em.op("aten.sub.Tensor",
                              {{"self", tensorArg(grad), false}, {"other", tensorArg(p), false}}, t, "diff"));
  return em.finish("aten._to_copy.default",
                   {{"self", tensorArg(d), false}, {"dtype", Argument::scalarType(resultType), true}});
}

// gather / scatter with one index per row: `hit` marks where the index
// names a position this rank holds.
Status pickOrWrite(LossParallel::Emitter& em, const ir::Node& n, const T& args, ir::Value* self, int64_t dim,
                   int64_t globalSize) {
  const Argument* index = argOf(args, "index");
  if (!index || !index->value()) return Status::error(em.where() + ": loss parallelism: no index tensor");
  ir::TensorType t = self->type();
  SPMD_ASSIGN_OR_RETURN(ir::Value * pos,
                        em.positions(globalSize, dim, t.rank(), t.sizes[static_cast<size_t>(dim)]));
  ir::TensorType hitType = t;
  hitType.dtype = ir::ScalarType::Bool;
  SPMD_ASSIGN_OR_RETURN(ir::Value * hit, em.op("aten.eq.Tensor",
                                               {{"self", Argument::tensor(index->value()), false},
                                                {"other", tensorArg(pos), false}},
                                               hitType, "hit"));
  if (n.target() == "aten.gather.default") {
    SPMD_ASSIGN_OR_RETURN(ir::Value * masked, em.op("aten.where.ScalarOther",
                                                    {{"condition", tensorArg(hit), false},
                                                     {"self", tensorArg(self), false},
                                                     {"other", Argument::floating(0.0), false}},
                                                    t, "masked"));
    return em.finish("aten.sum.dim_IntList", {{"self", tensorArg(masked), false},
                                              {"dim", Argument::integers({dim}), false},
                                              {"keepdim", Argument::boolean(true), false}});
  }
  if (n.target() == "aten.scatter.value") {
    const Argument* value = argOf(args, "value");
    if (!value) return Status::error(em.where() + ": loss parallelism: no value");
    return em.finish(
        "aten.where.ScalarSelf",
        {{"condition", tensorArg(hit), false}, {"self", *value, false}, {"other", tensorArg(self), false}});
  }
  const Argument* src = argOf(args, "src");
  if (!src || !src->value()) return Status::error(em.where() + ": loss parallelism: no src tensor");
  return em.finish("aten.where.self", {{"condition", tensorArg(hit), false},
                                       {"self", Argument::tensor(src->value()), false},
                                       {"other", tensorArg(self), false}});
}

}  // namespace

// The one-hot gradient's row sum (rules/LossPattern.h) with the summed dim
// sharded: factor * value, the factor in the result's layout; no all-reduce.
Expected<bool> LossParallel::rowSum(Expander& e, const ir::Node& n, const sharding::NodeSharding& ns) {
  if (ns.operands.empty() || ns.results.size() != 1 || sharding::tensorResults(n).size() != 1) return false;
  std::string where = "node %" + n.name() + " (" + n.target() + ")";
  const ir::Value& in = *sharding::tensorOperands(n)[0];
  auto dims = sharding::rules::dimsArg(n, "dim", in.type().rank());
  if (dims.size() != 1) return false;
  std::vector<int64_t> axes = shardAxes(ns.operands[0], dims[0], e.mesh_);
  // Axes whose shards the rule let through to a whole (not pending) result.
  std::erase_if(axes,
                [&](int64_t a) { return ns.results[0].placements[static_cast<size_t>(a)].isPartial(); });
  if (axes.empty()) return false;
  auto m = sharding::rules::matchOneHotRowSum(n);
  if (!m) {
    // The pattern is not visible here (a node checked alone): sum and all-reduce.
    SPMD_ASSIGN_OR_RETURN(ir::Value * x, e.reshard(in, ns.operands[0], where, ""));
    const ir::Value* src = sharding::tensorResults(n)[0];
    LossParallel::Emitter em(e, n, ns, axes);
    SPMD_ASSIGN_OR_RETURN(
        ir::Value * sum,
        em.op("aten.sum.dim_IntList",
              {{"self", Argument::tensor(x), false},
               {"dim", Argument::integers(dims), false},
               {"keepdim", Argument::boolean(sharding::rules::boolArg(n, "keepdim", false)), false}},
              localType(src->type(), ns.results[0], e.mesh_), "local"));
    SPMD_ASSIGN_OR_RETURN(sum, em.allReduce(sum, "sum"));
    e.map_[static_cast<size_t>(src->id())] = sum;
    return true;
  }
  SPMD_ASSIGN_OR_RETURN(ir::Value * factor, e.reshard(*m->factor, ns.results[0], where,
                                                      ir::userSourceLine(n.metadata().stackTrace)));
  LossParallel::Emitter em(e, n, ns, axes);
  SPMD_RETURN_IF_ERROR(
      em.finish("aten.mul.Tensor", {{"self", Argument::tensor(factor), false}, {"other", m->value, false}}));
  return true;
}

Expected<bool> LossParallel::expand(Expander& e, const ir::Node& n, const sharding::NodeSharding& ns,
                                    const std::vector<ir::NamedArgument>& args) {
  const std::string& target = n.target();
  if (target == "aten.sum.dim_IntList") return rowSum(e, n, ns);
  bool softmax = target == "aten._log_softmax.default";
  bool backward = target == "aten._log_softmax_backward_data.default";
  bool pick =
      target == "aten.gather.default" || target == "aten.scatter.value" || target == "aten.scatter.src";
  if (!softmax && !backward && !pick) return false;
  auto operands = sharding::tensorOperands(n);
  // The operand whose class dim may be sharded: self, or backward's output.
  size_t which = backward ? 1 : 0;
  if (operands.size() <= which || ns.operands.size() <= which || sharding::tensorResults(n).size() != 1)
    return false;
  const ir::Value& global = *operands[which];
  int64_t dim = normalizedDim(n, global.type().rank());
  std::string where = "node %" + n.name() + " (" + target + ")";
  std::vector<int64_t> axes = shardAxes(ns.operands[which], dim, e.mesh_);
  if (axes.empty()) return false;
  const ir::Dim& size = global.type().sizes[static_cast<size_t>(dim)];
  if (!size.isStatic())
    return Status::error(where + ": loss parallelism: the class dim " + std::to_string(dim) +
                         " is symbolic; export it with a static vocabulary size");
  std::vector<ir::Value*> local;
  for (const auto& na : args)
    for (ir::Value* v : na.arg.values)
      if (v && v->isTensor()) local.push_back(v);
  LossParallel::Emitter em(e, n, ns, axes);
  if (softmax) {
    std::vector<int64_t> shape;
    for (const auto& d : global.type().sizes) shape.push_back(d.value());
    bool mayBeEmpty = false;
    for (int64_t r = 0; r < e.mesh_.numRanks() && !mayBeEmpty; ++r)
      mayBeEmpty = sharding::checkShardable(shape, ns.operands[which], e.mesh_).isOk() &&
                   sharding::localShape(shape, ns.operands[which], e.mesh_,
                                        e.mesh_.coords(r))[static_cast<size_t>(dim)] == 0;
    SPMD_RETURN_IF_ERROR(logSoftmax(em, local[0], dim, mayBeEmpty));
  }
  if (backward) {
    ir::ScalarType resultType = sharding::tensorResults(n)[0]->type().dtype;
    SPMD_RETURN_IF_ERROR(logSoftmaxBackward(em, local[0], local[1], dim, resultType));
  }
  if (pick) SPMD_RETURN_IF_ERROR(pickOrWrite(em, n, args, local[0], dim, size.value()));
  return true;
}

}  // namespace detail

namespace {

// Why the loss of `n` (class dim `dim` of `logits`, produced sharded on
// `axis`) is not computed on the shards, given the layout its node chose.
std::string notAppliedReason(const ir::Node& n, const sharding::NodeSharding& ns, int64_t dim) {
  const std::string& t = n.target();
  if (t == "aten.nll_loss_forward.default" || t == "aten.cross_entropy_loss.default" ||
      t == "aten.log_softmax.int")
    return "spmdc computes loss parallelism on the decomposed form (aten._log_softmax.default, then "
           "aten.gather.default or the decomposed nll); export the train step with core ATen decompositions "
           "(ExportedProgram.run_decompositions())";
  if (sharding::rules::boolArg(n, "half_to_float", false))
    return "half_to_float log-softmax keeps its dim whole";
  if (!ns.operands.empty() && ns.operands[0].shardsDim(dim))
    return "the class dim is sharded here: applied";  // not reached: caller checks
  return "the propagation found gathering the logits cheaper for this layout";
}

std::string bytesText(int64_t b) {
  std::string s = std::to_string(b), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out + " B";
}

}  // namespace

std::vector<std::string> lossParallelNotes(const ir::ExportedProgram& source,
                                           const sharding::Propagation& prop, const sharding::Mesh& mesh) {
  std::vector<std::string> notes;
  for (const auto& node : source.graph.nodes()) {
    const ir::Node& n = *node;
    const std::string& t = n.target();
    bool nll = t == "aten.nll_loss_forward.default" || t == "aten.cross_entropy_loss.default";
    if (t != "aten._log_softmax.default" && t != "aten.log_softmax.int" && !nll) continue;
    auto ops = sharding::tensorOperands(n);
    if (ops.empty() || static_cast<size_t>(n.index()) >= prop.nodes.size()) continue;
    const ir::Value& logits = *ops[0];
    int64_t rank = logits.type().rank();
    if (rank == 0) continue;
    int64_t dim =
        nll ? (rank >= 2 ? 1 : 0) : sharding::normalizeDim(sharding::rules::intArg(n, "dim", -1), rank);
    const sharding::ShardingSpec& produced = prop.values[static_cast<size_t>(logits.id())];
    const sharding::NodeSharding& ns = prop.nodes[static_cast<size_t>(n.index())];
    std::string axes;
    int64_t k = 1;
    for (int64_t a = 0; a < static_cast<int64_t>(produced.placements.size()); ++a) {
      if (!produced.placements[static_cast<size_t>(a)].isShard(dim) || mesh.size(a) == 1) continue;
      axes += (axes.empty() ? "" : ", ") + mesh.axisNames()[static_cast<size_t>(a)];
      k *= mesh.size(a);
    }
    if (axes.empty()) continue;
    std::string what = "loss parallel: node %" + n.name() + " (" + t + ") on %" + logits.name() + " " +
                       logits.type().str() + " " + produced.str() + ": ";
    if (nll || ns.operands.empty() || !ns.operands[0].shardsDim(dim)) {
      notes.push_back(what + "not applied, the logits are gathered on " + axes + ": " +
                      notAppliedReason(n, ns, dim));
      continue;
    }
    int64_t bytes = ir::elementSize(logits.type().dtype), rows = bytes;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t s = logits.type().sizes[static_cast<size_t>(d)].value();
      bytes *= s;
      rows *= d == dim ? 1 : s;
    }
    int64_t gather =
        sharding::CostModel::bytesMoved(sharding::CollectiveKind::AllGather, k, bytes / k, bytes);
    notes.push_back(what + "log-softmax on the class shards over " + axes +
                    " (a max and a sum all-reduce of " + bytesText(rows) +
                    " each instead of an all-gather of " + bytesText(bytes) + ", " + bytesText(gather) +
                    " per rank)");
  }
  return notes;
}

}  // namespace spmd::passes
