// planPipeline: where each node of a microbatch's step runs (see Stages.h).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "pipeline/Boundary.h"
#include "pipeline/Stages.h"
#include "pipeline/Verify.h"
#include "program/PipelineText.h"

namespace spmd::pipeline {
namespace {

using program::PipelinePlace;
using Phase = PipelinePlace::Phase;

struct Flags {
  bool bound = false;  // depends on a parameter
  bool micro = false;  // depends on a user input (differs per microbatch)
  bool acc = false;    // after an accumulation over the microbatches
};

std::string axisArg(const ir::Node& n) {
  const ir::Argument* a = n.input("axis");
  return a && !a->strings.empty() ? a->strings[0] : "";
}

std::string nodeRef(const ir::Node& n) { return "node %" + n.name() + " (" + n.target() + ")"; }

class Placer {
 public:
  Placer(const program::Program& p, const StageRequest& req, std::vector<int64_t> paramStages)
      : p_(p), g_(p.graph.graph), req_(req) {
    for (size_t i = 0; i < p.graph.signature.inputs.size(); ++i) {
      const ir::InputSpec& in = p.graph.signature.inputs[i];
      if (!in.value) continue;
      if (in.kind == ir::InputKind::Parameter) {
        flags_[in.value].bound = true;
        paramStage_[in.value] = paramStages[i];
        fqn_[in.value] = in.target;
      }
      if (in.kind == ir::InputKind::UserInput) flags_[in.value].micro = true;
    }
    places_.resize(g_.nodes().size());
  }

  Expected<std::vector<PipelinePlace>> run() {
    for (const auto& n : g_.nodes()) SPMD_RETURN_IF_ERROR(classify(*n));
    SPMD_RETURN_IF_ERROR(moveParameterOnlyToStep());
    SPMD_RETURN_IF_ERROR(stageShared());
    markForward();
    keep_ = gradientFree(g_, places_, [&](const ir::Value& v) { return isLoss(v); });
    // The forward first, its cuts moved to the fewest bytes (Boundary.h);
    // then the backward, which follows it, and its cuts; then the step.
    auto phases = [&](std::initializer_list<Phase> which) -> Status {
      for (const auto& n : g_.nodes())
        if (std::find(which.begin(), which.end(), place(*n).phase) != which.end())
          SPMD_RETURN_IF_ERROR(assignStage(*n));
      return Status::ok();
    };
    SPMD_RETURN_IF_ERROR(phases({Phase::Forward}));
    cutForward(
        g_, [&](const ir::Node& n) { return !readsParameter(n); }, places_, req_.chunks());
    SPMD_RETURN_IF_ERROR(phases({Phase::Backward}));
    cutBackward(
        g_, [&](const ir::Node& n) { return movableBackward(n); }, places_, req_.chunks());
    SPMD_RETURN_IF_ERROR(phases({Phase::Step}));
    SPMD_RETURN_IF_ERROR(checkOutputs());
    return places_;
  }

 private:
  PipelinePlace& place(const ir::Node& n) { return places_[static_cast<size_t>(n.index())]; }
  const PipelinePlace* producerPlace(const ir::Value* v) {
    return v->producer() ? &places_[static_cast<size_t>(v->producer()->index())] : nullptr;
  }

  // A forward value summed over the microbatches: a loss, also through
  // sums over the other axes first (under dp, the loss's all-reduce over
  // dp, then over the microbatches; the backward's seed reads the loss).
  bool isLoss(const ir::Value& v) {
    const PipelinePlace* src = producerPlace(&v);
    return src && src->phase == Phase::Forward &&
           std::any_of(v.users().begin(), v.users().end(), [&](const ir::Node* u) {
             return accumulations_.count(u) ||
                    (u->target() == ir::kAllReduce && isLoss(*u->outputValues().at(0)));
           });
  }

  // The stages holding `v` for the backward: its producer's and, for a
  // forward value, every stage whose forward reads it (it was sent there).
  std::vector<int64_t> holders(const ir::Value& v) {
    const PipelinePlace* src = producerPlace(&v);
    std::vector<int64_t> out{src->stage};
    if (src->phase == Phase::Forward)
      for (const ir::Node* u : v.users())
        if (place(*u).phase == Phase::Forward) out.push_back(place(*u).stage);
    return out;
  }

  // A backward node that reads no parameter runs on the highest stage, at
  // most that of the lowest gradient it reads, holding every forward (or
  // gradient-free) value it reads: a saved value's alias goes with its
  // value, a layer's output sent on serves the next stage's backward, and a
  // weight's gradient stays with the activations it multiplies. -1 when no
  // stage holds them all.
  int64_t latestHolding(const ir::Node& n) {
    int64_t top = req_.chunks() - 1;
    std::vector<const ir::Value*> ahead;
    for (const ir::Value* v : n.inputValues()) {
      const PipelinePlace* src = producerPlace(v);
      if (!src || src->stage < 0) continue;
      if (src->phase == Phase::Forward || keep_[static_cast<size_t>(v->producer()->index())])
        ahead.push_back(v);
      else if (src->phase == Phase::Backward || src->phase == Phase::Step)
        top = std::min(top, src->stage);
    }
    for (int64_t s = top; s >= 0; --s) {
      bool all = std::all_of(ahead.begin(), ahead.end(), [&](const ir::Value* v) {
        std::vector<int64_t> h = holders(*v);
        return std::find(h.begin(), h.end(), s) != h.end();
      });
      if (all) return s;
    }
    return -1;
  }

  // A backward node the backward's cut may move down a stage: it reads no
  // parameter nor a gradient-free value, and what forward values it reads
  // the stage below holds too.
  bool movableBackward(const ir::Node& n) {
    if (readsParameter(n) || keep_[static_cast<size_t>(n.index())]) return false;
    int64_t below = place(n).stage - 1;
    for (const ir::Value* v : n.inputValues()) {
      const PipelinePlace* src = producerPlace(v);
      if (!src || src->stage < 0) continue;
      bool ahead = src->phase == Phase::Forward || keep_[static_cast<size_t>(v->producer()->index())];
      std::vector<int64_t> h = holders(*v);
      if (ahead && std::find(h.begin(), h.end(), below) == h.end()) return false;
    }
    return true;
  }

  bool readsParameter(const ir::Node& n) {
    const auto& in = n.inputValues();
    return std::any_of(in.begin(), in.end(), [&](const ir::Value* v) { return paramStage_.count(v) > 0; });
  }

  Status classify(const ir::Node& n) {
    Flags f;
    for (const ir::Value* v : n.inputValues()) {
      const Flags& in = flags_[v];
      f.bound |= in.bound, f.micro |= in.micro, f.acc |= in.acc;
    }
    std::string axis = ir::isSpmdOp(n.target()) ? axisArg(n) : "";
    bool overMb = axis == req_.microbatchAxis;
    if (overMb && n.target() != ir::kAllReduce && n.target() != ir::kLocalSlice &&
        n.target() != ir::kZeroPartial && n.target() != ir::kLocalSize)
      return Status::error(
          nodeRef(n) + " moves data across the microbatches (axis '" + axis +
          "'): the step mixes rows of the batch before the gradients (e.g. BatchNorm in " +
          "training, or a batch-global op), which a pipeline cannot split into microbatches");
    Phase phase = Phase::Free;
    Flags out = f;
    if (overMb && n.target() == ir::kAllReduce) {
      if (f.acc) return Status::error(nodeRef(n) + " sums over the microbatches twice");
      phase = f.bound ? Phase::Step : Phase::Prologue;
      out = f.bound ? Flags{true, false, true} : Flags{};
      if (f.bound) accumulations_.insert(&n);
    } else if (f.acc) {
      for (const ir::Value* v : n.inputValues())
        if (flags_[v].micro)
          return Status::error(nodeRef(n) +
                               " runs after the gradients are summed over the microbatches but " + "reads %" +
                               v->name() + ", a value of one microbatch");
      phase = Phase::Step;
      out.micro = false;
    } else if (f.bound) {
      phase = Phase::Backward;  // forward ones are found by markForward
    }
    place(n).phase = phase;
    for (const ir::Value* v : n.outputValues()) flags_[v] = out;
    return Status::ok();
  }

  // A value of parameters alone (weight decay's p * (1 - lr * wd)) that
  // only the optimizer reads is part of the step, not of every microbatch.
  // One that the microbatches read too (under fsdp, a bias's all-gather
  // that AdamW's update also reads) is shared: free, so that the step and
  // the microbatches each compute it from the parameter (stageShared keeps
  // it on its parameter's stage).
  Status moveParameterOnlyToStep() {
    const auto& nodes = g_.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const ir::Node& n = **it;
      if (place(n).phase != Phase::Backward) continue;
      bool micro = false, step = false, other = false;
      for (const ir::Value* v : n.outputValues()) {
        micro |= flags_[v].micro;
        for (const ir::Node* u : v->users()) {
          bool shared = place(*u).phase == Phase::Free && shared_.count(u);
          (place(*u).phase == Phase::Step ? step : other) = true;
          step |= shared;
        }
      }
      if (micro || !step) continue;
      if (other) {
        place(n).phase = Phase::Free;
        shared_.insert(&n);
        continue;
      }
      place(n).phase = Phase::Step;
      for (const ir::Value* v : n.outputValues()) flags_[v].acc = true;
    }
    return Status::ok();
  }

  // A shared value of parameters counts as a parameter of their stage
  // (assignStage then keeps its readers there).
  Status stageShared() {
    for (const auto& n : g_.nodes()) {
      if (!shared_.count(n.get())) continue;
      const ir::Value* from = nullptr;
      for (const ir::Value* v : n->inputValues()) {
        auto it = paramStage_.find(v);
        if (it == paramStage_.end()) continue;
        if (from && it->second != paramStage_[from])
          return Status::error(nodeRef(*n) + " reads parameters '" + fqn_[from] + "' and '" + fqn_[v] +
                               "' of two stages: a pipeline cannot share it; move the stage boundary");
        from = v;
      }
      if (!from) continue;
      for (const ir::Value* v : n->outputValues()) paramStage_[v] = paramStage_[from], fqn_[v] = fqn_[from];
    }
    return Status::ok();
  }

  // Forward: the loss's ancestors before its accumulation.
  void markForward() {
    std::vector<const ir::Node*> work;
    for (const auto& o : p_.graph.signature.outputs)
      if (o.kind == ir::OutputKind::LossOutput && o.arg.value() && o.arg.value()->producer())
        work.push_back(o.arg.value()->producer());
    std::unordered_set<const ir::Node*> seen;
    while (!work.empty()) {
      const ir::Node* n = work.back();
      work.pop_back();
      if (!seen.insert(n).second) continue;
      PipelinePlace& pl = place(*n);
      bool beforeLoss = pl.phase == Phase::Backward || pl.phase == Phase::Forward;
      if (beforeLoss) pl.phase = Phase::Forward;
      // Walk up through the step to the accumulation, then through the forward.
      if (beforeLoss || pl.phase == Phase::Step)
        for (const ir::Value* v : n->inputValues())
          if (v->producer()) work.push_back(v->producer());
    }
  }

  Status assignStage(const ir::Node& n) {
    PipelinePlace& pl = place(n);
    if (pl.phase == Phase::Free || pl.phase == Phase::Prologue) return Status::ok();
    int64_t direct = -1, param = -1, fromGrad = INT64_MAX, any = -1;
    for (const ir::Value* v : n.inputValues()) {
      auto ps = paramStage_.find(v);
      const PipelinePlace* src = producerPlace(v);
      if (ps != paramStage_.end()) direct = std::max(direct, ps->second), param = std::max(param, ps->second);
      if (!src || src->stage < 0) continue;
      any = std::max(any, src->stage);
      if (src->phase == Phase::Forward) direct = std::max(direct, src->stage);
      if (src->phase == Phase::Backward || src->phase == Phase::Step)
        fromGrad = std::min(fromGrad, src->stage);
    }
    int64_t holding = pl.phase == Phase::Backward && param < 0 ? latestHolding(n) : -1;
    if (holding >= 0)
      pl.stage = holding;
    else if (pl.phase == Phase::Backward)
      pl.stage = param >= 0 ? param : std::max(direct, fromGrad != INT64_MAX ? fromGrad : int64_t{0});
    else  // forward and step: the highest stage they read
      pl.stage = std::max({direct, any, int64_t{0}});
    for (const ir::Value* v : n.inputValues()) {
      auto ps = paramStage_.find(v);
      if (ps != paramStage_.end() && ps->second != pl.stage)
        return Status::error(
            nodeRef(n) + " runs on stage " + std::to_string(pl.stage) + " but reads parameter '" + fqn_[v] +
            "' of stage " + std::to_string(ps->second) +
            ": a parameter used on two stages (tied weights?) cannot be pipelined; untie it, or " +
            "move the stage boundary");
      const PipelinePlace* src = producerPlace(v);
      if (pl.phase == Phase::Step && src && src->phase == Phase::Step && src->stage != pl.stage)
        return Status::error(
            nodeRef(n) + " in the optimizer step of stage " + std::to_string(pl.stage) + " reads %" +
            v->name() + " of stage " + std::to_string(src->stage) +
            " (e.g. a global gradient-norm clip): a pipelined step updates each stage alone");
    }
    return Status::ok();
  }

  Status checkOutputs() {
    for (size_t i = 0; i < p_.graph.signature.outputs.size(); ++i) {
      const ir::Value* v = p_.graph.signature.outputs[i].arg.value();
      if (!v) continue;
      const PipelinePlace* src = producerPlace(v);
      bool perMicrobatch =
          flags_[v].micro || (src && (src->phase == Phase::Forward || src->phase == Phase::Backward));
      if (perMicrobatch)
        return Status::error(
            "output %" + v->name() + " is a value of one microbatch (" +
            (src ? program::placeText(*src) : std::string("an input")) +
            "): a pipelined step returns only what is summed over the microbatches (the loss, " +
            "gradients, updated weights)");
    }
    return Status::ok();
  }

  const program::Program& p_;
  const ir::Graph& g_;
  const StageRequest& req_;
  std::unordered_map<const ir::Value*, Flags> flags_;
  std::unordered_map<const ir::Value*, int64_t> paramStage_;
  std::unordered_map<const ir::Value*, std::string> fqn_;
  std::unordered_set<const ir::Node*> accumulations_;
  std::unordered_set<const ir::Node*> shared_;  // values of parameters alone, made free
  std::vector<bool> keep_;                      // gradient-free backward nodes (Boundary.h)
  std::vector<PipelinePlace> places_;
};

}  // namespace

Expected<program::PipelinePlan> planPipeline(const program::Program& p, const StageRequest& req) {
  int64_t mbAxis = p.mesh.axisIndex(req.microbatchAxis);
  if (mbAxis < 0)
    return Status::error("pipeline: the mesh has no microbatch axis '" + req.microbatchAxis + "'");
  bool hasLoss = std::any_of(p.graph.signature.outputs.begin(), p.graph.signature.outputs.end(),
                             [](const auto& o) { return o.kind == ir::OutputKind::LossOutput; });
  if (!hasLoss)
    return Status::error(
        "pipeline: the program has no loss output; a pipeline schedules train steps (export with --train)");
  if (!p.graph.ranges.empty())
    return Status::error("pipeline: the program has symbolic sizes (" + p.graph.ranges.begin()->first +
                         "); export it with static shapes to pipeline it");
  SPMD_ASSIGN_OR_RETURN(std::vector<int64_t> paramStages, parameterStages(p.graph, req));
  program::PipelinePlan plan;
  plan.axis = req.axis;
  plan.stages = req.stages;
  plan.virtualStages = req.virtualStages;
  plan.microbatchAxis = req.microbatchAxis;
  plan.schedule = req.schedule;
  SPMD_ASSIGN_OR_RETURN(plan.places, Placer(p, req, std::move(paramStages)).run());
  SPMD_ASSIGN_OR_RETURN(plan.actions,
                        scheduleActions(req.schedule, req.stages, p.mesh.size(mbAxis), req.virtualStages));
  return plan;
}

}  // namespace spmd::pipeline
