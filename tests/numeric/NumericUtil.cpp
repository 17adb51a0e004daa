// One-node programs, their strategies on 2 simulated ranks, and the
// comparison with the unsharded node (see NumericUtil.h).
#include "NumericUtil.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "../TestUtil.h"
#include "ir/Collectives.h"
#include "passes/Expand.h"
#include "program/Reader.h"
#include "program/Writer.h"
#include "pt2/Archive.h"
#include "runtime/Runner.h"
#include "runtime/Worker.h"
#include "serialize/FromExportJson.h"
#include "serialize/ToExportJson.h"
#include "sharding/RuleRegistry.h"
#include "support/Strings.h"

namespace spmd::numeric {
namespace {

using sharding::NodeSharding;
using sharding::Placement;
using sharding::ReduceOp;
using sharding::ShardingSpec;
using testing::TempDir;

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;
/// Ulps of the op's magnitude allowed where sums are regrouped across ranks.
constexpr double kSlack = 4;
/// What runRank says when the process groups could not be built.
constexpr const char* kSetupFailed = "cannot set up the process groups";
/// Suffix of the graph input holding the ranks' shares of a pending operand.
constexpr const char* kSharesSuffix = "__shares";
/// Suffix of the real view of a complex result.
constexpr const char* kRealSuffix = "__real";

/// Ops whose result values are unspecified or random (only shape and dtype
/// compare; their rules keep random results replicated).
bool valuesUnspecified(std::string_view target) {
  return target == "aten.empty.memory_format" || target == "aten.empty_permuted.default" ||
         target == "aten.empty_like.default" || target == "aten.new_empty.default" ||
         target == "aten.empty_strided.default" || target == "aten.rand.default" ||
         target == "aten.randn.default" || target == "aten.randperm.default";
}

std::string specsStr(const std::vector<ShardingSpec>& specs) {
  std::string s;
  for (const auto& spec : specs) s += (s.empty() ? "" : " ") + spec.str();
  return s.empty() ? "()" : s;
}

/// "operands [S(0)] [R] -> results [S(0)]".
std::string strategyStr(const NodeSharding& ns) {
  return "operands " + specsStr(ns.operands) + " -> results " + specsStr(ns.results);
}

/// How the one-node program gets one distinct tensor operand.
struct Feed {
  const ir::Value* value = nullptr;
  /// Layout of the graph input (or, when split, of the shares' sum node's result).
  ShardingSpec spec;
  /// Fed as random per-rank shares through a reducing node (pending floats).
  bool split = false;

  /// Number of shares: the ranks along the pending axes.
  int64_t shares(const sharding::Mesh& mesh) const {
    int64_t n = 1;
    for (size_t a = 0; a < spec.placements.size(); ++a)
      if (spec.placements[a].isPartial()) n *= mesh.size(static_cast<int64_t>(a));
    return n;
  }
  /// Layout of the [shares, ...] input: pending axes split the shares (dim
  /// 0, major axis first), shards move one dim down.
  ShardingSpec sharesSpec() const {
    ShardingSpec s = spec;
    for (Placement& p : s.placements) {
      if (p.isPartial())
        p = Placement::shard(0);
      else if (p.isShard())
        ++p.dim;
    }
    return s;
  }
};

Expected<ir::Value*> cloneValue(ir::Graph& g, const ir::Value& v, const std::string& name) {
  SPMD_ASSIGN_OR_RETURN(ir::Value * nv, g.addValue(name, v.kind()));
  nv->mutableType() = v.type();
  nv->setSymValue(v.symValue());
  return nv;
}

void addUserInput(ir::ExportedProgram& p, ir::Value* v) {
  p.graph.addInput(v);
  ir::InputSpec s;
  s.kind = ir::InputKind::UserInput;
  s.value = v;
  s.name = v->name();
  p.signature.inputs.push_back(std::move(s));
}

/// The real dtype of a complex one; Unknown for the others.
ir::ScalarType realOf(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::ComplexHalf:
      return ir::ScalarType::Half;
    case ir::ScalarType::ComplexFloat:
      return ir::ScalarType::Float;
    case ir::ScalarType::ComplexDouble:
      return ir::ScalarType::Double;
    default:
      return ir::ScalarType::Unknown;
  }
}

/// `v` itself, or for a complex `v` its aten.view_as_real (the runtime
/// gathers real outputs only): [..., 2] in the matching real dtype.
Expected<ir::Value*> realView(ir::Graph& g, ir::Value* v) {
  ir::ScalarType real = realOf(v->type().dtype);
  if (real == ir::ScalarType::Unknown) return v;
  SPMD_ASSIGN_OR_RETURN(ir::Value * r, g.addValue(v->name() + kRealSuffix, ir::ValueKind::Tensor));
  r->mutableType().dtype = real;
  r->mutableType().sizes = v->type().sizes;
  r->mutableType().sizes.emplace_back(2);
  SPMD_RETURN_IF_ERROR(g.addNode(r->name(), "aten.view_as_real.default",
                                 {{"self", ir::Argument::tensor(v), false}}, {ir::Argument::tensor(r)})
                           .status());
  return r;
}

/// The program: one input per feed (a split feed adds a [shares, ...]
/// input and an aten.sum.dim_IntList over its dim 0 defining the operand),
/// the node itself (same name, target, arguments, metadata), its tensor
/// results (complex ones viewed as real) as user outputs.
Expected<ir::ExportedProgram> buildProgram(const ir::Node& node, const std::vector<Feed>& feeds,
                                           const sharding::Mesh& mesh) {
  ir::ExportedProgram p;
  p.name = node.name();
  p.schemaMajor = 8;
  ir::Graph& g = p.graph;
  std::vector<std::pair<const Feed*, ir::Value*>> shares;
  for (const Feed& f : feeds) {
    if (!f.split) {
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, cloneValue(g, *f.value, f.value->name()));
      addUserInput(p, v);
      continue;
    }
    SPMD_ASSIGN_OR_RETURN(ir::Value * s, cloneValue(g, *f.value, f.value->name() + kSharesSuffix));
    ir::TensorType& t = s->mutableType();
    t.sizes.insert(t.sizes.begin(), ir::Dim(f.shares(mesh)));
    t.strides.clear();
    addUserInput(p, s);
    shares.emplace_back(&f, s);
  }
  for (auto [f, s] : shares) {
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, cloneValue(g, *f->value, f->value->name()));
    SPMD_RETURN_IF_ERROR(
        g.addNode(v->name() + "_from_shares", "aten.sum.dim_IntList",
                  {{"self", ir::Argument::tensor(s), false}, {"dim", ir::Argument::integers({0}), false}},
                  {ir::Argument::tensor(v)})
            .status());
  }
  std::vector<ir::NamedArgument> inputs = node.inputs();
  for (auto& na : inputs)
    for (ir::Value*& v : na.arg.values)
      if (v) v = g.findValue(v->name());
  std::vector<ir::Argument> outputs = node.outputs();
  std::vector<ir::Value*> results;
  for (auto& a : outputs)
    for (ir::Value*& v : a.values) {
      if (!v) continue;
      const ir::Value* src = v;
      SPMD_ASSIGN_OR_RETURN(v, cloneValue(g, *src, src->name()));
      if (v->isTensor()) results.push_back(v);
    }
  SPMD_ASSIGN_OR_RETURN(ir::Node * n,
                        g.addNode(node.name(), node.target(), std::move(inputs), std::move(outputs)));
  n->mutableMetadata() = node.metadata();
  for (ir::Value*& v : results) {
    SPMD_ASSIGN_OR_RETURN(v, realView(g, v));
    g.addOutput(ir::Argument::tensor(v));
    p.signature.outputs.push_back({ir::OutputKind::UserOutput, ir::Argument::tensor(v), ""});
  }
  SPMD_RETURN_IF_ERROR(g.verify());
  return p;
}

/// Hand-made propagation of a program from buildProgram: inputs and the
/// shares' sums as the feeds say, the node as `strategy` says.
sharding::Propagation propagationOf(const ir::ExportedProgram& p, const std::vector<Feed>& feeds,
                                    const NodeSharding& strategy, std::vector<ShardingSpec>& inputSpecs) {
  sharding::Propagation prop;
  prop.values.assign(p.graph.numValues(), ShardingSpec{});
  for (const Feed& f : feeds) {
    const ir::Value* v = p.graph.findValue(f.value->name());
    prop.values[static_cast<size_t>(v->id())] = f.spec;
    if (f.split)
      prop.values[static_cast<size_t>(p.graph.findValue(f.value->name() + kSharesSuffix)->id())] =
          f.sharesSpec();
  }
  for (const ir::Value* in : p.graph.inputs())
    inputSpecs.push_back(prop.values[static_cast<size_t>(in->id())]);
  for (const auto& n : p.graph.nodes()) {
    if (n->name() == p.name) {
      prop.nodes.push_back(strategy);
      auto results = sharding::tensorResults(*n);
      for (size_t i = 0; i < results.size(); ++i)
        prop.values[static_cast<size_t>(results[i]->id())] = strategy.results[i];
      continue;
    }
    const ir::Value* in = sharding::tensorOperands(*n)[0];
    const ir::Value* out = n->outputValues()[0];
    if (n->target() == "aten.view_as_real.default")  // a complex result's real view: same layout
      prop.values[static_cast<size_t>(out->id())] = prop.values[static_cast<size_t>(in->id())];
    prop.nodes.push_back({{prop.values[static_cast<size_t>(in->id())]},
                          {prop.values[static_cast<size_t>(out->id())]},
                          "shares"});
  }
  return prop;
}

/// `n` random shares of `x`, stacked: their `op`-reduction is x.
at::Tensor sharesOf(const at::Tensor& x, ReduceOp op, int64_t n) {
  at::Tensor finite = at::where(at::isfinite(x), x.abs(), at::zeros_like(x));
  double scale = x.numel() ? finite.to(at::kDouble).mean().item<double>() : 1.0;
  if (!(scale > 0)) scale = 1.0;
  // Shares of 1/64 of x's size: a non-linear op on them is still off by
  // ~1e-2 relative (gelu, exp, a product of two pending operands), while
  // the rounding of op(x - r) + op(r) stays within tolerance through long
  // reductions (cnn_train's addmm contracts 2048 elements).
  std::vector<int64_t> stacked{n - 1};
  stacked.insert(stacked.end(), x.sizes().begin(), x.sizes().end());
  at::Tensor r = at::randn(stacked, x.options()) * (scale / 64);  // shares 1..n-1
  switch (op) {
    case ReduceOp::Sum:
      return at::cat({(x - r.sum(0)).unsqueeze(0), r});
    case ReduceOp::Avg: {
      at::Tensor all = at::cat({at::zeros_like(x).unsqueeze(0), r});
      return x.unsqueeze(0) + all - all.mean(0, /*keepdim=*/true);
    }
    case ReduceOp::Max:
    case ReduceOp::Min: {
      // Share `pick` holds x, the others are below (max) or above (min) it.
      at::Tensor pick = at::randint(n, x.sizes(), at::kLong);
      at::Tensor off = at::cat({r.abs(), (r.abs().mean(0) + scale / 64).unsqueeze(0)});
      at::Tensor others = op == ReduceOp::Max ? x.unsqueeze(0) - off : x.unsqueeze(0) + off;
      std::vector<int64_t> rowShape(stacked.size(), 1);
      rowShape[0] = n;
      at::Tensor rows = at::arange(n, at::kLong).view(rowShape);
      return at::where(rows.eq(pick.unsqueeze(0)), x.unsqueeze(0), others);
    }
  }
  return x;
}

/// Machine epsilon of a floating dtype.
double epsilonOf(c10::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return std::numeric_limits<double>::epsilon();
    case at::kHalf:
      return 9.765625e-4;
    case at::kBFloat16:
      return 7.8125e-3;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

/// Empty when `got` matches `want`; otherwise what differs. Floats match
/// within kAtol + kRtol * |want|, plus, where `magnitude` is defined (the op
/// run on |operands|), kSlack ulps of it: sums regrouped across ranks
/// round differently, by up to a few ulps of the sum of |terms| (a sum of
/// 192 normals cancelling to 0.07 is off by 2e-6 when split in two).
std::string compare(const at::Tensor& want, const at::Tensor& got, const at::Tensor& magnitude,
                    bool valuesMatter) {
  if (got.sizes() != want.sizes())
    return "shape " + formatShape(got.sizes()) + ", expected " + formatShape(want.sizes());
  if (got.scalar_type() != want.scalar_type())
    return std::string("dtype ") + c10::toString(got.scalar_type()) + ", expected " +
           c10::toString(want.scalar_type());
  if (!valuesMatter || want.numel() == 0) return "";
  if (!want.is_floating_point() && !want.is_complex()) {
    if (at::equal(got, want)) return "";
    int64_t bad = got.ne(want).sum().item<int64_t>();
    return std::to_string(bad) + " of " + std::to_string(want.numel()) + " elements differ";
  }
  at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  at::Tensor tol = kAtol + kRtol * w.abs();
  if (magnitude.defined() && magnitude.sizes() == want.sizes()) {
    at::Tensor m = magnitude.to(at::kDouble).abs();
    tol = tol + kSlack * epsilonOf(want.scalar_type()) * at::where(at::isfinite(m), m, at::zeros_like(m));
  }
  at::Tensor diff = (g - w).abs();
  at::Tensor ok = diff.le(tol).logical_or(g.eq(w)).logical_or(g.isnan().logical_and(w.isnan()));
  if (ok.all().item<bool>()) return "";
  std::ostringstream o;
  at::Tensor shown =
      at::where(ok, at::zeros_like(diff), diff.nan_to_num(std::numeric_limits<double>::infinity()));
  o << ok.logical_not().sum().item<int64_t>() << " of " << want.numel() << " elements differ, max |diff| "
    << shown.max().item<double>() << " (max |expected| " << w.abs().nan_to_num(0, 0, 0).max().item<double>()
    << ")";
  return o.str();
}

/// The reduce op of a spec's pending axes (one per spec: see composable).
ReduceOp pendingOp(const ShardingSpec& spec) {
  for (const Placement& p : spec.placements)
    if (p.isPartial()) return p.reduce;
  return ReduceOp::Sum;
}

/// This process's simulated world on `mesh`, its process groups built once
/// for every case run on that mesh (a new one after a failed run); null when
/// its groups cannot be built (the run then builds its own and reports why).
runtime::ThreadedWorld* worldOn(const sharding::Mesh& mesh, const runtime::CommOptions& comm,
                                CheckStats& stats) {
  static std::map<std::string, std::unique_ptr<runtime::ThreadedWorld>> worlds;
  auto& world = worlds[mesh.str()];
  for (int attempt = 0; attempt < 3 && (!world || !world->usable()); ++attempt) {
    // Gloo's TCP rendezvous on 127.0.0.1 now and then meets a stray
    // connection (other processes' workers on reused ports): set up again.
    if (attempt > 0) ++stats.setupRetries;
    auto made = runtime::ThreadedWorld::create(mesh, comm);
    world = made ? std::move(*made) : nullptr;
  }
  return world.get();
}

/// Checks the strategies of one node against its unsharded run.
struct Checker {
  Checker(const ir::Node& n, const TensorMap& ops, const std::string& w, CheckStats& s,
          const sharding::Mesh& m, std::string mn)
      : node(n), operands(ops), where(w), stats(s), mesh(m), meshStr(std::move(mn)) {}

  const ir::Node& node;
  const TensorMap& operands;
  const std::string& where;
  CheckStats& stats;
  const sharding::Mesh& mesh;
  std::string meshStr;
  TensorMap reference;
  /// The node run on |operand| (floating operands): the size of its sums.
  TensorMap magnitude;
  TempDir dir;

  void fail(const NodeSharding& ns, const std::string& what) {
    stats.failures.push_back(where + ": node %" + node.name() + " (" + node.target() + ") on mesh " +
                             meshStr + "\n  rule: " + ns.rule + "\n  strategy: " + strategyStr(ns) + "\n  " +
                             what);
  }

  /// The distinct tensor operands with the layout of their first use.
  std::vector<Feed> feedsFor(const NodeSharding& ns) const {
    std::vector<Feed> feeds;
    auto ops = sharding::tensorOperands(node);
    for (size_t i = 0; i < ops.size(); ++i) {
      bool seen = false;
      for (const Feed& f : feeds) seen |= f.value == ops[i];
      if (seen) continue;
      const at::Tensor& x = operands.at(ops[i]->name());
      bool split = ns.operands[i].hasPartial() && x.is_floating_point();
      feeds.push_back({ops[i], ns.operands[i], split});
    }
    return feeds;
  }

  bool evenlyDivisible(const NodeSharding& ns) const {
    auto ops = sharding::tensorOperands(node);
    for (size_t i = 0; i < ops.size(); ++i) {
      const at::Tensor& x = operands.at(ops[i]->name());
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
      if (!sharding::checkEvenlyDivisible(shape, ns.operands[i], mesh).isOk()) return false;
    }
    for (size_t i = 0; i < ns.results.size(); ++i) {
      const at::Tensor& y = reference.at("output." + std::to_string(i));
      std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
      if (!sharding::checkEvenlyDivisible(shape, ns.results[i], mesh).isOk()) return false;
    }
    return true;
  }

  Status runReference() {
    std::vector<Feed> feeds;
    for (ir::Value* v : sharding::tensorOperands(node)) {
      bool seen = false;
      for (const Feed& f : feeds) seen |= f.value == v;
      if (!seen) feeds.push_back({v, ShardingSpec::replicated(1), false});
    }
    SPMD_ASSIGN_OR_RETURN(ir::ExportedProgram p, buildProgram(node, feeds, mesh));
    SPMD_ASSIGN_OR_RETURN(runtime::ProgramRunner runner, runtime::ProgramRunner::create(p, {}));
    TensorMap in;
    for (const Feed& f : feeds) in[f.value->name()] = operands.at(f.value->name());
    SPMD_ASSIGN_OR_RETURN(reference, runner.run(in));
    for (auto& [name, t] : in)
      if (t.is_floating_point()) t = t.abs();
    auto mag = runner.run(in);  // ops undefined on |x| only lose the slack
    if (mag) magnitude = std::move(*mag);
    return Status::ok();
  }

  /// Expands, writes, reads and runs `ns` on the mesh; compares with the reference.
  void check(const NodeSharding& ns, int index) {
    if (!evenlyDivisible(ns)) {
      ++stats.skippedUneven;
      return;
    }
    ++stats.pairs;
    ++stats.pairsByMesh[meshStr];
    stats.checked.push_back(node.target() + ": " + strategyStr(ns) +
                            (meshStr == "2" ? "" : " on " + meshStr));
    std::vector<Feed> feeds = feedsFor(ns);
    auto p = buildProgram(node, feeds, mesh);
    if (!p) return fail(ns, "building the program: " + p.status().message());
    std::vector<ShardingSpec> inputSpecs;
    sharding::Propagation prop = propagationOf(*p, feeds, ns, inputSpecs);
    passes::ExpandInput in;
    in.source = &*p;
    in.propagation = &prop;
    in.mesh = mesh;
    in.inputSpecs = inputSpecs;
    in.outputSpecs.assign(p->signature.outputs.size(), std::nullopt);
    auto expanded = passes::expand(in);
    if (!expanded) return fail(ns, "expand: " + expanded.status().message());
    std::string path = dir.file("s" + std::to_string(index) + ".spmd");
    Status written = program::writeProgram(path, *expanded, program::MemoryWeightSource());
    if (!written.isOk()) return fail(ns, "writeProgram: " + written.message());
    auto loaded = program::readProgram(path);
    if (!loaded) return fail(ns, "readProgram: " + loaded.status().message());
    TensorMap inputs;
    // Shares are random, but the same for a pair whatever runs before it.
    at::manual_seed(std::hash<std::string>()(where + "/" + node.name() + "/" + std::to_string(index)));
    for (const Feed& f : feeds) {
      const at::Tensor& x = operands.at(f.value->name());
      if (f.split)
        inputs[f.value->name() + kSharesSuffix] = sharesOf(x, pendingOp(f.spec), f.shares(mesh));
      else
        inputs[f.value->name()] = x;
    }
    runtime::RankOptions opts;
    opts.comm.timeout = std::chrono::milliseconds(20000);
    auto run = runtime::runThreaded(*loaded, inputs, opts, worldOn(mesh, opts.comm, stats));
    for (int retry = 0; retry < 2 && !run && run.status().message().find(kSetupFailed) != std::string::npos;
         ++retry) {
      ++stats.setupRetries;
      run = runtime::runThreaded(*loaded, inputs, opts);
    }
    if (!run) return fail(ns, "runThreaded: " + run.status().message());
    bool values = !valuesUnspecified(node.target());
    // Only a pending operand or result regroups sums across ranks.
    bool regrouped = false;
    for (const auto& spec : ns.operands) regrouped |= spec.hasPartial();
    for (const auto& spec : ns.results) regrouped |= spec.hasPartial();
    for (size_t i = 0; i < ns.results.size(); ++i) {
      std::string name = "output." + std::to_string(i);
      auto got = run->outputs.find(name);
      if (got == run->outputs.end()) return fail(ns, "result " + std::to_string(i) + " missing");
      auto mag = magnitude.find(name);
      at::Tensor m = regrouped && mag != magnitude.end() ? mag->second : at::Tensor();
      std::string diff = compare(reference.at(name), got->second, m, values);
      if (!diff.empty()) fail(ns, "result " + std::to_string(i) + " " + ns.results[i].str() + ": " + diff);
    }
  }
};

}  // namespace

std::string CheckStats::summary() const {
  std::string byMesh;
  for (const auto& [m, n] : pairsByMesh)
    byMesh += (byMesh.empty() ? " (mesh " : ", ") + m + ": " + std::to_string(n);
  if (!byMesh.empty()) byMesh += ")";
  return std::to_string(nodes) + " nodes, " + std::to_string(pairs) +
         " (node, strategy, mesh) cases checked" + byMesh + ", " + std::to_string(skippedUneven) +
         " strategies skipped (uneven shards), " + std::to_string(failures.size()) + " failures" +
         (setupRetries ? ", " + std::to_string(setupRetries) + " process-group setups retried" : "");
}

void CheckStats::add(const CheckStats& o) {
  nodes += o.nodes;
  pairs += o.pairs;
  for (const auto& [m, n] : o.pairsByMesh) pairsByMesh[m] += n;
  skippedUneven += o.skippedUneven;
  setupRetries += o.setupRetries;
  failures.insert(failures.end(), o.failures.begin(), o.failures.end());
  checked.insert(checked.end(), o.checked.begin(), o.checked.end());
}

bool checkable(const ir::Node& node) {
  if (sharding::isSymbolicOp(node.target()) || ir::isSpmdOp(node.target())) return false;
  for (const ir::Value* v : node.inputValues())
    if (!v->isTensor() || !v->type().isStatic()) return false;
  bool tensorResult = false;
  for (const ir::Value* v : node.outputValues()) {
    if (v->isTensor() && !v->type().isStatic()) return false;
    tensorResult |= v->isTensor();
  }
  return tensorResult;
}

void checkNode(const ir::Node& node, const TensorMap& operands, const std::string& where, CheckStats& stats,
               const std::vector<int64_t>& meshSizes) {
  ++stats.nodes;
  auto mesh = sharding::Mesh::create(meshSizes);
  SPMD_CHECK(mesh.hasValue());
  Checker c(node, operands, where, stats, *mesh, sharding::Mesh::formatShape(meshSizes));
  NodeSharding none;
  auto strategies = strategiesOn(node, meshSizes);
  if (!strategies) return c.fail(none, "enumerateStrategies: " + strategies.status().message());
  Status ref = c.runReference();
  if (!ref.isOk()) return c.fail(none, "unsharded run: " + ref.message());
  for (size_t i = 0; i < strategies->size(); ++i) c.check((*strategies)[i], static_cast<int>(i));
}

Expected<ir::ExportedProgram> withOutputs(const ir::ExportedProgram& program,
                                          const std::vector<std::string>& names) {
  SPMD_ASSIGN_OR_RETURN(std::string json, serialize::exportedProgramToJsonText(program));
  SPMD_ASSIGN_OR_RETURN(ir::ExportedProgram copy, serialize::parseExportedProgram(json, program.name));
  copy.graph.mutableOutputs().clear();
  copy.signature.outputs.clear();
  for (const std::string& name : names) {
    ir::Value* v = copy.graph.findValue(name);
    if (!v) return Status::error("no value named '" + name + "'");
    copy.graph.addOutput(ir::Argument::tensor(v));
    copy.signature.outputs.push_back({ir::OutputKind::UserOutput, ir::Argument::tensor(v), ""});
  }
  return copy;
}

}  // namespace spmd::numeric
