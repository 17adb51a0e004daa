// Internal to the expansion pass: the Expander and the small helpers its
// three source files share (Expand.cpp: inputs/outputs; ExpandReshard.cpp:
// reshard(); ExpandNode.cpp: one node at a time).
#pragma once

#include <map>

#include "ir/Collectives.h"
#include "passes/Expand.h"
#include "sharding/SymbolicShard.h"

namespace spmd::passes::detail {

using ir::Argument;
using sharding::Placement;
using sharding::ShardingSpec;

using sharding::isEvenSymbolic;
using sharding::shardCount;
/// `d` divided by `k` (symbolic: d // k).
ir::Dim divideDim(const ir::Dim& d, int64_t k);
/// The symbol bound at run time to a rank's coordinate on mesh axis
/// `axisName` ("__coord_tp").
std::string coordSymbol(const std::string& axisName);
/// The local size of dim `dim` (global size `global`) laid out as `spec`:
/// static where every split is even; an uneven static split is the
/// torch.chunk size at the rank's coordinates, e.g. 5 over 4 on tp:
/// Min(2, Max(0, 5 - 2*__coord_tp)) (hint: rank 0's size); symbolic sizes
/// divide symbolically (divideDim) where their trace-time size divides,
/// else take the same formula over the symbol.
ir::Dim localDim(const ir::Dim& global, const ShardingSpec& spec, int64_t dim, const sharding::Mesh& mesh);
/// A String argument.
Argument stringArg(const std::string& s);

struct LossParallel;  // loss parallelism (ExpandLossParallel.cpp)
class Resharding;     // one reshard() in progress (ExpandReshard.cpp)

/// Builds the local graph node by node (see Expand.h).
class Expander {
  friend struct LossParallel;  // loss parallelism: emits through emit's helpers and reshard's records
  friend class Resharding;     // reshard's steps: emit, pieceSizeArg and the records

 public:
  explicit Expander(const ExpandInput& in)
      : in_(in), src_(*in.source), prop_(*in.propagation), mesh_(in.mesh) {}

  Expected<program::Program> run() {
    program::Program out;
    out.mesh = mesh_;
    ir::ExportedProgram& dst = out.graph;
    dst.ranges = src_.ranges;
    dst.schemaMajor = src_.schemaMajor;
    dst.schemaMinor = src_.schemaMinor;
    dst.torchVersion = src_.torchVersion;
    dst.name = src_.name;
    g_ = &dst.graph;
    map_.assign(src_.graph.numValues(), nullptr);
    SPMD_RETURN_IF_ERROR(addInputs(dst, out));
    for (const auto& n : src_.graph.nodes()) SPMD_RETURN_IF_ERROR(expandNode(*n));
    SPMD_RETURN_IF_ERROR(addOutputs(dst, out));
    hoistLocalSizes();
    noteReshapedViews();
    out.collectives = std::move(records_);
    return out;
  }

 private:
  Status addInputs(ir::ExportedProgram& dst, program::Program& out) {
    for (size_t i = 0; i < src_.signature.inputs.size(); ++i) {
      ir::InputSpec spec = src_.signature.inputs[i];
      const ir::Value* v = spec.value;
      if (v) {
        SPMD_ASSIGN_OR_RETURN(ir::Value * nv, cloneValue(*v, v->name(), in_.inputSpecs[i]));
        g_->addInput(nv);
        map_[static_cast<size_t>(v->id())] = nv;
        spec.value = nv;
        out.inputs.push_back({in_.inputSpecs[i], v->type()});
      } else {
        out.inputs.push_back({ShardingSpec::replicated(mesh_.numAxes()), {}});
      }
      dst.signature.inputs.push_back(std::move(spec));
    }
    return Status::ok();
  }

  Status addOutputs(ir::ExportedProgram& dst, program::Program& out) {
    for (size_t i = 0; i < src_.signature.outputs.size(); ++i) {
      ir::OutputSpec spec = src_.signature.outputs[i];
      ir::Value* v = spec.arg.value();
      if (v && v->isTensor()) {
        const ShardingSpec& cur = prop_.values[static_cast<size_t>(v->id())];
        ShardingSpec want = in_.outputSpecs[i] ? *in_.outputSpecs[i] : cur;
        std::string who = "output " + std::string(ir::outputKindName(spec.kind)) + " " +
                          (spec.target.empty() ? v->name() : spec.target);
        SPMD_ASSIGN_OR_RETURN(ir::Value * nv, reshard(*v, want, who, ""));
        spec.arg = Argument::tensor(nv);
        out.outputs.push_back({want, v->type()});
      } else {
        if (v) spec.arg.values[0] = map_[static_cast<size_t>(v->id())];
        out.outputs.push_back({ShardingSpec::replicated(mesh_.numAxes()), {}});
      }
      g_->addOutput(spec.arg);
      dst.signature.outputs.push_back(std::move(spec));
    }
    return Status::ok();
  }

  // spmd.global_symbol nodes, and the spmd.local_size nodes that read only
  // constants and those, go first, so that passes moving a collective next
  // to its input's producer (async collectives) never place it before the
  // size it reads.
  void hoistLocalSizes() {
    std::vector<ir::Node*> symbols, sizes, rest;
    auto hoistable = [&](const ir::Node& n) {
      if (n.target() != ir::kLocalSize) return false;
      const Argument* size = n.input("size");
      return size == nullptr || size->values.empty() || size->values[0] == nullptr ||
             (size->values[0]->producer() && size->values[0]->producer()->target() == ir::kGlobalSymbol);
    };
    for (const auto& n : g_->nodes())
      (n->target() == ir::kGlobalSymbol ? symbols : hoistable(*n) ? sizes : rest).push_back(n.get());
    if (symbols.empty() && sizes.empty()) return;
    symbols.insert(symbols.end(), sizes.begin(), sizes.end());
    symbols.insert(symbols.end(), rest.begin(), rest.end());
    g_->setNodeOrder(symbols);
  }

  // One note for every view viewAsReshape rewrote (for --report).
  void noteReshapedViews() {
    if (!in_.notes || reshapedViews_.empty()) return;
    std::string names;
    for (size_t i = 0; i < reshapedViews_.size() && i < 8; ++i) names += (i ? ", " : "") + reshapedViews_[i];
    if (reshapedViews_.size() > 8) names += " and " + std::to_string(reshapedViews_.size() - 8) + " more";
    in_.notes->push_back(
        std::to_string(reshapedViews_.size()) +
        " view(s) of sharded tensors traced in a permuted layout run as aten.reshape.default "
        "(a view where the shard's layout allows it, else a copy): " +
        names);
  }

  std::string uniqueName(const std::string& base) {
    std::string name = base;
    for (int i = 1; g_->findValue(name) || src_.graph.findValue(name); ++i)
      name = base + "_" + std::to_string(i);
    return name;
  }

  Expected<ir::Value*> cloneValue(const ir::Value& v, const std::string& name, const ShardingSpec& spec) {
    if (v.isTensor() && !spec.placements.empty() && v.type().isStatic() && indivisible(v.type(), spec)) {
      std::vector<int64_t> shape;
      for (const auto& d : v.type().sizes) shape.push_back(d.value());
      Status ok = sharding::checkShardable(shape, spec, mesh_);
      if (!ok.isOk())
        return ok.withContext("value %" + v.name() + " " + v.type().str() + " laid out " + spec.str());
    }
    SPMD_ASSIGN_OR_RETURN(ir::Value * nv, g_->addValue(name, v.kind()));
    if (v.isTensor())
      nv->mutableType() = spec.placements.empty() ? v.type() : localType(v.type(), spec, mesh_);
    nv->setSymValue(v.symValue());
    return nv;
  }

  // True when some dim's size does not divide by the ranks sharding it
  // (uneven: such layouts must be plain torch.chunk splits).
  bool indivisible(const ir::TensorType& t, const ShardingSpec& spec) const {
    for (int64_t d = 0; d < t.rank(); ++d)
      if (t.sizes[static_cast<size_t>(d)].value() % shardCount(spec, d, mesh_) != 0) return true;
    return false;
  }

  // Appends a node computing `target(args)` with one local tensor result.
  Expected<ir::Value*> emit(const std::string& target, std::vector<ir::NamedArgument> args,
                            const ir::Value& like, const ShardingSpec& spec, const std::string& base,
                            const ir::NodeMetadata& meta) {
    std::string name = uniqueName(base);
    SPMD_ASSIGN_OR_RETURN(ir::Value * nv, cloneValue(like, name, spec));
    SPMD_ASSIGN_OR_RETURN(ir::Node * n, g_->addNode(name, target, std::move(args), {Argument::tensor(nv)}));
    n->mutableMetadata() = meta;
    return nv;
  }

  // The one place where layouts change: `v` (produced in its propagated
  // layout) as `want`, emitting collectives as needed (cached).
  Expected<ir::Value*> reshard(const ir::Value& v, const ShardingSpec& want, const std::string& consumer,
                               const std::string& sourceLine);

  Status expandNode(const ir::Node& n);
  Status localizeArgs(const ir::Node& n, const sharding::NodeSharding& ns,
                      std::vector<ir::NamedArgument>& args);
  Status localizeStrides(const ir::Node& n, const ir::TensorType& local,
                         std::vector<ir::NamedArgument>& args);
  Status localizeSplit(const ir::Node& n, const sharding::NodeSharding& ns,
                       std::vector<ir::NamedArgument>& args);
  Status localizeGroupNorm(const ir::Node& n, const sharding::NodeSharding& ns,
                           std::vector<ir::NamedArgument>& args);
  Expected<ir::Value*> localSize(ir::Value* globalSym, int64_t k, const ir::Node& n);
  // A SymInt computed at run time: this rank's size of dim `dim` (global
  // `size`, static) under `spec`; `local` is its symbolic form.
  Expected<ir::Value*> rankLocalSize(int64_t size, const ShardingSpec& spec, int64_t dim,
                                     const ir::Dim& local, const ir::NodeMetadata& meta);
  // The same for a symbolic global size (a SymInt value of the graph).
  Expected<ir::Value*> rankLocalSize(ir::Value* size, const ShardingSpec& spec, int64_t dim,
                                     const ir::Dim& local, const ir::NodeMetadata& meta);
  // The global value of dim `d` (a plain symbol of the exported program) at
  // run time: spmd.global_symbol(name), emitted once per symbol. Error
  // naming `where` for a dim that is an expression of symbols.
  Expected<ir::Value*> globalSymbol(const ir::Dim& d, const std::string& where, const ir::NodeMetadata& meta);
  // The `size` argument of a gather-like collective on `axis` of `dim` of
  // `v` laid out as `spec`: the piece the axis splits, when it splits
  // unevenly on some rank (nullopt when even everywhere). `sf` > 1: the
  // axis splits each of sf rows of the piece (a strided shard).
  Expected<std::optional<Argument>> pieceSizeArg(const ir::Value& v, const ShardingSpec& spec, int64_t axis,
                                                 int64_t dim, const ir::NodeMetadata& meta, int64_t sf = 1);
  // pieceSizeArg of a symbolic dim: nullopt where its trace-time size
  // divides (the program assumes s // k), else the global symbol's value
  // (or its local size under the earlier axes).
  Expected<std::optional<Argument>> symbolicPieceSizeArg(const ir::Value& v, const ShardingSpec& spec,
                                                         int64_t axis, int64_t dim,
                                                         const ir::NodeMetadata& meta);
  // Rewrites a mean over an unevenly sharded dim into sum * (shards /
  // global count), so that P(avg) divides by the global size.
  Status unevenMean(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                    std::vector<ir::NamedArgument>& args, double& scale);
  // Rewrites squeeze (every overload) to squeeze.dims over the dims whose
  // global size is 1, where a sharded dim could have one row locally.
  Status globalSqueeze(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                       std::vector<ir::NamedArgument>& args);
  // A view of a sharded operand whose traced strides are not row-major
  // becomes a reshape (the shard's layout may not allow the view).
  Status viewAsReshape(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                       std::vector<ir::NamedArgument>& args);
  // Expert parallelism (ExpandMoe.cpp): a MoE experts node whose experts
  // are split over a mesh axis becomes spmd.moe_experts(_backward) on it.
  Status expertParallel(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                        std::vector<ir::NamedArgument>& args);
  // Appends `replicas` (the mesh axes over which a MoE node's tokens,
  // laid out `tokens`, are replicated) to a forward MoE node's arguments,
  // when there are any: one rank per replica set counts tokens per expert.
  Status countOnce(const ShardingSpec& tokens, std::vector<ir::NamedArgument>& args) const;
  // Ring attention (ExpandRing.cpp): a ring attention node whose queries
  // are split by their length over a mesh axis becomes spmd.ring_attention
  // (_backward) on it.
  Status ringAttention(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                       std::vector<ir::NamedArgument>& args);
  // Error when `n` is a view whose operand is sharded unevenly and whose
  // local result would not hold the operand's local elements.
  Status checkUnevenView(const ir::Node& n, const sharding::NodeSharding& ns);
  // The normalized "dim" argument of sym_size.int.
  static int64_t normalizeDimArg(const ir::Node& n) {
    const Argument* d = n.input("dim");
    int64_t dim = d && !d->ints.empty() ? d->ints[0] : 0;
    auto ops = sharding::tensorOperands(n);
    return dim < 0 && !ops.empty() ? dim + ops[0]->type().rank() : dim;
  }

  const ExpandInput& in_;
  std::vector<std::string> reshapedViews_;  ///< "%view_8": views viewAsReshape made reshapes
  const ir::ExportedProgram& src_;
  const sharding::Propagation& prop_;
  const sharding::Mesh& mesh_;
  ir::Graph* g_ = nullptr;
  std::vector<ir::Value*> map_;  // source value id -> new value (in its propagated layout)
  std::map<std::pair<int, std::string>, ir::Value*> cache_;
  std::map<std::string, ir::Value*> globalSymbols_;  // symbol name -> spmd.global_symbol value
  std::vector<program::CollectiveRecord> records_;
};

}  // namespace spmd::passes::detail
