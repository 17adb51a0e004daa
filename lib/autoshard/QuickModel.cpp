// The quick cost model (see QuickModel.h).
////
// The stack's cuts and their extrapolation live here; the pricing of one
// graph in QuickPricing.cpp.
#include "autoshard/QuickModel.h"

#include "autoshard/Fold.h"
#include "autoshard/QuickModelImpl.h"
#include "autoshard/Variables.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "pt2/Archive.h"
#include "support/Log.h"

namespace spmd::autoshard {

namespace {

// c0 + n * (c1 - c0), field by field (counts at least 0), but for the peak:
// a maximum does not extrapolate (QuickModel::evaluate sets it).
passes::LayoutCost extrapolate(const passes::LayoutCost& c0, const passes::LayoutCost& c1, int64_t n) {
  auto lin = [n](auto a, auto b) { return a + static_cast<decltype(a)>(n) * (b - a); };
  auto count = [&](int64_t a, int64_t b) { return std::max<int64_t>(0, lin(a, b)); };
  passes::LayoutCost c = c0;
  c.computeSeconds = lin(c0.computeSeconds, c1.computeSeconds);
  c.commSeconds = lin(c0.commSeconds, c1.commSeconds);
  c.paramBytes = count(c0.paramBytes, c1.paramBytes);
  for (size_t a = 0; a < c.axes.size() && a < c1.axes.size(); ++a) {
    passes::AxisComm& ac = c.axes[a];
    const passes::AxisComm& b = c1.axes[a];
    ac.seconds = lin(ac.seconds, b.seconds);
    ac.collectives = count(ac.collectives, b.collectives);
    auto find = [](auto& kinds, const std::string& kind) {
      return std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == kind; });
    };
    for (const auto& e : b.byKind)
      if (find(ac.byKind, e.first) == ac.byKind.end()) ac.byKind.emplace_back(e.first, 0);
    for (auto& e : ac.byKind) {
      auto it = find(b.byKind, e.first);
      e.second = count(e.second, it == b.byKind.end() ? 0 : it->second);
    }
    ac.byKind.erase(
        std::remove_if(ac.byKind.begin(), ac.byKind.end(), [](const auto& e) { return e.second == 0; }),
        ac.byKind.end());
  }
  return c;
}

// The error of a layout whose layers plan unalike: the step extrapolated
// from the first two cuts is `a`, from the next two `b` (nullopt: `a` is
// negative).
Status unalikeError(const passes::LayoutCost& a, const std::optional<passes::LayoutCost>& b,
                    const std::string& folding) {
  auto ms = [](const passes::LayoutCost& c) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.4g + %.4g ms", c.computeSeconds * 1e3, c.commSeconds * 1e3);
    return std::string(buf);
  };
  return Status::error("the layers plan unalike under this layout (" + folding + "): the step is " + ms(a) +
                       (b ? ", but " + ms(*b) + " from one layer more" : std::string(", below 0")) +
                       " (not priced folded)");
}

// OK when `a` and `b`, the step extrapolated from two pairs of cuts, agree
// within 1e-4 of the step in compute and in communication (bucketing moves
// the communication by ~3e-5 of it); else unalikeError.
Status sameStep(const passes::LayoutCost& a, const passes::LayoutCost& b, const std::string& folding) {
  const double step = std::max(std::abs(a.stepSeconds()), std::abs(b.stepSeconds()));
  if (std::abs(a.computeSeconds - b.computeSeconds) <= 1e-4 * step &&
      std::abs(a.commSeconds - b.commSeconds) <= 1e-4 * step && a.computeSeconds >= 0 && a.commSeconds >= 0)
    return Status::ok();
  return unalikeError(a, b, folding);
}

// True when the rules of `pins` lay out an input of the stack `prefix`
// (its layers would then differ: not folded).
bool pinsStack(const ir::ExportedProgram& p, const schema::PlacementSchema* pins, const std::string& prefix) {
  for (const auto& name : pinnedNames(p, pins))
    if (name.starts_with(prefix + ".")) return true;
  return false;
}

Expected<std::unique_ptr<QuickModel::Impl>> prepared(pt2::Archive a, const AutoOptions& o) {
  auto impl = std::make_unique<QuickModel::Impl>(std::move(a), o.mesh);
  SPMD_RETURN_IF_ERROR(impl->prepare(o));
  return impl;
}

}  // namespace

QuickModel::QuickModel(std::unique_ptr<Impl> impl, std::unique_ptr<Impl> next, std::unique_ptr<Impl> check)
    : impl_(std::move(impl)), next_(std::move(next)), check_(std::move(check)) {
  if (!next_) return;
  // The second cut's own values (its extra layer's, and their optimizer's
  // and anchors'): the whole stack has L - kept - 1 more of each.
  // (The first cut's graph keeps the values of the nodes it removed, without
  // a producer: only its inputs and node results count.)
  std::unordered_set<std::string_view> firstHas;
  for (const ir::Value* v : impl_->archive.program.graph.inputs()) firstHas.insert(v->name());
  for (const auto& n : impl_->archive.program.graph.nodes())
    for (const ir::Value* v : n->outputValues()) firstHas.insert(v->name());
  std::unordered_set<std::string_view> firstNodes;
  for (const auto& n : impl_->archive.program.graph.nodes()) firstNodes.insert(n->name());
  // A value the rest reads (the chain's exit: the layer's output, the
  // gradient it hands down) is one value however many layers there are.
  next_->grows.resize(next_->ranges.size());
  for (size_t r = 0; r < next_->ranges.size(); ++r) {
    const ir::Value& v = *next_->ranges[r].value;
    next_->grows[r] = !firstHas.count(v.name()) &&
                      std::none_of(v.users().begin(), v.users().end(),
                                   [&](const ir::Node* u) { return firstNodes.count(u->name()) > 0; });
  }
  for (const auto& n : next_->archive.program.graph.nodes())
    next_->extraNode.push_back(!firstNodes.count(n->name()));
  next_->liveAt.assign(next_->extraNode.size(), 0);
  next_->grownAt.assign(next_->extraNode.size(), 0);
  next_->growDelta.assign(next_->delta.size(), 0);
}

QuickModel::~QuickModel() = default;

Expected<std::unique_ptr<QuickModel>> QuickModel::create(const std::string& modelPath, const AutoOptions& o) {
  SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive(modelPath, {.loadWeights = false}));
  return create(std::move(a), o);
}

// Three cuts: `a` to o.foldKeep + 1 layers, then two copies of it to
// o.foldKeep and o.foldKeep + 2 (the check evaluate() makes).
Expected<std::unique_ptr<QuickModel>> QuickModel::folded(pt2::Archive& a, const AutoOptions& o) {
  const int keep = o.foldKeep;
  pt2::Archive first = pt2::cloneArchive(a), third = pt2::cloneArchive(a);  // cheaper than reading again
  SPMD_ASSIGN_OR_RETURN(FoldedStack cut, foldLayers(a.program, keep + 1));
  if (pinsStack(first.program, o.pins, cut.prefix))
    return Status::error("the pins lay out inputs of " + cut.prefix);
  std::unordered_set<std::string> cutAway;
  for (const auto& in : first.program.signature.inputs) cutAway.insert(in.target);
  SPMD_RETURN_IF_ERROR(foldLayers(first.program, keep).status());
  for (const auto& in : first.program.signature.inputs) cutAway.erase(in.target);
  SPMD_RETURN_IF_ERROR(foldLayers(third.program, keep + 2).status());
  SPMD_ASSIGN_OR_RETURN(auto impl, prepared(std::move(first), o));
  SPMD_ASSIGN_OR_RETURN(auto check, prepared(std::move(third), o));
  SPMD_ASSIGN_OR_RETURN(auto next, prepared(std::move(a), o));
  std::unique_ptr<QuickModel> q(new QuickModel(std::move(impl), std::move(next), std::move(check)));
  q->extra_ = cut.layers - keep;
  q->cutAway_ = std::move(cutAway);
  q->folding_ = cut.prefix + " priced at " + std::to_string(keep) + " and " + std::to_string(keep + 1) +
                " of " + std::to_string(cut.layers) + " layers";
  return q;
}

// Folded where it folds (a cut that failed after changing `a`, or moved it:
// read again), else the whole program.
Expected<std::unique_ptr<QuickModel>> QuickModel::create(pt2::Archive a, const AutoOptions& o) {
  if (o.foldKeep > 0 && !o.memoryBudget) {  // folded peaks are estimates (QuickModelTest: within 6%)
    const size_t nodes = a.program.graph.nodes().size();
    const std::string path = a.path;
    auto q = folded(a, o);
    if (q) return q;
    if (a.program.graph.nodes().size() != nodes) {
      SPMD_ASSIGN_OR_RETURN(a, pt2::readArchive(path, {.loadWeights = false}));
    }
    logging::debug("auto: not folded: ", q.status().message());
  }
  SPMD_ASSIGN_OR_RETURN(auto impl, prepared(std::move(a), o));
  return std::unique_ptr<QuickModel>(new QuickModel(std::move(impl), nullptr, nullptr));
}

bool QuickModel::covers(const schema::PlacementSchema& s) { return !s.sequenceParallel && s.tpPlan.empty(); }

Expected<passes::LayoutCost> QuickModel::evaluate(const schema::PlacementSchema& s) {
  if (!next_) return impl_->evaluate(s);
  // A rule naming one tensor of a layer the cuts removed (a group written
  // member by member) matches nothing there, and must not fail.
  std::optional<schema::PlacementSchema> lenient;
  for (size_t r = 0; r < s.params.size(); ++r)
    if (!s.params[r].optional && cutAway_.count(s.params[r].match)) {
      if (!lenient) lenient = s;
      lenient->params[r].optional = true;
    }
  const schema::PlacementSchema& cutSchema = lenient ? *lenient : s;
  SPMD_ASSIGN_OR_RETURN(passes::LayoutCost c, impl_->evaluate(cutSchema));
  SPMD_ASSIGN_OR_RETURN(passes::LayoutCost c1, next_->evaluate(cutSchema));
  passes::LayoutCost out = extrapolate(c, c1, extra_);
  if (out.computeSeconds < 0 || out.commSeconds < 0) {  // no need for the third cut to tell
    ++unalike_;
    return unalikeError(out, std::nullopt, folding_);
  }
  if (checkAll_) {
    SPMD_ASSIGN_OR_RETURN(passes::LayoutCost c2, check_->evaluate(cutSchema));
    if (Status st = sameStep(out, extrapolate(c1, c2, extra_ - 1), folding_); !st.isOk()) {
      ++unalike_;
      return st;
    }
  }
  // The peak of live values on the second cut, each value of its extra
  // layer counted once per layer it stands for (a value both cuts have,
  // like a RoPE table every layer reads, once).
  out.peakBytes = out.paramBytes + next_->peakLive(extra_ - 1);
  return out;
}

Status QuickModel::check(const schema::PlacementSchema& s) {
  if (!next_ || checkAll_) return Status::ok();
  checkAll_ = true;
  auto c = evaluate(s);
  checkAll_ = false;
  return c.status();
}

}  // namespace spmd::autoshard
