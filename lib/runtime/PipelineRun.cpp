// runPipelineRank (see PipelineRun.h).
#include "runtime/PipelineRun.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/Collectives.h"
#include "pipeline/StageGraphs.h"
#include "pipeline/Verify.h"
#include "program/PipelineText.h"
#include "runtime/BuildInfo.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/MemoryMeter.h"
#include "runtime/Runner.h"
#include "runtime/TypeMap.h"
#include "runtime/Weights.h"
#include "support/FirstLine.h"

namespace spmd::runtime {
namespace {

using program::PipelineAction;
using program::PipelinePlace;
using Phase = PipelinePlace::Phase;
using Values = std::unordered_map<std::string, at::Tensor>;

// Where a subgraph input comes from.
struct Source {
  enum class From : uint8_t { Weight, User, Prologue, Stash, Recv, Accum } from = From::Weight;
  std::string key;     // weight FQN, "input.<i>", or the value's name
  int64_t stage = -1;  // Recv: the sending stage
  int64_t tag = 0;     // Recv: the transfer's index
};

// Where a subgraph output goes.
struct Use {
  std::vector<std::pair<int64_t, int64_t>> sends;  // (stage, transfer index)
  bool stash = false;
  std::string accum;  // the accumulation's value name, or empty
  bool avg = false;
};

struct Part {
  std::optional<Executor> exec;
  std::vector<Source> inputs;
  std::vector<Use> outputs;
  std::vector<std::string> outputNames;
  const ir::Graph* graph = nullptr;
};

// Values one virtual stage hands another on the same rank (interleaved
// schedules), by tag: what a send and a receive would carry.
using Mailbox = std::map<int64_t, at::Tensor>;

// One (virtual) stage of this rank: its subgraphs, and where their inputs
// come from and outputs go.
class StageRunner {
 public:
  StageRunner(const program::Program& p, MeshComm& comm, TensorMap& weights, c10::Device device,
              int64_t stage, Mailbox& local)
      : p_(p), comm_(comm), weights_(weights), device_(device), stage_(stage), local_(local) {
    microbatches_ = p.mesh.size(p.mesh.axisIndex(p.pipeline->microbatchAxis));
    auto transfers = pipeline::stageTransfers(p);
    for (size_t k = 0; k < transfers.size(); ++k) transferIndex_[{transfers[k].value, transfers[k].to}] = k;
    tagBase_ = static_cast<int64_t>(transfers.size()) * microbatches_;
  }

  Status prepare() {
    SPMD_ASSIGN_OR_RETURN(graphs_, pipeline::stageGraphs(p_, stage_));
    SPMD_RETURN_IF_ERROR(preparePart(graphs_.forward, Phase::Forward, forward_));
    if (pipeline::splitsBackward(*p_.pipeline)) {
      // I first: W reads what I received from its stash.
      SPMD_RETURN_IF_ERROR(preparePart(graphs_.backwardInput, Phase::Backward, backwardInput_));
      weightPart_ = true;
      SPMD_RETURN_IF_ERROR(preparePart(graphs_.backwardWeight, Phase::Backward, backwardWeight_));
      weightPart_ = false;
    } else {
      SPMD_RETURN_IF_ERROR(preparePart(graphs_.backward, Phase::Backward, backward_));
    }
    SPMD_RETURN_IF_ERROR(preparePart(graphs_.step, Phase::Step, step_));
    prologue_.resize(graphs_.prologue.size());
    for (size_t k = 0; k < graphs_.prologue.size(); ++k)
      SPMD_RETURN_IF_ERROR(preparePart(graphs_.prologue[k].first, Phase::Prologue, prologue_[k]));
    return Status::ok();
  }

  /// The prologue sums over every microbatch of `micro` (this rank's
  /// inputs per microbatch), by value name.
  Expected<Values> prologue(const std::vector<TensorMap>& micro) {
    Values prologue, accum;
    for (size_t k = 0; k < prologue_.size(); ++k) {
      const ir::Node& n = *graphs_.prologue[k].second;
      at::Tensor sum;
      for (int64_t i = 0; i < microbatches_; ++i) {
        Values none;
        SPMD_ASSIGN_OR_RETURN(std::vector<at::Tensor> out,
                              run(prologue_[k], i, micro, prologue, none, accum));
        sum = i == 0 ? out[0].clone() : sum.add_(out[0]);
      }
      const ir::Argument* op = n.input("op");
      if (op && !op->strings.empty() && op->strings[0] == "avg") sum.div_(microbatches_);
      prologue[n.outputValues()[0]->name()] = sum;
    }
    return prologue;
  }

  /// Runs action `a` (the forward, backward, or under zero-bubble the
  /// input- or weight-gradient half of the backward, of one microbatch),
  /// adding its gradients into `accum`.
  Status act(const PipelineAction& a, const std::vector<TensorMap>& micro, const Values& prologue,
             Values& accum) {
    if (stash_.empty()) stash_.resize(static_cast<size_t>(microbatches_));
    using Kind = PipelineAction::Kind;
    Part& part = a.kind == Kind::Forward  ? forward_
                 : a.kind == Kind::Input  ? backwardInput_
                 : a.kind == Kind::Weight ? backwardWeight_
                                          : backward_;
    auto& mine = stash_[static_cast<size_t>(a.microbatch)];
    auto out = run(part, a.microbatch, micro, prologue, mine, accum);
    if (!out)
      return out.status().withContext("stage " + std::to_string(stage_) + " " + program::actionText(a));
    for (size_t j = 0; j < out->size(); ++j)
      deliver(part.outputs[j], part.outputNames[j], (*out)[j], a, mine, accum);
    if (a.kind == Kind::Backward || a.kind == Kind::Weight) mine.clear();  // the microbatch is done
    return Status::ok();
  }

  /// The optimizer step once every action ran: averages this stage's
  /// accumulations that are means, runs the step; returns its outputs by
  /// value name.
  Expected<Values> finish(const std::vector<TensorMap>& micro, const Values& prologue, Values& accum) {
    for (auto& [name, t] : accum)
      if (avg_.count(name)) t.div_(microbatches_);
    comm_.setMicrobatch(0);
    Values none;
    SPMD_ASSIGN_OR_RETURN(std::vector<at::Tensor> out, run(step_, 0, micro, prologue, none, accum));
    Values result;
    for (size_t j = 0; j < out.size(); ++j) result[step_.outputNames[j]] = out[j];
    return result;
  }

 private:
  Status preparePart(const pipeline::Subgraph& g, Phase phase, Part& part) {
    ExecutorOptions eo;
    eo.device = device_;
    SPMD_ASSIGN_OR_RETURN(Executor ex, Executor::prepare(g.graph, eo));
    part.exec.emplace(std::move(ex));
    part.graph = &g.graph;
    for (const auto& name : g.inputs) {
      SPMD_ASSIGN_OR_RETURN(Source s, sourceOf(name, phase));
      part.inputs.push_back(std::move(s));
    }
    part.outputNames = g.outputs;
    for (const auto& name : g.outputs) part.outputs.push_back(useOf(name, phase));
    return Status::ok();
  }

  Expected<Source> sourceOf(const std::string& name, Phase phase) {
    const ir::Value* v = p_.graph.graph.findValue(name);
    using From = Source::From;
    if (!v->producer()) {
      size_t user = 0;
      for (const ir::InputSpec& in : p_.graph.signature.inputs) {
        if (in.value == v) {
          if (ir::isStored(in.kind)) return Source{From::Weight, in.target};
          if (in.kind == ir::InputKind::UserInput) return Source{From::User, "input." + std::to_string(user)};
        }
        user += in.kind == ir::InputKind::UserInput ? 1 : 0;
      }
      return Status::error("graph input %" + name + " cannot be fed to a pipeline stage");
    }
    const ir::Node& n = *v->producer();
    const PipelinePlace& at = p_.pipeline->places[static_cast<size_t>(n.index())];
    if (at.phase == Phase::Prologue) return Source{From::Prologue, name};
    if (pipeline::isAccumulation(p_, n)) return Source{From::Accum, name};
    // A forward value the backward reads: kept from this stage's forward,
    // or from its receipt there (a value crosses once per microbatch).
    if (at.stage == stage_ && at.phase == Phase::Forward && phase == Phase::Backward)
      return Source{From::Stash, name};
    // W reads the values I made, and those I received.
    if (at.stage == stage_ && at.phase == Phase::Backward && phase == Phase::Backward)
      return Source{From::Stash, name};
    if (weightPart_ && backwardReceived_.count(name)) {
      keepReceived_.insert(name);
      return Source{From::Stash, name};
    }
    if (phase == Phase::Backward && forwardReceived_.count(name)) {
      keepReceived_.insert(name);
      return Source{From::Stash, name};
    }
    auto it = transferIndex_.find({name, stage_});
    if (at.stage != stage_ && it != transferIndex_.end()) {
      if (phase == Phase::Forward) forwardReceived_.insert(name);
      if (phase == Phase::Backward) backwardReceived_.insert(name);
      return Source{From::Recv, name, at.stage, static_cast<int64_t>(it->second)};
    }
    return Status::error("node %" + n.name() + " (" + program::placeText(at) + ") cannot feed stage " +
                         std::to_string(stage_));
  }

  Use useOf(const std::string& name, Phase phase) {
    Use use;
    const ir::Value* v = p_.graph.graph.findValue(name);
    for (const ir::Node* u : v->users()) {
      const PipelinePlace& at = p_.pipeline->places[static_cast<size_t>(u->index())];
      if (pipeline::isAccumulation(p_, *u)) {
        use.accum = u->outputValues()[0]->name();
        const ir::Argument* op = u->input("op");
        if (op && !op->strings.empty() && op->strings[0] == "avg") avg_.insert(use.accum);
      } else if ((at.phase == Phase::Forward || at.phase == Phase::Backward) && at.stage != stage_) {
        auto it = transferIndex_.find({name, at.stage});
        bool seen = false;
        for (const auto& s : use.sends) seen |= s.first == at.stage;
        if (!seen && it != transferIndex_.end()) use.sends.emplace_back(at.stage, it->second);
      } else if ((phase == Phase::Forward || phase == Phase::Backward) && at.phase == Phase::Backward &&
                 at.stage == stage_) {
        use.stash = true;  // a forward value its backward reads, or an I value its W reads
      }
    }
    return use;
  }

  Expected<at::Tensor> input(const Source& s, int64_t mb, const std::vector<TensorMap>& micro,
                             const Values& prologue, const Values& stash, const Values& accum) {
    using From = Source::From;
    const Values* table = s.from == From::Prologue ? &prologue
                          : s.from == From::Stash  ? &stash
                          : s.from == From::Accum  ? &accum
                                                   : nullptr;
    if (table) {
      auto it = table->find(s.key);
      if (it == table->end()) return Status::error("value %" + s.key + " is not ready");
      return it->second;
    }
    if (s.from == From::Weight) return weights_.at(s.key);
    if (s.from == From::User) return micro[static_cast<size_t>(mb)].at(s.key).to(device_);
    const ir::TensorType& t = p_.graph.graph.findValue(s.key)->type();
    std::vector<int64_t> shape;
    for (const auto& d : t.sizes) shape.push_back(d.value());
    SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(t.dtype));
    int64_t tag = s.tag * microbatches_ + mb;
    int64_t from = p_.pipeline->rankOf(s.stage);
    if (from == comm_.stage()) {  // another virtual stage of this rank
      auto it = local_.find(tag);
      if (it == local_.end())
        return Status::error("value %" + s.key + " of stage " + std::to_string(s.stage) + " is not ready");
      at::Tensor t = std::move(it->second);
      local_.erase(it);
      return t;
    }
    std::vector<at::Tensor> buf = {at::empty(shape, at::TensorOptions().dtype(dtype).device(device_))};
    try {
      comm_.pipelineGroup().recv(buf, static_cast<int>(from), static_cast<int>(tag))->wait();
    } catch (const std::exception& e) {
      std::string what = e.what();
      return Status::error("receiving %" + s.key + " from stage " + std::to_string(s.stage) +
                           " failed: " + firstLine(what));
    }
    return buf[0];
  }

  Expected<std::vector<at::Tensor>> run(Part& part, int64_t mb, const std::vector<TensorMap>& micro,
                                        const Values& prologue, Values& stash, const Values& accum) {
    comm_.setMicrobatch(mb);
    std::vector<c10::IValue> in;
    for (const Source& s : part.inputs) {
      SPMD_ASSIGN_OR_RETURN(at::Tensor t, input(s, mb, micro, prologue, stash, accum));
      if (s.from == Source::From::Recv && keepReceived_.count(s.key)) stash[s.key] = t;
      in.emplace_back(std::move(t));
    }
    SPMD_ASSIGN_OR_RETURN(std::vector<c10::IValue> out, part.exec->run(std::move(in)));
    std::vector<at::Tensor> tensors;
    tensors.reserve(out.size());
    for (auto& v : out)
      tensors.push_back(v.isTensor() ? v.toTensor() : at::scalar_tensor(v.toInt(), at::kLong));
    return tensors;
  }

  void deliver(const Use& use, const std::string& name, const at::Tensor& t, const PipelineAction& a,
               Values& stash, Values& accum) {
    if (use.stash) stash[name] = t;
    if (!use.accum.empty()) {
      auto it = accum.find(use.accum);
      if (it == accum.end())
        accum[use.accum] = t.clone();
      else
        it->second.add_(t);
    }
    for (const auto& [to, k] : use.sends) {
      int64_t tag = static_cast<int64_t>(k) * microbatches_ + a.microbatch;
      int64_t rank = p_.pipeline->rankOf(to);
      if (rank == comm_.stage()) {
        local_[tag] = t;
        continue;
      }
      std::vector<at::Tensor> buf = {t.contiguous()};
      auto work = comm_.pipelineGroup().send(buf, static_cast<int>(rank), static_cast<int>(tag));
      sends_.emplace_back(std::move(work), std::move(buf));
    }
  }

 public:
  Status finishSends() {
    try {
      for (auto& [work, buf] : sends_) work->wait();
    } catch (const std::exception& e) {
      std::string what = e.what();
      sends_.clear();
      return Status::error("stage " + std::to_string(stage_) + ": a send failed: " + firstLine(what));
    }
    sends_.clear();
    return Status::ok();
  }

  const program::Program& p_;
  MeshComm& comm_;
  TensorMap& weights_;
  c10::Device device_;
  int64_t stage_ = 0;
  int64_t microbatches_ = 1;
  std::map<std::pair<std::string, int64_t>, size_t> transferIndex_;
  std::set<std::string> avg_;
  std::set<std::string> forwardReceived_, backwardReceived_, keepReceived_;
  bool weightPart_ = false;  // preparing the W half of a split backward
  pipeline::StageGraphs graphs_;
  Part forward_, backward_, backwardInput_, backwardWeight_, step_;
  std::vector<Part> prologue_;
  std::vector<Values> stash_;  // per microbatch
  Mailbox& local_;
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, std::vector<at::Tensor>>> sends_;

 public:
  int64_t tagBase_ = 0;
};

// This rank's virtual stages (one without an interleaved schedule), run in
// the order of its action list.
class RankRunner {
 public:
  RankRunner(const program::Program& p, MeshComm& comm, TensorMap& weights, c10::Device device) : p_(p) {
    const program::PipelinePlan& plan = *p.pipeline;
    for (int64_t c = comm.stage(); c < plan.chunks(); c += plan.stages)
      stages_.push_back(std::make_unique<StageRunner>(p, comm, weights, device, c, local_));
    rank_ = comm.stage();
    tagBase_ = stages_.front()->tagBase_;
  }

  Status prepare() {
    for (auto& s : stages_) SPMD_RETURN_IF_ERROR(s->prepare());
    return Status::ok();
  }

  /// One train step over `micro` (this rank's inputs per microbatch);
  /// returns the step's outputs this rank's stages compute, by value name.
  Expected<Values> step(const std::vector<TensorMap>& micro) {
    SPMD_ASSIGN_OR_RETURN(Values prologue, stages_.front()->prologue(micro));
    Values accum;
    local_.clear();
    for (const PipelineAction& a : p_.pipeline->actions[static_cast<size_t>(rank_)]) {
      int64_t c = p_.pipeline->stageOf(rank_, a);
      StageRunner& stage = *stages_[static_cast<size_t>(c / p_.pipeline->stages)];
      SPMD_RETURN_IF_ERROR(stage.act(a, micro, prologue, accum));
    }
    // Every stage's step before any update is applied (a step count the
    // stages share is read once, as before the step).
    Values result;
    for (auto& s : stages_) {
      SPMD_ASSIGN_OR_RETURN(Values out, s->finish(micro, prologue, accum));
      result.insert(out.begin(), out.end());
    }
    for (auto& s : stages_) SPMD_RETURN_IF_ERROR(s->finishSends());
    return result;
  }

  int64_t tagBase_ = 0;

 private:
  const program::Program& p_;
  int64_t rank_ = 0;
  Mailbox local_;
  std::vector<std::unique_ptr<StageRunner>> stages_;
};

// The pipeline rank whose step computes graph output `v` (free ones: 0).
int64_t ownerOf(const program::Program& p, const ir::Value* v) {
  if (!v || !v->producer()) return 0;
  const PipelinePlace& at = p.pipeline->places[static_cast<size_t>(v->producer()->index())];
  return at.stage < 0 ? 0 : p.pipeline->rankOf(at.stage);
}

}  // namespace

namespace {

// Rank 0 gets every output: the owning stage's ranks make it whole over
// their axes, its first rank sends it to rank 0 unless that is itself.
Status gatherOutputs(const program::Program& p, MeshComm& comm, const Values& mine,
                     const std::vector<std::string>& names, int64_t tagBase, RankResult& result) {
  bool first = std::all_of(comm.coords().begin(), comm.coords().end(), [](int64_t c) { return c == 0; });
  for (size_t i = 0; i < names.size() && i < p.outputs.size(); ++i) {
    const ir::Value* v = p.graph.signature.outputs[i].arg.value();
    if (names[i].empty() || !v || !v->isTensor()) continue;
    int64_t owner = ownerOf(p, v);
    int tag = static_cast<int>(tagBase + static_cast<int64_t>(i));
    if (owner == comm.stage()) {
      auto it = mine.find(v->name());
      if (it == mine.end())
        return Status::error("stage " + std::to_string(owner) + " did not compute output %" + v->name());
      at::Tensor g = toGlobal(it->second, p.outputs[i].spec, p.outputs[i].globalType, comm).contiguous();
      if (!first) continue;
      if (owner == 0) {
        result.outputs.emplace(names[i], g.cpu());
      } else {
        std::vector<at::Tensor> buf = {g};
        comm.pipelineGroup().send(buf, 0, tag)->wait();
      }
    } else if (comm.stage() == 0 && first) {
      std::vector<int64_t> shape;
      for (const auto& d : p.outputs[i].globalType.sizes) shape.push_back(d.value());
      SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(p.outputs[i].globalType.dtype));
      std::vector<at::Tensor> buf = {at::empty(
          shape, at::TensorOptions().dtype(dtype).device(mine.empty() ? c10::Device(c10::kCPU)
                                                                      : mine.begin()->second.device()))};
      comm.pipelineGroup().recv(buf, static_cast<int>(owner), tag)->wait();
      result.outputs.emplace(names[i], buf[0].cpu());
    }
  }
  return Status::ok();
}

// The loss of a step, sent by the stage computing it to rank 0 (which
// reports it); other ranks keep what they have (NaN off the loss's stage).
Expected<double> shareLoss(const program::Program& p, MeshComm& comm, double loss, int tag) {
  const ir::Value* v = nullptr;
  for (const auto& o : p.graph.signature.outputs)
    if (o.kind == ir::OutputKind::LossOutput && !v) v = o.arg.value();
  int64_t owner = v ? ownerOf(p, v) : 0;
  bool first = std::all_of(comm.coords().begin(), comm.coords().end(), [](int64_t c) { return c == 0; });
  if (owner == 0 || !first || (comm.stage() != owner && comm.stage() != 0)) return loss;
  std::vector<at::Tensor> buf = {at::scalar_tensor(loss, at::kDouble)};
  try {
    if (comm.stage() == owner)
      comm.pipelineGroup().send(buf, 0, tag)->wait();
    else
      comm.pipelineGroup().recv(buf, static_cast<int>(owner), tag)->wait();
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("sharing the loss failed: " + firstLine(what));
  }
  return buf[0].item<double>();
}

// A stage's part in checkpoints: the index's view of the program (the mesh
// without the pipeline), this rank in it, and the stages' weight owners.
struct StageCheckpoint {
  program::Program view;
  int64_t rank = 0;
  StageSave stages;

  static Expected<StageCheckpoint> create(const program::Program& p, const MeshComm& comm,
                                          const std::vector<std::set<std::string>>& perStage) {
    StageCheckpoint out;
    SPMD_ASSIGN_OR_RETURN(out.view, pipeline::checkpointView(p));
    out.rank = out.view.mesh.rankAt(comm.coords());
    out.stages = {p.pipeline->stages, comm.stage(), pipeline::weightOwners(perStage)};
    return out;
  }
};

// Each batch's user inputs as this rank holds them, per microbatch (the
// microbatch axis's coordinate).
Expected<std::vector<std::vector<TensorMap>>> microbatchInputs(const program::Program& p,
                                                               const MeshComm& comm, const TensorMap& inputs,
                                                               const std::vector<TensorMap>& more) {
  int64_t mbAxis = p.mesh.axisIndex(p.pipeline->microbatchAxis);
  std::vector<std::vector<TensorMap>> batches;
  for (size_t b = 0; b <= more.size(); ++b) {
    const TensorMap& global = b == 0 ? inputs : more[b - 1];
    batches.emplace_back();
    std::vector<int64_t> coords = comm.coords();
    for (int64_t i = 0; i < p.mesh.size(mbAxis); ++i) {
      coords[static_cast<size_t>(mbAxis)] = i;
      SPMD_ASSIGN_OR_RETURN(TensorMap local, shardInputs(p, global, coords));
      batches.back().push_back(std::move(local));
    }
  }
  return batches;
}

}  // namespace

Expected<RankResult> runPipelineRank(const program::LoadedProgram& lp, int64_t rank,
                                     const c10::intrusive_ptr<c10d::Store>& store, const TensorMap& inputs,
                                     const RankOptions& options) {
  const program::Program& p = lp.program();
  auto where = [&](const Status& s) { return s.withContext("rank " + std::to_string(rank)); };
  SPMD_RETURN_IF_ERROR(pipeline::verifyPipeline(p));
  selectDevice(options.device);
  RankMemoryProbe memory(options.device);
  SPMD_ASSIGN_OR_RETURN(auto comm, MeshComm::createPipelined(store, p.mesh, p.pipeline->microbatchAxis,
                                                             p.pipeline->stages, rank, options.comm));
  // Only the weights (and optimizer states) this rank's stage reads.
  auto perStage = pipeline::stageWeights(p);
  if (!perStage) return where(perStage.status());
  const std::set<std::string>& mine = (*perStage)[static_cast<size_t>(comm->stage())];
  auto loadStart = std::chrono::steady_clock::now();
  SPMD_ASSIGN_OR_RETURN(TensorMap weights,
                        loadRankWeights(lp, p.mesh.rankAt(comm->coords()), options.device, &mine));
  double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
  SPMD_ASSIGN_OR_RETURN(StageCheckpoint ckpt, StageCheckpoint::create(p, *comm, *perStage));
  int64_t firstStep = 0;
  if (!options.resume.empty()) {
    auto step = loadCheckpoint(options.resume, ckpt.view, ckpt.rank, weights);
    SPMD_RETURN_IF_ERROR(agreeOnResume(*store, rank, program::worldSize(p), step.status()));
    firstStep = *step;
  }
  RankRunner runner(p, *comm, weights, options.device);
  if (Status st = runner.prepare(); !st.isOk()) return where(st);
  SPMD_ASSIGN_OR_RETURN(auto batches, microbatchInputs(p, *comm, inputs, options.moreBatches));
  CollectiveScope scope(comm.get());
  SPMD_ASSIGN_OR_RETURN(std::vector<std::string> names, outputNames(p.graph));
  RankResult result;
  memory.markState();
  Values last;
  std::vector<double> seconds;
  int runs = std::max(options.repeat, 1) * std::max(options.steps, 1);
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    // Batches continue where the checkpoint left off (as runRank's).
    auto out = runner.step(batches[static_cast<size_t>(firstStep + i) % batches.size()]);
    if (!out) return where(out.status());
    SPMD_RETURN_IF_ERROR(where(comm->waitAll()));
    last = std::move(*out);
    // Updated weights replace the stage's own.
    double loss = std::nan("");
    for (size_t k = 0; k < p.graph.signature.outputs.size(); ++k) {
      const ir::OutputSpec& o = p.graph.signature.outputs[k];
      const ir::Value* v = o.arg.value();
      auto it = v ? last.find(v->name()) : last.end();
      if (it == last.end()) continue;
      bool mutation = o.kind == ir::OutputKind::ParameterMutation || o.kind == ir::OutputKind::BufferMutation;
      if (mutation && weights.count(o.target)) weights.at(o.target).copy_(it->second);
      if (o.kind == ir::OutputKind::LossOutput && std::isnan(loss))
        loss = it->second.to(at::kDouble).sum().item<double>();
    }
    SPMD_ASSIGN_OR_RETURN(loss, shareLoss(p, *comm, loss, static_cast<int>(runner.tagBase_ + 512)));
    synchronizeDevice(options.device);
    SPMD_RETURN_IF_ERROR(where(comm->failed()));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!std::isnan(loss)) result.losses.push_back(loss);
    if (options.onStep) options.onStep(firstStep + i, loss, seconds.back());
    if (options.savesAfter(i, runs))
      SPMD_RETURN_IF_ERROR(where(
          saveAfterStep(options, ckpt.view, ckpt.rank, weights, firstStep + i + 1, *store, &ckpt.stages)));
  }
  result.stepSeconds = medianStepSeconds(seconds);
  result.loadSeconds = loadSeconds;
  result.memory = memory.figures();
  try {
    SPMD_RETURN_IF_ERROR(where(gatherOutputs(p, *comm, last, names, runner.tagBase_ + 1024, result)));
    synchronizeDevice(options.device);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("rank " + std::to_string(rank) + ": gathering outputs failed: " + firstLine(what));
  }
  result.stats = comm->stats();
  return result;
}

}  // namespace spmd::runtime
