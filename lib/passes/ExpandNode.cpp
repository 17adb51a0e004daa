// One node of the expansion: operands redistributed to the layouts the
// propagation chose, size arguments made local, results typed locally.
//
//   %view: f32[32, 64] = aten.view.default(%mul_1, [32, 64])       (global; batch 2x16 on dp=2)
//   %view: f32[16, 64] = aten.view.default(%mul_1, [16, 64])       (local)
//   %sym_size_int_46: sym(s52) = aten.sym_size.int(%tokens, 0)     (global)
//   %sym_size_int_46_local = aten.sym_size.int(%tokens, 0)          (local: s52//2)
//   %sym_size_int_46 = _operator.mul(%sym_size_int_46_local, 2)     (symbols stay global)
#include <algorithm>

#include "ir/Collectives.h"
#include "passes/ExpandLossParallel.h"
#include "passes/Expander.h"

namespace spmd::passes::detail {
namespace {

// Size-carrying arguments: (target, argument) pairs whose int list is the
// shape of result 0.
const char* sizeArgOf(std::string_view target) {
  static const std::pair<std::string_view, const char*> kSizeArgs[] = {
      {"aten._unsafe_view.default", "size"},   {"aten.empty.memory_format", "size"},
      {"aten.empty_permuted.default", "size"}, {"aten.empty_strided.default", "size"},
      {"aten.expand.default", "size"},         {"aten.new_empty_strided.default", "size"},
      {"aten.full.default", "size"},           {"aten.new_empty.default", "size"},
      {"aten.new_full.default", "size"},       {"aten.new_ones.default", "size"},
      {"aten.new_zeros.default", "size"},      {"aten.ones.default", "size"},
      {"aten.reshape.default", "shape"},       {"aten.view.default", "size"},
      {"aten.zeros.default", "size"},
  };
  for (const auto& [t, a] : kSizeArgs)
    if (t == target) return a;
  return nullptr;
}

std::string sourceOf(const ir::Node& n) { return ir::userSourceLine(n.metadata().stackTrace); }

}  // namespace

Expected<ir::Value*> Expander::localSize(ir::Value* g, int64_t k, const ir::Node& n) {
  if (k == 1) return g;
  std::string name = uniqueName(g->name() + "_local");
  SPMD_ASSIGN_OR_RETURN(ir::Value * v, g_->addValue(name, ir::ValueKind::SymInt));
  v->setSymValue(divideDim(g->symValue(), k));
  SPMD_ASSIGN_OR_RETURN(ir::Node * node, g_->addNode(name, "_operator.floordiv",
                                                     {{"a", Argument::symInt(g), false},
                                                      {"b", Argument::symInt(nullptr, k), false}},
                                                     {Argument::symInt(v)}));
  node->mutableMetadata() = n.metadata();
  return v;
}

namespace {

Expected<ir::Value*> addLocalSize(ir::Graph& g, const std::string& name, Argument size,
                                  const ShardingSpec& spec, int64_t dim, const ir::Dim& local,
                                  const ir::NodeMetadata& meta) {
  SPMD_ASSIGN_OR_RETURN(ir::Value * v, g.addValue(name, ir::ValueKind::SymInt));
  v->setSymValue(local);
  SPMD_ASSIGN_OR_RETURN(ir::Node * node, g.addNode(name, std::string(ir::kLocalSize),
                                                   {{"size", std::move(size), false},
                                                    {"spec", stringArg(spec.str()), false},
                                                    {"dim", Argument::integer(dim), false}},
                                                   {Argument::symInt(v)}));
  node->mutableMetadata() = meta;
  return v;
}

}  // namespace

Expected<ir::Value*> Expander::rankLocalSize(int64_t size, const ShardingSpec& spec, int64_t dim,
                                             const ir::Dim& local, const ir::NodeMetadata& meta) {
  return addLocalSize(*g_, uniqueName("local_size"), Argument::integer(size), spec, dim, local, meta);
}

Expected<ir::Value*> Expander::rankLocalSize(ir::Value* size, const ShardingSpec& spec, int64_t dim,
                                             const ir::Dim& local, const ir::NodeMetadata& meta) {
  return addLocalSize(*g_, uniqueName("local_size"), Argument::symInt(size), spec, dim, local, meta);
}

Expected<ir::Value*> Expander::globalSymbol(const ir::Dim& d, const std::string& where,
                                            const ir::NodeMetadata& meta) {
  if (d.isStatic() || d.expr()->kind != ir::SymExpr::Kind::Symbol)
    return Status::error(where + ": dim " + d.str() +
                         " is split unevenly and is not a plain symbol of the exported program, so no rank "
                         "knows its global size; export with a trace-time size that divides by the mesh "
                         "axes, or replicate that dim");
  const std::string& symbol = d.expr()->name;
  if (auto it = globalSymbols_.find(symbol); it != globalSymbols_.end()) return it->second;
  std::string name = uniqueName(symbol + "_global");
  SPMD_ASSIGN_OR_RETURN(ir::Value * v, g_->addValue(name, ir::ValueKind::SymInt));
  v->setSymValue(d);
  SPMD_ASSIGN_OR_RETURN(
      ir::Node * node, g_->addNode(name, std::string(ir::kGlobalSymbol), {{"name", stringArg(symbol), false}},
                                   {Argument::symInt(v)}));
  node->mutableMetadata() = meta;
  globalSymbols_[symbol] = v;
  return v;
}

Status Expander::localizeArgs(const ir::Node& n, const sharding::NodeSharding& ns,
                              std::vector<ir::NamedArgument>& args) {
  if (n.target() == "aten.split_with_sizes.default" || n.target() == "aten.split.Tensor")
    return localizeSplit(n, ns, args);
  if (n.target() == "aten._assert_tensor_metadata.default") {
    // The traced size and stride are global: check the local shard's size
    // instead, and no stride (a shard's strides are its own).
    const ir::Value* x = sharding::tensorOperands(n)[0];
    ir::TensorType local = localType(x->type(), ns.operands[0], mesh_);
    for (auto& na : args) {
      if (na.name == "stride") na.arg = Argument::none();
      if (na.name == "size" && na.arg.kind != Argument::Kind::None && local.isStatic()) {
        std::vector<int64_t> sizes;
        for (const auto& d : local.sizes) sizes.push_back(d.value());
        na.arg = Argument::integers(sizes);
      }
    }
    return Status::ok();
  }
  if (n.target() == "aten.native_group_norm.default" ||
      n.target() == "aten.native_group_norm_backward.default")
    return localizeGroupNorm(n, ns, args);
  const char* sizeArg = sizeArgOf(n.target());
  if (!sizeArg || ns.results.empty()) return Status::ok();
  const ir::Value* result = sharding::tensorResults(n)[0];
  ir::TensorType local = localType(result->type(), ns.results[0], mesh_);
  for (auto& na : args) {
    if (na.name != sizeArg) continue;
    Argument& a = na.arg;
    for (size_t j = 0; j < a.ints.size() && j < local.sizes.size(); ++j) {
      bool isValue = j < a.values.size() && a.values[j];
      if (isValue) {
        int64_t k = shardCount(ns.results[0], static_cast<int64_t>(j), mesh_);
        const ir::Dim& globalDim = result->type().sizes[j];
        if (k != 1 && !globalDim.isStatic() && !isEvenSymbolic(globalDim, k)) {  // each rank's own size
          SPMD_ASSIGN_OR_RETURN(
              a.values[j], rankLocalSize(a.values[j], ns.results[0], static_cast<int64_t>(j), local.sizes[j],
                                         n.metadata()));
          continue;
        }
        SPMD_ASSIGN_OR_RETURN(a.values[j], localSize(a.values[j], k, n));
        continue;
      }
      if (a.ints[j] == -1) continue;
      const ir::Dim& globalDim = result->type().sizes[j];
      if (!local.sizes[j].isStatic() && globalDim.isStatic()) {  // uneven: each rank's own size
        if (a.values.size() < a.ints.size()) a.values.resize(a.ints.size(), nullptr);
        a.kind = Argument::Kind::SymInts;
        SPMD_ASSIGN_OR_RETURN(a.values[j],
                              rankLocalSize(globalDim.value(), ns.results[0], static_cast<int64_t>(j),
                                            local.sizes[j], n.metadata()));
        continue;
      }
      if (!local.sizes[j].isStatic() && shardCount(ns.results[0], static_cast<int64_t>(j), mesh_) != 1)
        return Status::error("node %" + n.name() + " (" + n.target() + "): size " +
                             std::to_string(a.ints[j]) + " of a symbolic, sharded dim cannot be made local");
      if (local.sizes[j].isStatic()) a.ints[j] = local.sizes[j].value();
    }
  }
  bool sharded = false;
  for (size_t j = 0; j < local.sizes.size(); ++j)
    sharded |= shardCount(ns.results[0], static_cast<int64_t>(j), mesh_) != 1;
  return sharded ? localizeStrides(n, local, args) : Status::ok();
}

// empty_strided's strides, for the local sizes of a sharded result:
// row-major (the values are uninitialized, so only the layout changes).
// Symbolic sizes: an error.
Status Expander::localizeStrides(const ir::Node& n, const ir::TensorType& local,
                                 std::vector<ir::NamedArgument>& args) {
  for (auto& na : args) {
    if (na.name != "stride" || na.arg.ints.size() != local.sizes.size()) continue;
    std::vector<int64_t> strides(local.sizes.size());
    int64_t next = 1;
    for (size_t j = local.sizes.size(); j-- > 0;) {
      if (!local.sizes[j].isStatic())
        return Status::error("node %" + n.name() + " (" + n.target() +
                             "): the strides of a symbolic local shape " + local.str() +
                             " cannot be made local; replicate this tensor");
      strides[j] = next;
      next *= std::max<int64_t>(local.sizes[j].value(), 1);
    }
    na.arg = Argument::integers(strides);
  }
  return Status::ok();
}

// split_with_sizes' sizes (split's one size) along `dim`: the results' local
// sizes there, when the split dim is sharded (see view.cpp's splitRule).
Status Expander::localizeSplit(const ir::Node& n, const sharding::NodeSharding& ns,
                               std::vector<ir::NamedArgument>& args) {
  auto results = sharding::tensorResults(n);
  if (results.empty() || ns.results.size() != results.size()) return Status::ok();
  int64_t rank = results[0]->type().rank();
  int64_t dim = sharding::normalizeDim(normalizeDimArg(n), rank);
  for (auto& na : args) {
    if (na.name != "split_sizes" && na.name != "split_size") continue;
    Argument& a = na.arg;
    for (size_t i = 0; i < a.ints.size() && i < results.size(); ++i) {
      int64_t k = shardCount(ns.results[i], dim, mesh_);
      const ir::Dim& global = results[i]->type().sizes[static_cast<size_t>(dim)];
      if (k == 1 || (i < a.values.size() && a.values[i])) continue;
      if (!global.isStatic() || global.value() != a.ints[i])
        return Status::error("node %" + n.name() + " (" + n.target() + "): split size " +
                             std::to_string(a.ints[i]) + " is not the size of result " + std::to_string(i) +
                             " " + results[i]->type().str() + ", which is sharded; replicate that dim");
      ir::Dim local = localDim(global, ns.results[i], dim, mesh_);
      if (local.isStatic()) {
        a.ints[i] = local.value();
        continue;
      }
      // Uneven (torch.chunk): every result's piece here is this rank's own size.
      SPMD_ASSIGN_OR_RETURN(ir::Value * size,
                            rankLocalSize(global.value(), ns.results[i], dim, local, n.metadata()));
      if (na.name == "split_size") {
        a = Argument::symInt(size);
        break;
      }
      if (a.values.size() < a.ints.size()) a.values.resize(a.ints.size(), nullptr);
      a.kind = Argument::Kind::SymInts;
      a.values[i] = size;
    }
  }
  return Status::ok();
}

// native_group_norm and its backward take the sample count N (the rule
// shards the samples of operand 0): a batch shard's own, torch.chunk's, so
// the trailing ranks of an uneven split count fewer.
//   aten.native_group_norm.default(%x, %w, %b, 8, 16, 256, 4, 1e-05)    (global x: f32[8, 16, 16, 16])
//   aten.native_group_norm.default(%x, %w, %b, 4, 16, 256, 4, 1e-05)    (local on dp=2)
//   aten.native_group_norm.default(%x, %w, %b, %local_size, ...)        (8 over 3: 3, 3, 2)
Status Expander::localizeGroupNorm(const ir::Node& n, const sharding::NodeSharding& ns,
                                   std::vector<ir::NamedArgument>& args) {
  auto ops = sharding::tensorOperands(n);
  if (ops.empty() || ns.operands.empty() || ops[0]->type().rank() < 1) return Status::ok();
  const ShardingSpec& spec = ns.operands[0];
  int64_t k = shardCount(spec, 0, mesh_);
  if (k == 1) return Status::ok();
  const ir::Dim& global = ops[0]->type().sizes[0];
  ir::Dim local = localDim(global, spec, 0, mesh_);
  for (auto& na : args) {
    if (na.name != "N") continue;
    Argument& a = na.arg;
    ir::Value* sym = a.values.empty() ? nullptr : a.values[0];
    if (sym) {  // a symbol of the export: its local form, as for a view's size
      bool even = global.isStatic() ? global.value() % k == 0 : isEvenSymbolic(global, k);
      SPMD_ASSIGN_OR_RETURN(a.values[0],
                            even ? localSize(sym, k, n) : rankLocalSize(sym, spec, 0, local, n.metadata()));
    } else if (local.isStatic()) {
      a.ints.assign(1, local.value());
    } else if (global.isStatic()) {  // uneven: each rank's own count
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, rankLocalSize(global.value(), spec, 0, local, n.metadata()));
      a = Argument::symInt(v);
    } else {
      return Status::error("node %" + n.name() + " (" + n.target() + "): the sample count N is a literal " +
                           std::to_string(a.ints.empty() ? 0 : a.ints[0]) + " but the batch " + global.str() +
                           " is symbolic and sharded; replicate that batch");
    }
  }
  return Status::ok();
}

Status Expander::checkUnevenView(const ir::Node& n, const sharding::NodeSharding& ns) {
  static const std::string_view kViews[] = {"aten.view.default", "aten._unsafe_view.default",
                                            "aten.reshape.default"};
  if (std::find(std::begin(kViews), std::end(kViews), n.target()) == std::end(kViews)) return Status::ok();
  auto ops = sharding::tensorOperands(n);
  auto results = sharding::tensorResults(n);
  if (ops.empty() || results.empty() || ns.operands.empty() || ns.results.empty()) return Status::ok();
  if (!ops[0]->type().isStatic() || !results[0]->type().isStatic()) return Status::ok();
  auto shapeOf = [](const ir::TensorType& t) {
    std::vector<int64_t> s;
    for (const auto& d : t.sizes) s.push_back(d.value());
    return s;
  };
  std::vector<int64_t> in = shapeOf(ops[0]->type()), out = shapeOf(results[0]->type());
  if (!sharding::isUneven(in, ns.operands[0], mesh_) && !sharding::isUneven(out, ns.results[0], mesh_))
    return Status::ok();
  // Layouts that are not plain torch.chunk splits (strided runs) are checked elsewhere.
  if (!sharding::checkShardable(in, ns.operands[0], mesh_).isOk() ||
      !sharding::checkShardable(out, ns.results[0], mesh_).isOk())
    return Status::ok();
  auto numel = [](const std::vector<int64_t>& s) {
    int64_t k = 1;
    for (int64_t x : s) k *= x;
    return k;
  };
  for (int64_t r = 0; r < mesh_.numRanks(); ++r) {
    auto coords = mesh_.coords(r);
    if (numel(sharding::localShape(in, ns.operands[0], mesh_, coords)) ==
        numel(sharding::localShape(out, ns.results[0], mesh_, coords)))
      continue;
    return Status::error("node %" + n.name() + " (" + n.target() + "): " + ops[0]->type().str() +
                         " laid out " + ns.operands[0].str() + " is split unevenly, and its view as " +
                         results[0]->type().str() + " " + ns.results[0].str() +
                         " would hold other rows on rank " + std::to_string(r) +
                         ": merging or splitting an unevenly sharded dim is not supported; shard "
                         "dims that divide evenly there, or replicate that tensor");
  }
  return Status::ok();
}

// squeeze's result rank depends on which dims have size 1, and a shard can
// have one row where the global tensor has many:
//   %squeeze: f32[2, 3] = aten.squeeze.dim(%x, 0)            (global x: f32[2, 3], a no-op)
//   %squeeze: f32[1, 3] = aten.squeeze.dims(%x, [])          (local on dp=2: keeps the dim)
// Every overload becomes squeeze.dims over the dims whose global size is 1,
// when some other candidate dim is sharded (otherwise the node is unchanged).
Status Expander::globalSqueeze(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                               std::vector<ir::NamedArgument>& args) {
  static const std::string_view kSqueezes[] = {"aten.squeeze.default", "aten.squeeze.dim",
                                               "aten.squeeze.dims"};
  if (std::find(std::begin(kSqueezes), std::end(kSqueezes), n.target()) == std::end(kSqueezes))
    return Status::ok();
  auto ops = sharding::tensorOperands(n);
  if (ops.empty() || ns.operands.empty() || args.empty()) return Status::ok();
  const ir::TensorType& t = ops[0]->type();
  std::vector<int64_t> candidates;
  const Argument* dimArg = n.target() == "aten.squeeze.default" ? nullptr : n.input("dim");
  if (!dimArg) {
    for (int64_t d = 0; d < t.rank(); ++d) candidates.push_back(d);
  } else {
    for (int64_t d : dimArg->ints)
      candidates.push_back(sharding::normalizeDim(d, std::max<int64_t>(t.rank(), 1)));
  }
  std::vector<int64_t> keep;
  bool exposed = false;
  for (int64_t d : candidates) {
    if (d < 0 || d >= t.rank()) return Status::ok();  // a 0-d squeeze, or the verifier's error
    const ir::Dim& size = t.sizes[static_cast<size_t>(d)];
    if (size.isStatic() && size.value() == 1)
      keep.push_back(d);
    else
      exposed |= shardCount(ns.operands[0], d, mesh_) != 1;
  }
  if (!exposed) return Status::ok();
  target = "aten.squeeze.dims";
  args = {args[0], {"dim", Argument::integers(keep), false}};
  return Status::ok();
}

// A view is legal on the traced tensor when its strides allow it. Where the
// traced operand was not contiguous (an elementwise op kept a permuted
// layout, TensorIterator's rule), the shard's layout comes from other
// kernels and may not allow it:
//   %view_8 = aten.view.default(%add_3, [32, 8])   (traced %add_3: strides [1, 4, 32], viewable)
//   %view_8 = aten.reshape.default(%add_3, [16, 8]) (local: a view where it can be, else a copy)
// In an exported (functional) graph reshape means what view means.
Status Expander::viewAsReshape(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                               std::vector<ir::NamedArgument>& args) {
  if (n.target() != "aten.view.default" || ns.operands.empty()) return Status::ok();
  auto ops = sharding::tensorOperands(n);
  if (ops.empty()) return Status::ok();
  const ir::TensorType& t = ops[0]->type();
  bool sharded = false;
  for (int64_t d = 0; d < t.rank(); ++d) sharded |= shardCount(ns.operands[0], d, mesh_) != 1;
  if (!sharded || t.strides.size() != t.sizes.size()) return Status::ok();
  // Row-major contiguous: each stride the product of the sizes after it (size-1 dims free).
  int64_t expect = 1;
  for (int64_t d = t.rank() - 1; d >= 0; --d) {
    const ir::Dim& size = t.sizes[static_cast<size_t>(d)];
    const ir::Dim& stride = t.strides[static_cast<size_t>(d)];
    if (!size.isStatic() || !stride.isStatic()) return Status::ok();  // symbolic: as traced
    if (size.value() != 1 && stride.value() != expect) {
      target = "aten.reshape.default";
      for (auto& na : args)
        if (na.name == "size") na.name = "shape";
      reshapedViews_.push_back("%" + n.name());
      return Status::ok();
    }
    expect *= size.value();
  }
  return Status::ok();
}

Status Expander::unevenMean(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                            std::vector<ir::NamedArgument>& args, double& scale) {
  bool all = n.target() == "aten.mean.default";
  if (!all && n.target() != "aten.mean.dim") return Status::ok();
  auto ops = sharding::tensorOperands(n);
  if (ops.empty() || ns.operands.empty()) return Status::ok();
  const ir::TensorType& t = ops[0]->type();  // symbolic dims at their trace-time sizes
  std::vector<int64_t> shape;
  for (const auto& d : t.sizes) shape.push_back(d.value());
  std::vector<int64_t> dims;
  const Argument* dimArg = n.input("dim");
  if (all || !dimArg || dimArg->kind == Argument::Kind::None || dimArg->ints.empty()) {
    for (int64_t d = 0; d < t.rank(); ++d) dims.push_back(d);
  } else {
    for (int64_t d : dimArg->ints) dims.push_back(sharding::normalizeDim(d, t.rank()));
  }
  bool uneven = false, staticCount = true;
  int64_t count = 1, shards = 1;
  for (int64_t d : dims) {
    const ir::Dim& size = t.sizes[static_cast<size_t>(d)];
    staticCount = staticCount && size.isStatic();
    count *= shape[static_cast<size_t>(d)];
    int64_t k = shardCount(ns.operands[0], d, mesh_);
    shards *= k;
    if (k == 1) continue;
    if (!size.isStatic()) {
      uneven |= !isEvenSymbolic(size, k);
      continue;
    }
    ShardingSpec only = ns.operands[0];
    for (auto& p : only.placements)
      if (!p.isShard(d)) p = Placement::replicate();
    uneven |= sharding::isUneven(shape, only, mesh_);
  }
  if (!uneven || count == 0) return Status::ok();
  if (!staticCount)
    return Status::error("node %" + n.name() + " (" + n.target() +
                         "): a mean over dims split unevenly whose " + "size is symbolic (" + t.str() +
                         " laid out " + ns.operands[0].str() +
                         ") is not supported; export with a trace-time size that divides by the mesh axes");
  // Each rank sums its rows; P(avg) over the `shards` ranks then gives
  // sum / count when each contributes sum * shards / count.
  target = all ? "aten.sum.default" : "aten.sum.dim_IntList";
  (void)args;  // mean and sum take the same arguments
  scale = static_cast<double>(shards) / static_cast<double>(count);
  return Status::ok();
}

Status Expander::expandNode(const ir::Node& n) {
  const sharding::NodeSharding& ns = prop_.nodes[static_cast<size_t>(n.index())];
  std::string where = "node %" + n.name() + " (" + n.target() + ")";
  std::vector<ir::NamedArgument> args = n.inputs();
  // Operands: tensors in the layout the node needs, symbols as they are.
  auto operands = sharding::tensorOperands(n);
  size_t next = 0;
  bool symbolic = sharding::isSymbolicOp(n.target());
  for (auto& na : args) {
    for (ir::Value*& v : na.arg.values) {
      if (!v) continue;
      if (!v->isTensor()) {
        v = map_[static_cast<size_t>(v->id())];
        continue;
      }
      const ir::Value& src = *operands[next];
      if (symbolic) {
        v = map_[static_cast<size_t>(src.id())];
      } else {
        SPMD_ASSIGN_OR_RETURN(v, reshard(src, ns.operands[next], where, sourceOf(n)));
      }
      ++next;
    }
  }
  SPMD_RETURN_IF_ERROR(checkUnevenView(n, ns));
  SPMD_RETURN_IF_ERROR(localizeArgs(n, ns, args));
  // Loss parallelism (ExpandLossParallel.cpp): log-softmax, gather, scatter on a sharded class dim.
  if (auto lp = LossParallel::expand(*this, n, ns, args); !lp || *lp) return lp.status();
  std::string target = n.target();
  double meanScale = 0;  // != 0: an uneven mean became a sum, scaled below
  SPMD_RETURN_IF_ERROR(unevenMean(n, ns, target, args, meanScale));
  SPMD_RETURN_IF_ERROR(globalSqueeze(n, ns, target, args));
  SPMD_RETURN_IF_ERROR(viewAsReshape(n, ns, target, args));
  SPMD_RETURN_IF_ERROR(expertParallel(n, ns, target, args));
  SPMD_RETURN_IF_ERROR(ringAttention(n, ns, target, args));
  if (target == "aten.embedding.default" && !ns.operands.empty() && ns.operands[0].shardsDim(0)) {
    // Vocab-parallel: this rank's rows are looked up, the rest give zeros.
    target = std::string(ir::kVocabEmbedding);
    args = {args[0],
            args[1],
            {"spec", stringArg(ns.operands[0].str()), false},
            {"vocab", Argument::integer(operands[0]->type().sizes[0].value()), false}};
  }
  // sym_size of a sharded dim: local size times the shard count, so symbols stay global.
  int64_t symScale = 1;
  if (n.target() == "aten.sym_size.int" && !operands.empty()) {
    const ShardingSpec& s = prop_.values[static_cast<size_t>(operands[0]->id())];
    int64_t dim = normalizeDimArg(n);
    symScale = shardCount(s, dim, mesh_);
    const ir::Dim& d = operands[0]->type().sizes[static_cast<size_t>(dim)];
    auto results = n.outputs();
    if (symScale != 1 && !d.isStatic() && !isEvenSymbolic(d, symScale) && results.size() == 1 &&
        !results[0].values.empty() && results[0].values[0]) {
      // Uneven: the local sizes do not give the global one back; the inputs do.
      SPMD_ASSIGN_OR_RETURN(ir::Value * global, globalSymbol(d, where, n.metadata()));
      map_[static_cast<size_t>(results[0].values[0]->id())] = global;
      return Status::ok();
    }
  }
  // Results.
  std::vector<Argument> outs = n.outputs();
  auto results = sharding::tensorResults(n);
  size_t r = 0;
  std::vector<std::pair<const ir::Value*, ir::Value*>> mapped;
  for (auto& out : outs) {
    for (ir::Value*& v : out.values) {
      if (!v) continue;
      const ir::Value* src = v;
      std::string name = src->name();
      if (symScale != 1) name = uniqueName(src->name() + "_local");
      if (meanScale != 0) name = uniqueName(src->name() + "_sum");
      ShardingSpec spec = src->isTensor() ? ns.results[r++] : ShardingSpec{};
      SPMD_ASSIGN_OR_RETURN(v, cloneValue(*src, name, spec));
      if (symScale != 1) v->setSymValue(divideDim(src->symValue(), symScale));
      mapped.emplace_back(src, v);
    }
  }
  std::string nodeName = symScale != 1    ? uniqueName(n.name() + "_local")
                         : meanScale != 0 ? uniqueName(n.name() + "_sum")
                                          : n.name();
  SPMD_ASSIGN_OR_RETURN(ir::Node * node, g_->addNode(nodeName, target, std::move(args), std::move(outs)));
  node->mutableMetadata() = n.metadata();
  for (auto [src, v] : mapped) map_[static_cast<size_t>(src->id())] = v;
  if (meanScale != 0) {
    const ir::Value* src = mapped[0].first;
    SPMD_ASSIGN_OR_RETURN(map_[static_cast<size_t>(src->id())],
                          emit("aten.mul.Tensor",
                               {{"self", Argument::tensor(mapped[0].second), false},
                                {"other", Argument::floating(meanScale), false}},
                               *src, ns.results[0], src->name() + "_scaled", n.metadata()));
  }
  if (symScale != 1) {
    const ir::Value* src = mapped[0].first;
    SPMD_ASSIGN_OR_RETURN(ir::Value * global, g_->addValue(src->name(), ir::ValueKind::SymInt));
    global->setSymValue(src->symValue());
    SPMD_ASSIGN_OR_RETURN(ir::Node * mul, g_->addNode(src->name(), "_operator.mul",
                                                      {{"a", Argument::symInt(mapped[0].second), false},
                                                       {"b", Argument::symInt(nullptr, symScale), false}},
                                                      {Argument::symInt(global)}));
    mul->mutableMetadata() = n.metadata();
    map_[static_cast<size_t>(src->id())] = global;
  }
  return Status::ok();
}

}  // namespace spmd::passes::detail
