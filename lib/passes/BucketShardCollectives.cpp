// bucket-shard-collectives: FSDP2's flat buffers. Parameter all-gathers
// (spmd.all_gather of a stored weight, or of its mixed-precision cast, along
// dim 0) on one mesh axis, of one dtype and one module group, become one
// all-gather of the concatenated local shards; gradient reduce-scatters along dim 0 (one axis, reduction,
// dtype and module group) become one reduce-scatter of the gradients laid
// out rank-major. Split factors, other dims and symbolic shapes are left
// alone.
//
// Groups: a parameter's module group is its FQN up to its first numeric
// component ("model.layers.0.wq.weight" -> "model.layers.0"), the root for
// the others, as FSDP2 is applied per block and then to the root; the
// gathers issued again for the backward (reshard-after-forward) are a
// group's second set. Within a
// group, members go together in program order up to the bucket size; a
// gradient bucket also closes when a member's result is needed before the
// next member is ready (as bucket-collectives does for all-reduces); a
// gather bucket at a weight it already gathers (recompute's re-gather for
// the backward: in the forward's bucket it would be gathered in the
// forward and held until the backward).
//
// Placement: a gather bucket is unpacked right before its first member was
// used, and issued one bucket ahead (where the bucket before is unpacked),
// so async-collectives overlaps it with the bucket before's computation. A
// gradient bucket is issued as soon as its last gradient is ready and
// unpacked right before the first reader of any member.
//
// Before (mesh x=2; %w: f32[128, 64], %b: f32[128] local shards):
//   %w_all_gather: f32[256, 64] = spmd.all_gather(%w, "x", 0)
//   %b_all_gather: f32[256] = spmd.all_gather(%b, "x", 0)
// After:
//   %w_flat: f32[8192] = aten.reshape.default(%w, [8192])
//   %b_flat: f32[128] = aten.reshape.default(%b, [128])
//   %gather_bucket: f32[8320] = aten.cat.default([%w_flat, %b_flat], 0)
//   %gather_bucket_all_gather: f32[16640] = spmd.all_gather(%gather_bucket, "x", 0)
//   %gather_bucket_all_gather_rows: f32[2, 8320] = aten.view.default(%gather_bucket_all_gather, [2, 8320])
//   [%..._split_0: f32[2, 8192], %..._split_1: f32[2, 128]] = aten.split_with_sizes.default(
//       %gather_bucket_all_gather_rows, [8192, 128], 1)
//   %w_all_gather_bucketed: f32[256, 64] = aten.reshape.default(%..._split_0, [256, 64])
//   %b_all_gather_bucketed: f32[256] = aten.reshape.default(%..._split_1, [256])
// Reduce-scatters mirror it: each full gradient viewed as [2, n/2] (row r:
// rank r's dim-0 chunk), concatenated along dim 1, flattened, one
// spmd.reduce_scatter, split_with_sizes, each part reshaped to its shard.
#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "passes/Passes.h"
#include "sharding/CostModel.h"
#include "sharding/Propagation.h"

namespace spmd::passes {
namespace {

using ir::Argument;

std::vector<int64_t> staticSizes(const ir::TensorType& t) {
  std::vector<int64_t> out;
  for (const auto& d : t.sizes) out.push_back(d.value());
  return out;
}

ir::TensorType withSizes(ir::TensorType t, const std::vector<int64_t>& sizes) {
  t.sizes.clear();
  for (int64_t s : sizes) t.sizes.emplace_back(s);
  t.strides.clear();  // the kernel decides the layout
  return t;
}

struct Bucket {
  std::vector<ir::Node*> members;
  int64_t bytes = 0;
  int closeBefore = 0;  // gradients: index of the first reader of any member
  int issueAfter = -1;  // gradients: index of the last producer of a member's input
};

class ShardBucketer {
 public:
  ShardBucketer(program::Program& p, int64_t limit) : p_(p), g_(p.graph.graph), limit_(limit) {}

  Status run() {
    indexSignature();
    original_ = g_.nodes().size();
    std::map<std::string, std::vector<ir::Node*>> gathers, scatters;
    for (const auto& n : g_.nodes()) {
      if (std::optional<std::string> key = gatherKey(*n)) gathers[*key].push_back(n.get());
      if (std::optional<std::string> key = scatterKey(*n)) scatters[*key].push_back(n.get());
    }
    // All buckets are chosen on the original order, before any node is added.
    std::vector<Bucket> gatherBuckets, scatterBuckets;
    for (auto& [key, list] : gathers) split(list, false, gatherBuckets);
    for (auto& [key, list] : scatters) {
      // Gradients go together in the order they are ready.
      std::stable_sort(list.begin(), list.end(),
                       [&](const ir::Node* a, const ir::Node* b) { return readyAt_[a] < readyAt_[b]; });
      split(list, true, scatterBuckets);
    }
    std::sort(gatherBuckets.begin(), gatherBuckets.end(),
              [](const Bucket& a, const Bucket& b) { return a.members[0]->index() < b.members[0]->index(); });
    // The bucket before's first member, per phase: the backward's first
    // re-gather (reshard-after-forward) is not prefetched into the forward.
    ir::Node* previous[2] = {nullptr, nullptr};
    for (const Bucket& b : gatherBuckets) {
      ir::Node*& before = previous[b.members[0]->metadata().other.count("spmd_regather")];
      SPMD_RETURN_IF_ERROR(fuseGathers(b, before ? before : b.members[0]));
      if (b.members.size() > 1) before = b.members[0];
    }
    for (const Bucket& b : scatterBuckets) SPMD_RETURN_IF_ERROR(fuseScatters(b));
    if (removed_.empty()) return Status::ok();
    return rewrite();
  }

 private:
  // Parameter and buffer FQNs by graph input value, gradient FQNs by
  // graph output value.
  void indexSignature() {
    for (const auto& in : p_.graph.signature.inputs)
      if (in.value && (in.kind == ir::InputKind::Parameter || in.kind == ir::InputKind::Buffer))
        fqnOfInput_[in.value] = in.target;
    for (const auto& out : p_.graph.signature.outputs)
      if (out.kind == ir::OutputKind::GradientToParameter && out.arg.value())
        fqnOfGradient_[out.arg.value()] = out.target;
  }

  int64_t axisSize(const Argument* axis) const {
    if (!axis || axis->strings.size() != 1) return 0;
    int64_t i = p_.mesh.axisIndex(axis->strings[0]);
    return i < 0 ? 0 : p_.mesh.size(i);
  }

  static bool isIntArg(const Argument* a, int64_t v) {
    return a && a->kind == Argument::Kind::Int && a->ints.size() == 1 && a->ints[0] == v;
  }

  // "axis|dtype|group" for an all-gather of a stored weight along dim 0
  // with no split factor; nullopt for any other node.
  std::optional<std::string> gatherKey(const ir::Node& n) const {
    if (n.target() != ir::kAllGather || n.outputValues().size() != 1 || n.inputValues().size() != 1)
      return std::nullopt;
    const Argument* sf = n.input("split_factor");
    if (!isIntArg(n.input("dim"), 0) || (sf && !isIntArg(sf, 1)) || n.input("async")) return std::nullopt;
    const ir::Value* x = n.inputValues()[0];
    auto fqn = fqnOfInput_.find(storedWeight(x));
    if (fqn == fqnOfInput_.end()) return std::nullopt;
    int64_t world = axisSize(n.input("axis"));
    if (!evenDim0(x->type(), n.outputValues()[0]->type(), world)) return std::nullopt;
    // A gather issued again for the backward (reshard-after-forward) goes
    // in a bucket of its own phase.
    const bool again = n.metadata().other.count("spmd_regather") != 0;
    return n.input("axis")->strings[0] + "|" + std::string(ir::scalarTypeName(x->type().dtype)) + "|" +
           moduleGroup(fqn->second) + (again ? "|backward" : "");
  }

  // The stored weight `x` is, looking through one dtype cast (mixed
  // precision gathers the parameter cast to param_dtype: MixedPrecision.h).
  static const ir::Value* storedWeight(const ir::Value* x) {
    const ir::Node* p = x->producer();
    if (p && p->target() == "aten._to_copy.default" && p->inputValues().size() == 1)
      return p->inputValues()[0];
    return x;
  }

  // "axis|op|dtype|group" for a reduce-scatter along dim 0; the group is
  // the module group of the parameter it is the gradient of, if known.
  std::optional<std::string> scatterKey(const ir::Node& n) {
    if (n.target() != ir::kReduceScatter || n.outputValues().size() != 1 || n.inputValues().size() != 1)
      return std::nullopt;
    const Argument* op = n.input("op");
    if (!isIntArg(n.input("dim"), 0) || !op || op->strings.size() != 1 || n.input("async"))
      return std::nullopt;
    const ir::Value* x = n.inputValues()[0];
    const ir::Value* y = n.outputValues()[0];
    if (!evenDim0(y->type(), x->type(), axisSize(n.input("axis")))) return std::nullopt;
    std::optional<int> ready = readyAt(x);
    if (!ready) return std::nullopt;
    readyAt_[&n] = *ready;
    std::optional<std::string> fqn = gradientOf(y, 0);
    return n.input("axis")->strings[0] + "|" + op->strings[0] + "|" +
           std::string(ir::scalarTypeName(x->type().dtype)) + "|" + (fqn ? moduleGroup(*fqn) : "?");
  }

  // True when `full` is `shard` with dim 0 `world` times larger, all static.
  static bool evenDim0(const ir::TensorType& shard, const ir::TensorType& full, int64_t world) {
    if (world < 2 || !shard.isStatic() || !full.isStatic() || shard.rank() < 1 ||
        shard.rank() != full.rank() || shard.dtype != full.dtype)
      return false;
    for (int64_t d = 1; d < shard.rank(); ++d)
      if (shard.sizes[d].value() != full.sizes[d].value()) return false;
    return full.sizes[0].value() == world * shard.sizes[0].value();
  }

  // Index of the node producing `x` (-1 for a graph input); nullopt when it
  // is a collective's result (or an alias of one), which buckets may move.
  static std::optional<int> readyAt(const ir::Value* x) {
    const ir::Node* p = x->producer();
    if (p == nullptr) return -1;
    const ir::Node* source = p;
    if (p->target() == "aten.alias.default" && !p->inputValues().empty() && p->inputValues()[0]->producer())
      source = p->inputValues()[0]->producer();
    if (ir::isCommunicating(p->target()) || ir::isCommunicating(source->target())) return std::nullopt;
    return p->index();
  }

  // The parameter FQN `v` is the gradient of: a graph output, or the
  // optimizer's gradient anchor (an alias laid out as the parameter),
  // looked through aliases and collectives on other axes.
  std::optional<std::string> gradientOf(const ir::Value* v, int depth) const {
    if (auto it = fqnOfGradient_.find(v); it != fqnOfGradient_.end()) return it->second;
    if (depth > 4) return std::nullopt;
    for (const ir::Node* u : v->users()) {
      if (u->outputValues().size() != 1) continue;
      if (u->target() == "aten.alias.default") {
        auto as = u->metadata().other.find(std::string(sharding::kLayoutAsKey));
        if (as != u->metadata().other.end())
          if (const ir::Value* param = g_.findValue(as->second))
            if (auto it = fqnOfInput_.find(param); it != fqnOfInput_.end()) return it->second;
      } else if (!ir::isCommunicating(u->target())) {
        continue;
      }
      if (auto fqn = gradientOf(u->outputValues()[0], depth + 1)) return fqn;
    }
    return std::nullopt;
  }

  // Index of the first node that reads `v`, looking through aliases (the
  // optimizer's gradient anchors), which are collected in `aliases`.
  int firstUse(const ir::Value* v, std::vector<ir::Node*>& aliases) const {
    return firstUseThroughAliases(v, static_cast<int>(original_), aliases);
  }

  static int64_t bytesOf(const ir::TensorType& t) { return t.numel().value_or(0) * ir::elementSize(t.dtype); }

  // Splits one key's members (program order) into buckets by size and, for
  // gradients, by when their results are needed.
  // True when a member of gather bucket `b` gathers stored weight `w`.
  static bool gathers(const Bucket& b, const ir::Value* w) {
    return std::any_of(b.members.begin(), b.members.end(),
                       [&](const ir::Node* m) { return storedWeight(m->inputValues()[0]) == w; });
  }

  void split(const std::vector<ir::Node*>& list, bool gradients, std::vector<Bucket>& out) {
    Bucket b;
    for (ir::Node* c : list) {
      int64_t bytes = bytesOf(gradients ? c->inputValues()[0]->type() : c->outputValues()[0]->type());
      bool fits =
          b.members.empty() || (b.bytes + bytes <= limit_ && (!gradients || readyAt_[c] < b.closeBefore) &&
                                (gradients || !gathers(b, storedWeight(c->inputValues()[0]))));
      if (!fits) {
        out.push_back(std::move(b));
        b = Bucket{};
      }
      if (b.members.empty()) b.closeBefore = static_cast<int>(original_);
      b.members.push_back(c);
      b.bytes += bytes;
      if (!gradients) continue;
      b.issueAfter = std::max(b.issueAfter, readyAt_[c]);
      std::vector<ir::Node*> aliases;
      b.closeBefore = std::min(b.closeBefore, firstUse(c->outputValues()[0], aliases));
      aliasesOf_[c] = std::move(aliases);
    }
    if (!b.members.empty()) out.push_back(std::move(b));
  }

  Expected<ir::Value*> emit(const std::string& base, const std::string& target,
                            std::vector<ir::NamedArgument> args, const ir::TensorType& type,
                            std::vector<ir::Node*>& out) {
    SPMD_ASSIGN_OR_RETURN(ir::Node * n, appendTensorNode(g_, base, target, std::move(args), type));
    out.push_back(n);
    return n->outputValues()[0];
  }

  // Appends split_with_sizes(x, sizes, dim) with parts of `types`.
  Expected<std::vector<ir::Value*>> emitSplit(ir::Value* x, const std::vector<int64_t>& sizes, int64_t dim,
                                              const std::vector<ir::TensorType>& types,
                                              std::vector<ir::Node*>& out) {
    std::vector<ir::Value*> parts;
    std::string base = x->name() + "_split";
    std::string name = base;
    for (int i = 1; g_.findValue(name) || g_.findValue(name + "_0"); ++i)
      name = base + "_" + std::to_string(i);
    for (size_t i = 0; i < sizes.size(); ++i) {
      SPMD_ASSIGN_OR_RETURN(ir::Value * part,
                            g_.addValue(name + "_" + std::to_string(i), ir::ValueKind::Tensor));
      part->mutableType() = types[i];
      parts.push_back(part);
    }
    SPMD_ASSIGN_OR_RETURN(ir::Node * split, g_.addNode(name, "aten.split_with_sizes.default",
                                                       {{"self", Argument::tensor(x), false},
                                                        {"split_sizes", Argument::integers(sizes), false},
                                                        {"dim", Argument::integer(dim), false}},
                                                       {Argument::tensors(parts)}));
    out.push_back(split);
    return parts;
  }

  // Flattens each of `xs` (as `shapes`: [-1] or [world, -1]) and
  // concatenates them along `dim`.
  Expected<ir::Value*> emitConcat(const std::vector<ir::Value*>& xs,
                                  const std::vector<std::vector<int64_t>>& shapes, int64_t dim,
                                  const std::string& name, std::vector<ir::Node*>& out) {
    std::vector<ir::Value*> flats;
    std::vector<int64_t> total = shapes[0];
    total[static_cast<size_t>(dim)] = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      std::vector<int64_t> shape = shapes[i];
      SPMD_ASSIGN_OR_RETURN(ir::Value * f, emit(xs[i]->name() + "_flat", "aten.reshape.default",
                                                {{"self", Argument::tensor(xs[i]), false},
                                                 {"shape", Argument::integers(shape), false}},
                                                withSizes(xs[i]->type(), shape), out));
      flats.push_back(f);
      total[static_cast<size_t>(dim)] += shape[static_cast<size_t>(dim)];
    }
    return emit(name, "aten.cat.default",
                {{"tensors", Argument::tensors(flats), false}, {"dim", Argument::integer(dim), false}},
                withSizes(xs[0]->type(), total), out);
  }

  // Records why `fused` exists; `bytes` is its unsharded buffer.
  void record(ir::Node* fused, const std::string& kind, const std::string& value, size_t members,
              int64_t world, int64_t bytes, const std::string& from, const std::string& to) {
    bool gather = kind == "all_gather";
    auto k = gather ? sharding::CollectiveKind::AllGather : sharding::CollectiveKind::ReduceScatter;
    int64_t in = gather ? bytes / world : bytes, out = gather ? bytes : bytes / world;
    p_.collectives.push_back({fused->name(), kind, fused->inputs()[1].arg.strings[0],
                              sharding::CostModel::bytesMoved(k, world, in, out),
                              "bucket of " + std::to_string(members) + " " +
                                  (kind == "all_gather" ? "all-gathers" : "reduce-scatters"),
                              value, from, to, ""});
  }

  Status unpackParts(const Bucket& b, ir::Value* x, const std::vector<int64_t>& sizes, int64_t dim,
                     std::vector<ir::Node*>& out);
  Status fuseGathers(const Bucket& b, ir::Node* issueAt);
  Status fuseScatters(const Bucket& b);
  Status rewrite();

  program::Program& p_;
  ir::Graph& g_;
  int64_t limit_;
  size_t original_ = 0;  // nodes before this pass added any
  std::unordered_map<const ir::Value*, std::string> fqnOfInput_;
  std::unordered_map<const ir::Value*, std::string> fqnOfGradient_;
  // New nodes by the node they go before (gather issues, then unpacks),
  // or after (gradient issues).
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> issueBefore_, unpackBefore_, scatterAfter_;
  std::vector<ir::Node*> atStart_, atEnd_;
  std::unordered_map<const ir::Node*, int> readyAt_;
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> aliasesOf_;
  std::unordered_set<const ir::Node*> moved_;
  std::unordered_set<const ir::Node*> removed_;
  std::unordered_map<ir::Value*, ir::Value*> replacement_;
};

// Splits the fused result `x` along `dim` into one part per member (dim
// `dim` of size sizes[i]), reshapes each part to its member's result, which
// it replaces, and marks the member for removal.
Status ShardBucketer::unpackParts(const Bucket& b, ir::Value* x, const std::vector<int64_t>& sizes,
                                  int64_t dim, std::vector<ir::Node*>& out) {
  std::vector<int64_t> shape = staticSizes(x->type());
  std::vector<ir::TensorType> partTypes;
  partTypes.reserve(sizes.size());
  for (int64_t n : sizes) {
    shape[static_cast<size_t>(dim)] = n;
    partTypes.push_back(withSizes(x->type(), shape));
  }
  SPMD_ASSIGN_OR_RETURN(std::vector<ir::Value*> parts, emitSplit(x, sizes, dim, partTypes, out));
  for (size_t i = 0; i < b.members.size(); ++i) {
    ir::Value* y = b.members[i]->outputValues()[0];
    SPMD_ASSIGN_OR_RETURN(ir::Value * back,
                          emit(y->name() + "_bucketed", "aten.reshape.default",
                               {{"self", Argument::tensor(parts[i]), false},
                                {"shape", Argument::integers(staticSizes(y->type())), false}},
                               withSizes(y->type(), staticSizes(y->type())), out));
    replacement_.emplace(y, back);
    removed_.insert(b.members[i]);
  }
  return Status::ok();
}

Status ShardBucketer::fuseGathers(const Bucket& b, ir::Node* issueAt) {
  if (b.members.size() < 2) return Status::ok();
  std::vector<ir::Node*> issue, unpack;
  std::vector<ir::Value*> xs;
  std::vector<std::vector<int64_t>> flat;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (ir::Node* m : b.members) {
    xs.push_back(m->inputValues()[0]);
    sizes.push_back(*xs.back()->type().numel());
    flat.push_back({sizes.back()});
    total += sizes.back();
  }
  SPMD_ASSIGN_OR_RETURN(ir::Value * cat, emitConcat(xs, flat, 0, "gather_bucket", issue));
  int64_t world = axisSize(b.members[0]->input("axis"));
  std::vector<ir::NamedArgument> args = b.members[0]->inputs();
  args[0].arg = Argument::tensor(cat);
  SPMD_ASSIGN_OR_RETURN(ir::Value * gathered, emit(cat->name() + "_all_gather", std::string(ir::kAllGather),
                                                   args, withSizes(cat->type(), {world * total}), issue));
  // Row r of [world, total] is rank r's buffer; columns [off, off + n) its
  // shard of one member, so the rows of a member's part are its dim-0 chunks.
  SPMD_ASSIGN_OR_RETURN(ir::Value * rows, emit(gathered->name() + "_rows", "aten.view.default",
                                               {{"self", Argument::tensor(gathered), false},
                                                {"size", Argument::integers({world, total}), false}},
                                               withSizes(cat->type(), {world, total}), unpack));
  SPMD_RETURN_IF_ERROR(unpackParts(b, rows, sizes, 1, unpack));
  ir::Node* fused = gathered->producer();
  record(fused, "all_gather", cat->name(), b.members.size(), world,
         world * total * ir::elementSize(cat->type().dtype), "[S(0)]", "[R]");
  if (b.members[0]->metadata().other.count("spmd_regather"))  // reshard-after-forward's
    p_.collectives.back().consumer = "backward of " + p_.collectives.back().consumer;
  auto& at = issueBefore_[issueAt];
  at.insert(at.end(), issue.begin(), issue.end());
  auto& before = unpackBefore_[b.members[0]];
  before.insert(before.end(), unpack.begin(), unpack.end());
  return Status::ok();
}

Status ShardBucketer::fuseScatters(const Bucket& b) {
  if (b.members.size() < 2) return Status::ok();
  std::vector<ir::Node*> issue, unpack;
  int64_t world = axisSize(b.members[0]->input("axis"));
  std::vector<ir::Value*> xs;
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (ir::Node* m : b.members) {
    xs.push_back(m->inputValues()[0]);
    sizes.push_back(*m->outputValues()[0]->type().numel());
    rows.push_back({world, sizes.back()});  // dim-0 chunks are contiguous rows
    total += sizes.back();
  }
  SPMD_ASSIGN_OR_RETURN(ir::Value * cat, emitConcat(xs, rows, 1, "scatter_bucket", issue));
  SPMD_ASSIGN_OR_RETURN(ir::Value * flat, emit(cat->name() + "_flat", "aten.reshape.default",
                                               {{"self", Argument::tensor(cat), false},
                                                {"shape", Argument::integers({-1}), false}},
                                               withSizes(cat->type(), {world * total}), issue));
  std::vector<ir::NamedArgument> args = b.members[0]->inputs();
  args[0].arg = Argument::tensor(flat);
  SPMD_ASSIGN_OR_RETURN(ir::Value * reduced,
                        emit(cat->name() + "_reduce_scatter", std::string(ir::kReduceScatter), args,
                             withSizes(cat->type(), {total}), issue));
  SPMD_RETURN_IF_ERROR(unpackParts(b, reduced, sizes, 0, unpack));
  // Aliases of members (gradient anchors) read the unpacked results.
  for (ir::Node* m : b.members)
    for (ir::Node* a : aliasesOf_[m])
      if (moved_.insert(a).second) unpack.push_back(a);
  const std::string op = b.members[0]->input("op")->strings[0];
  record(reduced->producer(), "reduce_scatter", cat->name(), b.members.size(), world,
         world * total * ir::elementSize(cat->type().dtype), "[P(" + op + ")]", "[S(0)]");
  // Issued as soon as the last gradient is ready.
  auto& at = b.issueAfter < 0 ? atStart_ : scatterAfter_[g_.nodes()[static_cast<size_t>(b.issueAfter)].get()];
  at.insert(at.end(), issue.begin(), issue.end());
  auto& before = b.closeBefore < static_cast<int>(original_)
                     ? unpackBefore_[g_.nodes()[static_cast<size_t>(b.closeBefore)].get()]
                     : atEnd_;
  before.insert(before.end(), unpack.begin(), unpack.end());
  return Status::ok();
}

Status ShardBucketer::rewrite() {
  std::vector<ir::Node*> order = atStart_;
  auto place = [&](const std::unordered_map<const ir::Node*, std::vector<ir::Node*>>& m, const ir::Node* at) {
    if (auto it = m.find(at); it != m.end()) order.insert(order.end(), it->second.begin(), it->second.end());
  };
  // New nodes were appended after the original ones.
  for (size_t i = 0; i < original_; ++i) {
    ir::Node* n = g_.nodes()[i].get();
    place(issueBefore_, n);
    place(unpackBefore_, n);
    if (!moved_.count(n)) order.push_back(n);  // members stay until erased below
    place(scatterAfter_, n);
  }
  order.insert(order.end(), atEnd_.begin(), atEnd_.end());
  return commitRewrite(p_, order, replacement_, removed_);
}

}  // namespace

std::string moduleGroup(const std::string& fqn) {
  size_t start = 0;
  while (start < fqn.size()) {
    size_t end = std::min(fqn.find('.', start), fqn.size());
    bool numeric = end > start && std::all_of(fqn.begin() + static_cast<std::ptrdiff_t>(start),
                                              fqn.begin() + static_cast<std::ptrdiff_t>(end),
                                              [](char c) { return c >= '0' && c <= '9'; });
    if (numeric) return fqn.substr(0, end);
    start = end + 1;
  }
  return "";
}

Status BucketShardCollectives::run(program::Program& program) {
  if (bucketBytes_ <= 0) return Status::ok();
  return ShardBucketer(program, bucketBytes_).run();
}

}  // namespace spmd::passes
