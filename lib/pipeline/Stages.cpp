// Stage cuts and node places (see Stages.h).
#include "pipeline/Stages.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <unordered_map>

#include "ir/Collectives.h"
#include "program/PipelineText.h"

namespace spmd::pipeline {
namespace {

using program::PipelinePlace;
using Phase = PipelinePlace::Phase;

// "model.layers.12.attn.wq.weight" -> ("model.layers", 12); -1 when no
// component after the first is a number.
std::pair<std::string, int64_t> layerOf(const std::string& fqn) {
  size_t start = 0;
  std::string prefix;
  while (start < fqn.size()) {
    size_t dot = fqn.find('.', start);
    std::string part = fqn.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (digits && !prefix.empty()) return {prefix, std::stoll(part)};
    prefix += (prefix.empty() ? "" : ".") + part;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return {"", -1};
}

// Boundaries that split the most repeated layer list into `stages` runs.
Expected<std::vector<std::string>> evenBoundaries(const ir::ExportedProgram& g, int64_t stages) {
  std::map<std::string, std::set<int64_t>> layers;
  for (const auto& in : g.signature.inputs)
    if (in.kind == ir::InputKind::Parameter) {
      auto [prefix, index] = layerOf(in.target);
      if (index >= 0) layers[prefix].insert(index);
    }
  const std::set<int64_t>* best = nullptr;
  std::string bestPrefix;
  for (const auto& [prefix, set] : layers)
    if (!best || set.size() > best->size()) best = &set, bestPrefix = prefix;
  int64_t count = best ? static_cast<int64_t>(best->size()) : 0;
  if (count < stages)
    return Status::error(
        "pipeline: " + std::to_string(stages) + " stages, but the model has " +
        (best ? std::to_string(count) + " layers under '" + bestPrefix + "'" : "no numbered layers") +
        ": give fewer stages, or the module boundaries as \"stages\": [\"fc2\", ...]");
  std::vector<int64_t> order(best->begin(), best->end());
  std::vector<std::string> out;
  int64_t begin = 0;
  for (int64_t s = 0; s + 1 < stages; ++s) {
    begin += count / stages + (s < count % stages ? 1 : 0);
    out.push_back(bestPrefix + "." + std::to_string(order[static_cast<size_t>(begin)]));
  }
  return out;
}

bool under(const std::string& fqn, const std::string& module) {
  return fqn == module || (fqn.size() > module.size() && fqn.compare(0, module.size(), module) == 0 &&
                           fqn[module.size()] == '.');
}

}  // namespace

Expected<std::vector<int64_t>> parameterStages(const ir::ExportedProgram& g, const StageRequest& req) {
  std::vector<std::string> cuts = req.boundaries;
  if (cuts.empty()) {
    SPMD_ASSIGN_OR_RETURN(cuts, evenBoundaries(g, req.chunks()));
  }
  if (static_cast<int64_t>(cuts.size()) != req.chunks() - 1)
    return Status::error(
        "pipeline: " + std::to_string(cuts.size()) + " module boundaries make " +
        std::to_string(cuts.size() + 1) + " stages, but the mesh's '" + req.axis + "' axis has " +
        std::to_string(req.stages) +
        (req.virtualStages > 1 ? " ranks of " + std::to_string(req.virtualStages) + " virtual stages" : "") +
        ": give one boundary fewer than the stages");
  std::unordered_map<const ir::Value*, int> firstUse;
  for (const auto& n : g.graph.nodes())
    for (const ir::Value* v : n->inputValues()) firstUse.try_emplace(v, n->index());
  auto useOf = [&](const ir::InputSpec& in) {
    auto it = in.value ? firstUse.find(in.value) : firstUse.end();
    return it == firstUse.end() ? INT_MAX : it->second;
  };
  std::vector<int> cutAt;
  for (const auto& cut : cuts) {
    int at = INT_MAX;
    for (const auto& in : g.signature.inputs)
      if (in.kind == ir::InputKind::Parameter && under(in.target, cut)) at = std::min(at, useOf(in));
    if (at == INT_MAX)
      return Status::error("pipeline: stage boundary '" + cut + "': no parameter of the model is under it " +
                           "(name a module, e.g. \"model.layers.4\")");
    if (!cutAt.empty() && at <= cutAt.back())
      return Status::error("pipeline: stage boundary '" + cut + "' comes before the one ahead of it in the " +
                           "model's order: list the boundaries in the order the forward uses them");
    cutAt.push_back(at);
  }
  std::vector<int64_t> stages(g.signature.inputs.size(), -1);
  for (size_t i = 0; i < stages.size(); ++i) {
    const ir::InputSpec& in = g.signature.inputs[i];
    if (in.kind != ir::InputKind::Parameter) continue;
    int use = useOf(in);
    stages[i] = std::count_if(cutAt.begin(), cutAt.end(), [&](int at) { return at <= use; });
    if (use == INT_MAX) stages[i] = 0;
  }
  return stages;
}

namespace {

using Actions = std::vector<std::vector<program::PipelineAction>>;
using Kind = program::PipelineAction::Kind;

// The microbatches per round of PyTorch's interleaved schedules: rounds of
// m / r with r = max(1, m / stages); a count m not a multiple of r is refused.
Expected<int64_t> microbatchesPerRound(const std::string& schedule, const std::string& torchName,
                                       int64_t stages, int64_t microbatches) {
  int64_t rounds = std::max<int64_t>(1, microbatches / stages);
  int64_t perRound = microbatches / rounds;
  if (microbatches % rounds != 0)
    return Status::error("pipeline: " + schedule + " runs the microbatches in rounds of " +
                         std::to_string(perRound) + " (" + std::to_string(rounds) + " rounds for " +
                         std::to_string(stages) + " ranks), so " + std::to_string(microbatches) +
                         " microbatches do not fit (PyTorch's " + torchName + " refuses them too): give " +
                         "a multiple of " + std::to_string(rounds) + " microbatches");
  return perRound;
}

// The two interleaved schedules, which differ only in their warm-up and in
// how the backward runs.
struct Interleaving {
  const char* name;       ///< the schema's "schedule"
  const char* torchName;  ///< PyTorch's class
  /// Warm-up forwards per hop from the last rank: 2 for 1F1B (a forward
  /// and its backward's way back), 1 for zero bubble.
  int64_t warmupPerHop;
  /// Zero bubble: the backward split into I and W (else one B).
  bool splitBackward;
};

const Interleaving kInterleaved1F1B{"interleaved-1f1b", "ScheduleInterleaved1F1B", 2, false};
const Interleaving kInterleavedZeroBubble{"zero-bubble", "ScheduleInterleavedZeroBubble", 1, true};

// PyTorch's interleaved schedules (schedules.py: _get_warmup_ops and
// _get_1f1b_rank_ops, whose None idle slots are left out), one loop for
// both: rank r runs `warmup` forwards, then pairs of a forward and a
// backward, then the remaining backwards; the virtual stage of the k-th
// forward advances every `perRound` microbatches, the backwards' runs the
// other way.
//   ScheduleInterleaved1F1B: (v - 1) perRound + 2 (pp - 1 - r) warm-up
//     forwards, whole backwards (B).
//   ScheduleInterleavedZeroBubble (ZB1P; one stage per rank: ZB-H1): one
//     warm-up forward per hop, each backward split into I (input gradients,
//     sent back at once) and W (weight gradients); rank r runs its W
//     actions r backwards late, in the order of its I actions, and the rest
//     at the end, where the bubble was.
Expected<Actions> interleavedActions(const Interleaving& kind, int64_t stages, int64_t microbatches,
                                     int64_t virtualStages) {
  SPMD_ASSIGN_OR_RETURN(int64_t perRound,
                        microbatchesPerRound(kind.name, kind.torchName, stages, microbatches));
  Actions out(static_cast<size_t>(stages));
  int64_t total = virtualStages * microbatches;
  for (int64_t r = 0; r < stages; ++r) {
    int64_t warmup = std::min((virtualStages - 1) * perRound + kind.warmupPerHop * (stages - 1 - r), total);
    auto fwdStage = [&](int64_t op) { return ((op / perRound) % virtualStages) * stages + r; };
    auto bwdStage = [&](int64_t op) {
      return (virtualStages - 1 - ((op - warmup) / perRound) % virtualStages) * stages + r;
    };
    std::map<int64_t, int64_t> nextF, nextB, nextW;
    std::vector<int64_t> pendingW;  // the stages of I actions whose W has not run, oldest first
    size_t weights = 0;
    auto& list = out[static_cast<size_t>(r)];
    auto weight = [&] {
      int64_t c = pendingW[weights++];
      list.push_back({Kind::Weight, nextW[c]++, c});
    };
    for (int64_t op = 0; op < total + warmup; ++op) {
      if (op < total) {
        int64_t c = fwdStage(op);
        list.push_back({Kind::Forward, nextF[c]++, c});
      }
      if (op < warmup) continue;
      int64_t c = bwdStage(op);
      list.push_back({kind.splitBackward ? Kind::Input : Kind::Backward, nextB[c]++, c});
      if (!kind.splitBackward) continue;
      pendingW.push_back(c);
      if (op - warmup >= r) weight();
    }
    while (weights < pendingW.size()) weight();
  }
  return out;
}

}  // namespace

Expected<std::vector<std::vector<program::PipelineAction>>> scheduleActions(const std::string& schedule,
                                                                            int64_t stages,
                                                                            int64_t microbatches,
                                                                            int64_t virtualStages) {
  if (schedule == "interleaved-1f1b")
    return interleavedActions(kInterleaved1F1B, stages, microbatches, virtualStages);
  if (schedule == "zero-bubble") {
    SPMD_ASSIGN_OR_RETURN(Actions out,
                          interleavedActions(kInterleavedZeroBubble, stages, microbatches, virtualStages));
    if (virtualStages == 1)  // one stage per rank: actions name no stage ("I0")
      for (auto& list : out)
        for (auto& a : list) a.stage = -1;
    return out;
  }
  if (virtualStages != 1)
    return Status::error("pipeline: \"virtual_stages\": " + std::to_string(virtualStages) +
                         " needs \"schedule\": " + "\"interleaved-1f1b\" or \"zero-bubble\" (" + schedule +
                         " runs one stage per rank)");
  std::vector<std::vector<program::PipelineAction>> out(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) {
    auto& list = out[static_cast<size_t>(s)];
    if (schedule == "gpipe") {
      for (int64_t i = 0; i < microbatches; ++i) list.push_back({Kind::Forward, i});
      for (int64_t i = 0; i < microbatches; ++i) list.push_back({Kind::Backward, i});
    } else if (schedule == "1f1b") {
      // Warm-up forwards fill the pipe; then one forward, one backward.
      int64_t warm = std::min(stages - s - 1, microbatches);
      for (int64_t i = 0; i < warm; ++i) list.push_back({Kind::Forward, i});
      for (int64_t i = warm; i < microbatches; ++i) {
        list.push_back({Kind::Forward, i});
        list.push_back({Kind::Backward, i - warm});
      }
      for (int64_t i = microbatches - warm; i < microbatches; ++i) list.push_back({Kind::Backward, i});
    } else {
      return Status::error("pipeline: schedule '" + schedule +
                           "' is not one of gpipe, 1f1b, interleaved-1f1b, zero-bubble");
    }
  }
  return out;
}

}  // namespace spmd::pipeline
