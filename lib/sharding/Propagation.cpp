// Sharding propagation (see Propagation.h for the worked example and the
// invariants). One pass over the nodes in graph order; per node, per mesh
// axis, the cheapest candidate of the node's rule.
#include "sharding/Propagation.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>

#include "sharding/NodePlanner.h"

namespace spmd::sharding {
namespace {

using detail::transitionCost;

std::string describe(const ir::Node& n) {
  std::string loc = ir::userSourceLine(n.metadata().stackTrace);
  return n.target() + " (node %" + n.name() + (loc.empty() ? "" : ", " + loc) + ")";
}

// What propagation reads of one node, gathered once for both passes and
// the checks after them (the operand lists, the metadata lookups and the
// rule are the same every time).
struct NodeInfo {
  std::vector<ir::Value*> operands;       // tensorOperands
  std::vector<ir::Value*> results;        // tensorResults
  const std::string* layout = nullptr;    // kLayoutKey's value, if any
  const std::string* layoutAs = nullptr;  // kLayoutAsKey's value, if any
  const RuleFn* fn = nullptr;             // the registry's rule, if any
  std::optional<OpShardingRule> rule;     // built by the first pass that needs it
  int planClass = -1;                     // detail::PlanMemo's class, with the rule
  std::string ruleText;                   // rule->str(), with the rule
  const ir::Value* like = nullptr;        // the value layoutAs names
  bool symbolic = false;                  // isSymbolicOp(target)
};

std::vector<NodeInfo> nodeInfos(const ir::Graph& g, const RuleRegistry& registry) {
  std::vector<NodeInfo> infos(g.nodes().size());
  const std::string layoutKey(kLayoutKey), layoutAsKey(kLayoutAsKey);
  for (const auto& n : g.nodes()) {
    NodeInfo& info = infos[static_cast<size_t>(n->index())];
    info.operands = tensorOperands(*n);
    info.results = tensorResults(*n);
    info.fn = registry.find(n->target());
    const auto& other = n->metadata().other;
    if (auto it = other.find(layoutKey); it != other.end()) info.layout = &it->second;
    if (auto it = other.find(layoutAsKey); it != other.end()) {
      info.layoutAs = &it->second;
      info.like = g.findValue(it->second);
    }
    info.symbolic = isSymbolicOp(n->target());
  }
  return infos;
}

// True for a layout anchor (kLayoutKey or kLayoutAsKey): its layout is
// asked for, not chosen by a rule.
bool isLayoutAnchor(const NodeInfo& n) { return n.layout != nullptr || n.layoutAs != nullptr; }

// By value id: true when the value reaches nothing but graph outputs and
// layout anchors, directly or through one-operand nodes, so a pending sum
// in it is resolved where the output's or anchor's layout says.
std::vector<bool> sinkBoundValues(const ir::Graph& g, const std::vector<NodeInfo>& infos) {
  std::vector<bool> sink(g.numValues(), false);
  for (const auto& out : g.outputs())
    for (ir::Value* v : out.values) sink[static_cast<size_t>(v->id())] = true;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const ir::Node& n = **it;
    const NodeInfo& info = infos[static_cast<size_t>(n.index())];
    if (info.operands.size() != 1) continue;
    bool allSink = isLayoutAnchor(info) || !info.results.empty();
    for (ir::Value* r : info.results) allSink = allSink && sink[static_cast<size_t>(r->id())];
    if (!allSink) continue;
    ir::Value* v = info.operands[0];
    bool onlyHere = true;
    for (ir::Node* u : v->users()) onlyHere = onlyHere && u == &n;
    bool isOutput = sink[static_cast<size_t>(v->id())];
    if (onlyHere || isOutput) sink[static_cast<size_t>(v->id())] = true;
  }
  return sink;
}

// What every propagation pass reads; `infos` gains each node's rule the
// first time a pass builds it.
struct PassInputs {
  const ir::Graph& g;
  const std::vector<ShardingSpec>& inputSpecs;
  const Mesh& mesh;
  const RuleRegistry& registry;
  const PropagationOptions& options;
  std::vector<NodeInfo>& infos;
  const std::vector<bool>& sink;
  detail::PlanMemo& memo;
  ShardingSpec replicated;  // on the mesh
};

// Layouts each value has been redistributed into so far (by value id).
using Available = std::vector<std::vector<ShardingSpec>>;

// The layouts of a node with a rule: its cheapest candidate per mesh axis.
Status planNode(const PassInputs& in, const ir::Node& n, const RuleFn& fn,
                const std::vector<ShardingSpec>& current,
                const std::vector<const std::vector<ShardingSpec>*>& avail, NodeSharding& ns) {
  NodeInfo& info = in.infos[static_cast<size_t>(n.index())];
  if (!info.rule) {
    auto rule = fn(n);
    if (!rule) return rule.status().withContext("node %" + n.name() + " (" + n.target() + ")");
    if (rule->operands.size() != current.size() || rule->results.size() != info.results.size())
      return Status::error("node %" + n.name() + " (" + n.target() + "): sharding rule describes " +
                           std::to_string(rule->operands.size()) + " operands, the node has " +
                           std::to_string(current.size()));
    info.rule.emplace(std::move(*rule));
    info.ruleText = info.rule->str();
    info.planClass = in.memo.classOf(info.ruleText, *info.rule, info.operands, info.results);
  }
  bool resultsSink = true;
  for (ir::Value* r : info.results) resultsSink = resultsSink && in.sink[static_cast<size_t>(r->id())];
  ns = in.memo.plan(info.planClass, info.operands, info.results, *info.rule, current, avail, in.mesh,
                    in.options.cost, resultsSink);
  return Status::ok();
}

// The layouts of node `n` from its operands' `current` layouts and the
// layouts they were redistributed into before it (`avail`); a node without
// a rule adds its warning to `warnings` (when not null).
Status layoutNode(const PassInputs& in, const ir::Node& n, const Propagation& p,
                  const std::vector<ShardingSpec>& current,
                  const std::vector<const std::vector<ShardingSpec>*>& avail,
                  std::vector<std::string>* warnings, NodeSharding& ns) {
  const NodeInfo& info = in.infos[static_cast<size_t>(n.index())];
  const RuleFn* fn = info.fn;
  const ir::Value* like = info.like;
  if (info.layoutAs != nullptr && (like == nullptr || current.size() != 1))
    return Status::error("node %" + n.name() + ": layout anchor names no value, or has several operands");
  const auto& overrides = in.options.layoutOverrides;
  auto overridden = info.layout == nullptr ? overrides.end() : overrides.find(n.index());
  if (overridden != overrides.end()) {
    ns.operands.assign(current.size(), overridden->second);
    ns.results.assign(info.results.size(), overridden->second);
  } else if (info.layout != nullptr) {
    Expected<ShardingSpec> spec = ShardingSpec::parse(*info.layout);
    if (!spec || current.size() != 1 || static_cast<int64_t>(spec->placements.size()) != in.mesh.numAxes())
      return Status::error("node %" + n.name() + ": layout anchor '" + *info.layout +
                           "' is not a layout of the mesh, or the node has several operands");
    ns.operands.assign(1, *spec);
    ns.results.assign(info.results.size(), *spec);
  } else if (like != nullptr) {
    const ShardingSpec& spec = p.values[static_cast<size_t>(like->id())];
    ns.operands.assign(1, spec);
    ns.results.assign(info.results.size(), spec);
  } else if (info.symbolic || !fn) {
    if (!fn && !info.symbolic && warnings)
      warnings->push_back("no sharding rule for " + describe(n) + ": running it replicated");
    if (fn || !info.symbolic)
      ns.operands.assign(current.size(), in.replicated);
    else
      ns.operands = current;
    ns.results.assign(info.results.size(), in.replicated);
  } else {
    SPMD_RETURN_IF_ERROR(planNode(in, n, *fn, current, avail, ns));
  }
  return Status::ok();
}

// One greedy pass over the nodes in graph order; `available` starts with
// what an earlier pass redistributed and gains this pass's layouts.
// `p` is filled in place: the layouts of an earlier run of the same graph
// keep their storage (every tensor value and node is written again).
Status runPass(const PassInputs& in, Available& available, Propagation& p) {
  const ir::Graph& g = in.g;
  p.warnings.clear();
  if (p.values.size() != g.numValues() || p.nodes.size() != g.nodes().size()) {
    p.values.assign(g.numValues(), ShardingSpec{});
    p.nodes.assign(g.nodes().size(), NodeSharding{});
  }
  for (size_t i = 0; i < g.inputs().size(); ++i)
    p.values[static_cast<size_t>(g.inputs()[i]->id())] = in.inputSpecs[i];
  std::vector<ShardingSpec> current;
  std::vector<const std::vector<ShardingSpec>*> avail;
  for (const auto& n : g.nodes()) {
    NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    const auto& operandValues = in.infos[static_cast<size_t>(n->index())].operands;
    current.resize(operandValues.size());  // assigned in place: their placement lists are reused
    avail.clear();
    for (size_t i = 0; i < operandValues.size(); ++i) {
      ir::Value* v = operandValues[i];
      current[i] = p.values[static_cast<size_t>(v->id())];
      avail.push_back(&available[static_cast<size_t>(v->id())]);
    }
    SPMD_RETURN_IF_ERROR(layoutNode(in, *n, p, current, avail, &p.warnings, ns));
    for (size_t i = 0; i < operandValues.size(); ++i) {
      auto& list = available[static_cast<size_t>(operandValues[i]->id())];
      if (ns.operands[i] != current[i] && std::find(list.begin(), list.end(), ns.operands[i]) == list.end())
        list.push_back(ns.operands[i]);
    }
    const auto& results = in.infos[static_cast<size_t>(n->index())].results;
    for (size_t i = 0; i < results.size(); ++i)
      p.values[static_cast<size_t>(results[i]->id())] = ns.results[i];
  }
  return Status::ok();
}

// What an incremental run (PropagationOptions::incremental) keeps between
// runs: each value's uses, and the nodes the current run must plan again.
struct Incremental {
  std::vector<std::vector<std::pair<int, size_t>>> uses;  // by value id: (node index, operand slot), in order
  std::vector<std::vector<int>> likeUsers;                // by value id: the layoutAs anchors that name it
  std::vector<int> anchors;        // nodes with a fixed layout (kLayoutKey): always planned
  std::vector<uint32_t> queuedIn;  // by node: the run that queued it
  std::priority_queue<int, std::vector<int>, std::greater<>> queue;  // nodes to plan, smallest first
  uint32_t run = 0;
  const Propagation* last = nullptr;  // the result the last complete run wrote
  std::vector<int64_t> lastMesh;
  std::vector<std::vector<ShardingSpec>> lists;  // scratch: available layouts per operand
  NodeSharding fresh;                            // scratch: a node's new layouts
  std::vector<int> replanned;                    // the nodes the last incremental run planned
  bool lastIncremental = false;                  // the last complete run was incremental
  bool ready = false;                            // init() has built the tables

  // Builds the tables once (later calls do nothing).
  void init(const ir::Graph& g, const std::vector<NodeInfo>& infos) {
    if (ready) return;
    ready = true;
    uses.assign(g.numValues(), {});
    likeUsers.assign(g.numValues(), {});
    for (const auto& n : g.nodes()) {
      const NodeInfo& info = infos[static_cast<size_t>(n->index())];
      for (size_t i = 0; i < info.operands.size(); ++i)
        uses[static_cast<size_t>(info.operands[i]->id())].emplace_back(n->index(), i);
      if (info.like) likeUsers[static_cast<size_t>(info.like->id())].push_back(n->index());
      if (info.layout) anchors.push_back(n->index());
    }
    queuedIn.assign(g.nodes().size(), 0);
  }
  void push(int n) {
    if (queuedIn[static_cast<size_t>(n)] == run) return;
    queuedIn[static_cast<size_t>(n)] = run;
    queue.push(n);
  }
  // `v`'s layout changed: every node that reads it plans again.
  void changed(const ir::Value* v) {
    for (const auto& use : uses[static_cast<size_t>(v->id())]) push(use.first);
    for (int n : likeUsers[static_cast<size_t>(v->id())]) push(n);
  }
  // Node `n` asks for another layout of `v` than before: what is available
  // to the uses after it may differ.
  void askedAt(const ir::Value* v, int n) {
    for (const auto& use : uses[static_cast<size_t>(v->id())])
      if (use.first > n) push(use.first);
  }
  // The layouts `v` is redistributed into by its uses before node `n`, in
  // the order a full pass adds them.
  void availableBefore(const Propagation& p, const ir::Value* v, int n,
                       std::vector<ShardingSpec>& list) const {
    list.clear();
    const ShardingSpec& cur = p.values[static_cast<size_t>(v->id())];
    for (const auto& [node, slot] : uses[static_cast<size_t>(v->id())]) {
      if (node >= n) break;
      const auto& ops = p.nodes[static_cast<size_t>(node)].operands;
      if (slot < ops.size() && ops[slot] != cur &&
          std::find(list.begin(), list.end(), ops[slot]) == list.end())
        list.push_back(ops[slot]);
    }
  }
};

// runPass() on the result `p` of the last run of the same graph, mesh and
// options except the inputs and layout overrides: plans again only the
// nodes whose operand layouts, available layouts, anchor layout or layoutAs
// value changed (a node's plan is a function of those), in graph order, so
// the result is the one a full pass gives. Warnings are kept from the full
// run (they do not depend on layouts).
Status runPassIncremental(const PassInputs& in, Incremental& inc, Propagation& p) {
  const ir::Graph& g = in.g;
  ++inc.run;
  inc.replanned.clear();
  inc.queue = {};
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    auto id = static_cast<size_t>(g.inputs()[i]->id());
    if (p.values[id] != in.inputSpecs[i]) {
      p.values[id] = in.inputSpecs[i];
      inc.changed(g.inputs()[i]);
    }
  }
  for (int n : inc.anchors) inc.push(n);
  std::vector<ShardingSpec> current;
  std::vector<const std::vector<ShardingSpec>*> avail;
  while (!inc.queue.empty()) {
    const int idx = inc.queue.top();
    inc.queue.pop();
    inc.replanned.push_back(idx);
    const ir::Node& n = *g.nodes()[static_cast<size_t>(idx)];
    const NodeInfo& info = in.infos[static_cast<size_t>(idx)];
    const auto& ops = info.operands;
    if (inc.lists.size() < ops.size()) inc.lists.resize(ops.size());
    current.resize(ops.size());
    avail.clear();
    for (size_t i = 0; i < ops.size(); ++i) {
      current[i] = p.values[static_cast<size_t>(ops[i]->id())];
      inc.availableBefore(p, ops[i], idx, inc.lists[i]);
      avail.push_back(&inc.lists[i]);
    }
    NodeSharding& ns = p.nodes[static_cast<size_t>(idx)];
    SPMD_RETURN_IF_ERROR(layoutNode(in, n, p, current, avail, nullptr, inc.fresh));
    for (size_t i = 0; i < ops.size(); ++i)
      if (i >= ns.operands.size() || ns.operands[i] != inc.fresh.operands[i]) inc.askedAt(ops[i], idx);
    std::swap(ns, inc.fresh);  // the old layouts' storage serves the next node
    for (size_t i = 0; i < info.results.size(); ++i) {
      auto id = static_cast<size_t>(info.results[i]->id());
      if (p.values[id] != ns.results[i]) {
        p.values[id] = ns.results[i];
        inc.changed(info.results[i]);
      }
    }
  }
  return Status::ok();
}

// A warning for each operand an op's rule makes gather (a shard on some
// axis the op takes whole): the user sharded it, and from here it is not.
// Layout anchors (FSDP's gathers, gradients) are asked for, not forced; a
// node that takes a layout an earlier node asked for (AdamW's weight decay
// on the parameter FSDP gathered) gathers nothing.
void addGatherWarnings(const ir::Graph& g, const std::vector<NodeInfo>& infos, const Mesh& mesh,
                       Propagation& p) {
  std::vector<std::vector<ShardingSpec>> asked(g.numValues());  // by value id, in node order
  for (const auto& n : g.nodes()) {
    const NodeInfo& info = infos[static_cast<size_t>(n->index())];
    const NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    const auto& operands = info.operands;
    const bool warns = !isSymbolicOp(n->target()) && !isLayoutAnchor(info);
    for (size_t i = 0; i < operands.size() && i < ns.operands.size(); ++i) {
      const ShardingSpec& cur = p.values[static_cast<size_t>(operands[i]->id())];
      const ShardingSpec& want = ns.operands[i];
      auto& before = asked[static_cast<size_t>(operands[i]->id())];
      if (std::find(before.begin(), before.end(), want) != before.end()) continue;
      before.push_back(want);
      if (!warns) continue;
      std::string axes;
      for (size_t a = 0; a < cur.placements.size() && a < want.placements.size(); ++a)
        if (cur.placements[a].isShard() && !want.placements[a].isShard() &&
            mesh.size(static_cast<int64_t>(a)) > 1)
          axes += (axes.empty() ? "'" : ", '") + mesh.axisNames()[a] + "'";
      if (axes.empty()) continue;
      p.warnings.push_back(describe(*n) + " gathers %" + operands[i]->name() + " " + cur.str() + " -> " +
                           want.str() + " on " + axes + ": its rule cannot keep that sharding here");
    }
  }
}

// The modeled cost of every redistribution a plan implies (each value into
// each layout once).
double planCost(const PassInputs& in, const Propagation& p) {
  double total = 0;
  std::vector<std::vector<ShardingSpec>> seen(in.g.numValues());
  for (const auto& n : in.g.nodes()) {
    const NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    const auto& operands = in.infos[static_cast<size_t>(n->index())].operands;
    for (size_t i = 0; i < operands.size() && i < ns.operands.size(); ++i) {
      const ShardingSpec& cur = p.values[static_cast<size_t>(operands[i]->id())];
      const ShardingSpec& req = ns.operands[i];
      auto& list = seen[static_cast<size_t>(operands[i]->id())];
      if (cur == req || cur.placements.size() != req.placements.size() ||
          std::find(list.begin(), list.end(), req) != list.end())
        continue;
      list.push_back(req);
      int64_t bytes = localBytes(*operands[i], cur, in.mesh);
      for (size_t a = 0; a < req.placements.size(); ++a)
        total += transitionCost(cur.placements[a], req.placements[a], static_cast<int64_t>(a),
                                in.mesh.size(static_cast<int64_t>(a)), bytes, in.options.cost);
    }
  }
  return total;
}

}  // namespace

Expected<std::vector<NodeSharding>> enumerateStrategies(const ir::Node& node, const RuleRegistry& registry,
                                                        const Mesh& mesh) {
  if (mesh.numAxes() != 1) return Status::error("enumerateStrategies: needs a 1-D mesh");
  const RuleFn* fn = registry.find(node.target());
  if (!fn) return Status::error("no sharding rule for " + node.target());
  SPMD_ASSIGN_OR_RETURN(OpShardingRule rule, (*fn)(node));
  // Operands start pending where the rule lets pending sums through, so the
  // pass-through candidates appear too.
  std::vector<ShardingSpec> current;
  for (size_t i = 0; i < rule.operands.size(); ++i) {
    bool linear = rule.linearity != Linearity::None && rule.linearOperands[i];
    current.push_back(ShardingSpec{{linear ? Placement::partial() : Placement::replicate()}});
  }
  std::vector<std::vector<ShardingSpec>> none(current.size());
  std::vector<const std::vector<ShardingSpec>*> avail;
  avail.reserve(none.size());
  for (auto& v : none) avail.push_back(&v);
  std::vector<ir::Value*> operands = tensorOperands(node), results = tensorResults(node);
  return detail::allNodeLayouts(operands, results, rule, current, avail, mesh, CostModel());
}

bool isSymbolicOp(std::string_view target) {
  return target == "aten.sym_size.int" || target == "aten.sym_numel.default" ||
         target == "aten.sym_stride.int" || target.substr(0, 10) == "_operator." ||
         target == "aten._assert_scalar.default" || target == "aten.sym_constrain_range_for_size.default" ||
         target == "aten._assert_tensor_metadata.default";
}

struct Propagator::Impl {
  const ir::ExportedProgram& program;
  const RuleRegistry& registry;
  std::vector<NodeInfo> infos;
  std::vector<bool> sink;
  std::vector<std::string> missing;  // nodes without a rule, described
  detail::PlanMemo memo;
  std::vector<int64_t> memoMesh;  // the mesh the memo's plans are for
  Incremental incremental;
};

Propagator::Propagator(const ir::ExportedProgram& program, const RuleRegistry& registry)
    : impl_(std::make_unique<Impl>(
          Impl{program, registry, nodeInfos(program.graph, registry), {}, {}, {}, {}, {}})) {
  const ir::Graph& g = program.graph;
  impl_->sink = sinkBoundValues(g, impl_->infos);
  for (const auto& n : g.nodes())
    if (!isSymbolicOp(n->target()) && !impl_->infos[static_cast<size_t>(n->index())].fn)
      impl_->missing.push_back(describe(*n));
}

Propagator::~Propagator() = default;

Expected<Propagation> Propagator::run(const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                                      const PropagationOptions& options) {
  Propagation p;
  SPMD_RETURN_IF_ERROR(runInto(inputSpecs, mesh, options, p));
  return p;
}

Status Propagator::runInto(const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                           const PropagationOptions& options, Propagation& out) {
  const ir::Graph& g = impl_->program.graph;
  if (inputSpecs.size() != g.inputs().size())
    return Status::error("propagation: " + std::to_string(inputSpecs.size()) + " input layouts for " +
                         std::to_string(g.inputs().size()) + " graph inputs");
  const auto& missing = impl_->missing;
  if (!missing.empty() && !options.replicateUnknown) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
    return Status::error(
        "no sharding rule for " + std::to_string(missing.size()) + " op" + (missing.size() == 1 ? "" : "s") +
        ": " + list +
        "; give them rules (a schema's \"rules\": {\"<op>\": \"([i, j]) -> ([i, j])\"}), or pass "
        "--replicate-unknown to run them replicated");
  }
  // The second pass knows which layouts the first one redistributed values
  // into, so an early consumer can use the all-reduced value a later one
  // needs anyway instead of passing its pending sum on; it wins unless it
  // costs more.
  if (impl_->memoMesh != mesh.shape()) {
    impl_->memo.clearPlans();
    impl_->memoMesh = mesh.shape();
  }
  PassInputs in{g,
                inputSpecs,
                mesh,
                impl_->registry,
                options,
                impl_->infos,
                impl_->sink,
                impl_->memo,
                ShardingSpec::replicated(mesh.numAxes())};
  Incremental& inc = impl_->incremental;
  const bool incremental = options.incremental && !options.secondPass && !options.details;
  if (incremental && inc.last == &out && inc.lastMesh == mesh.shape()) {
    inc.last = nullptr;  // until this run completes
    inc.lastIncremental = false;
    SPMD_RETURN_IF_ERROR(runPassIncremental(in, inc, out));
    inc.last = &out;
    inc.lastIncremental = true;
    return Status::ok();
  }
  inc.last = nullptr;
  inc.lastIncremental = false;
  Available first(g.numValues());
  SPMD_RETURN_IF_ERROR(runPass(in, first, out));
  if (incremental) {
    inc.init(g, impl_->infos);
    inc.last = &out;
    inc.lastMesh = mesh.shape();
  }
  if (options.secondPass) {
    Available second = first;
    Propagation p2;
    SPMD_RETURN_IF_ERROR(runPass(in, second, p2));
    if (planCost(in, p2) <= planCost(in, out) + 1e-15) out = std::move(p2);
  }
  Propagation& p = out;
  if (options.details) {
    for (size_t i = 0; i < impl_->infos.size(); ++i)
      if (impl_->infos[i].rule) p.nodes[i].rule = impl_->infos[i].ruleText;
    addGatherWarnings(g, impl_->infos, mesh, p);
  }
  return Status::ok();
}

const std::vector<std::pair<int, size_t>>& Propagator::uses(const ir::Value& v) {
  impl_->incremental.init(impl_->program.graph, impl_->infos);
  return impl_->incremental.uses[static_cast<size_t>(v.id())];
}

const std::vector<int>* Propagator::replanned() const {
  return impl_->incremental.lastIncremental ? &impl_->incremental.replanned : nullptr;
}

Expected<Propagation> propagate(const ir::ExportedProgram& program,
                                const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                                const RuleRegistry& registry, const PropagationOptions& options) {
  return Propagator(program, registry).run(inputSpecs, mesh, options);
}

}  // namespace spmd::sharding
