// runRank / runThreaded (see Worker.h).
#include "runtime/Worker.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "runtime/BuildInfo.h"
#include "runtime/Checkpoint.h"
#include "runtime/CollectiveOps.h"
#include "runtime/CudaGraph.h"
#include "runtime/Dcp.h"
#include "runtime/GatherPool.h"
#include "runtime/GraphStep.h"
#include "runtime/MemoryMeter.h"
#include "runtime/PipelineRun.h"
#include "runtime/Runner.h"
#include "runtime/TypeMap.h"
#include "runtime/Weights.h"
#include "sharding/SymbolicShard.h"
#include "support/FirstLine.h"
#include "support/Strings.h"

namespace spmd::runtime {
namespace {

using sharding::Placement;
using sharding::ShardingSpec;

// Calls `f(i, byIndexName, signatureName, tensor-or-null)` for each user input.
template <typename F>
void forEachUserInput(const program::Program& p, const TensorMap& inputs, F f) {
  size_t user = 0;
  for (size_t i = 0; i < p.graph.signature.inputs.size(); ++i) {
    const ir::InputSpec& in = p.graph.signature.inputs[i];
    if (in.kind != ir::InputKind::UserInput) continue;
    std::string byIndex = "input." + std::to_string(user++);
    auto it = inputs.find(byIndex);
    if (it == inputs.end()) it = inputs.find(in.name);
    f(i, byIndex, in.name, it == inputs.end() ? nullptr : &it->second);
  }
}

}  // namespace

Expected<TensorMap> shardInputs(const program::Program& p, const TensorMap& inputs,
                                const std::vector<int64_t>& coords) {
  SPMD_RETURN_IF_ERROR(checkGlobalInputs(p, inputs));
  TensorMap out;
  forEachUserInput(p, inputs,
                   [&](size_t i, const std::string& byIndex, const std::string&, const at::Tensor* g) {
                     if (g) out.emplace(byIndex, shardOf(*g, p.inputs[i].spec, p.mesh, coords));
                   });
  return out;
}

namespace {

// The exported program's symbols that the global user inputs bind (their
// plain-symbol dims): spmd.global_symbol's values for one step.
std::unordered_map<std::string, int64_t> globalSymbols(const program::Program& p, const TensorMap& inputs) {
  std::unordered_map<std::string, int64_t> out;
  forEachUserInput(p, inputs, [&](size_t i, const std::string&, const std::string&, const at::Tensor* g) {
    if (!g) return;
    const ir::TensorType& gt = p.inputs[i].globalType;
    for (int64_t d = 0; d < gt.rank() && d < g->dim(); ++d) {
      const ir::Dim& dim = gt.sizes[static_cast<size_t>(d)];
      if (!dim.isStatic() && dim.expr()->kind == ir::SymExpr::Kind::Symbol)
        out.emplace(dim.expr()->name, g->size(d));
    }
  });
  return out;
}

}  // namespace

at::Tensor toGlobal(at::Tensor t, const ShardingSpec& spec, const ir::TensorType& global, MeshComm& comm) {
  std::vector<int64_t> shape;  // symbolic dims at this step's values where the inputs bind them
  bool known = true;
  for (const auto& d : global.sizes) {
    const int64_t* bound =
        d.isStatic() || d.expr()->kind != ir::SymExpr::Kind::Symbol ? nullptr : comm.symbol(d.expr()->name);
    known = known && (d.isStatic() || bound);
    shape.push_back(bound ? *bound : d.value());
  }
  bool uneven = known && global.rank() == t.dim() && !spec.placements.empty() &&
                sharding::isUneven(shape, spec, comm.mesh()) &&
                sharding::checkShardable(shape, spec, comm.mesh()).isOk();
  for (int64_t a = static_cast<int64_t>(spec.placements.size()) - 1; a >= 0; --a) {
    const Placement& p = spec.placements[static_cast<size_t>(a)];
    if (comm.mesh().size(a) == 1 || p.isReplicate()) continue;
    int64_t size =
        uneven ? sharding::pieceBefore(shape, spec, comm.mesh(), comm.coords(), a)[static_cast<size_t>(p.dim)]
               : -1;
    t = p.isPartial() ? allReduceNow(comm, a, t, p.reduce)
                      : allGatherNow(comm, a, t, p.dim, p.splitFactor, size);
  }
  return t;
}

double medianStepSeconds(std::vector<double> s) {
  if (s.size() > 1) s.erase(s.begin());
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(s.size() / 2), s.end());
  return s[s.size() / 2];
}

Status checkGlobalInputs(const program::Program& p, const TensorMap& inputs) {
  std::vector<std::string> given, userNames;
  for (const auto& entry : inputs) given.push_back(entry.first);
  for (const ir::InputSpec& in : p.graph.signature.inputs)
    if (in.kind == ir::InputKind::UserInput) userNames.push_back(in.name);
  SPMD_RETURN_IF_ERROR(checkInputNames(given, userNames));
  Status st;
  forEachUserInput(
      p, inputs, [&](size_t i, const std::string& byIndex, const std::string& name, const at::Tensor* g) {
        if (!st.isOk()) return;
        const ir::TensorType& gt = p.inputs[i].globalType;
        if (!g) {
          st = Status::error("missing input '" + name + "' (" + byIndex + "), " + gt.str());
          return;
        }
        bool same = g->dim() == gt.rank();
        for (int64_t d = 0; same && d < gt.rank(); ++d) {
          const ir::Dim& want = gt.sizes[static_cast<size_t>(d)];
          same = !want.isStatic() || want.value() == g->size(d);
        }
        if (!same) {
          st = Status::error("input '" + name + "' has shape " + formatShape(g->sizes()) +
                             ", the program expects " + gt.str());
          return;
        }
        const ir::Value* local = p.graph.signature.inputs[i].value;
        std::optional<ir::ScalarType> dtype = fromC10ScalarType(g->scalar_type());
        if (local != nullptr && local->isTensor() && dtype != gt.dtype) {
          st = Status::error(
              "input '" + name + "' has dtype " +
              (dtype ? std::string(ir::scalarTypeName(*dtype)) : c10::toString(g->scalar_type())) +
              ", the program expects " + std::string(ir::scalarTypeName(gt.dtype)) + " (" + gt.str() + ")");
          return;
        }
        // Static dims split as torch.chunk, and so do symbolic ones whose
        // trace-time size did not divide; the program divides the others
        // evenly (s // n), so those must divide at run time.
        std::vector<int64_t> shape(g->sizes().begin(), g->sizes().end());
        const ShardingSpec& spec = p.inputs[i].spec;
        ShardingSpec symbolic = spec;
        for (Placement& q : symbolic.placements)
          if (q.isShard() &&
              (q.dim >= gt.rank() || !sharding::isEvenSymbolic(gt.sizes[static_cast<size_t>(q.dim)],
                                                               sharding::shardCount(spec, q.dim, p.mesh))))
            q = Placement::replicate();
        Status div = sharding::checkEvenlyDivisible(shape, symbolic, p.mesh);
        if (!div.isOk()) {
          st = Status::error("input '" + name + "' " + formatShape(g->sizes()) + ": " + div.message() +
                             " (this program splits that symbolic dim evenly because its trace-time size "
                             "divided; give sizes that divide, or export with a trace-time size that does "
                             "not divide, for a program that splits any size as torch.chunk does)");
          return;
        }
        div = sharding::checkShardable(shape, p.inputs[i].spec, p.mesh);
        if (!div.isOk()) st = div.withContext("input '" + name + "'");
      });
  return st;
}

at::Tensor shardOf(const at::Tensor& global, const ShardingSpec& spec, const sharding::Mesh& mesh,
                   const std::vector<int64_t>& coords) {
  // Axes split in mesh order, each the chunk the earlier ones left
  // (sharding::localChunks: torch.chunk sizes, nested; a strided shard
  // S(d, sf) holds sf runs of dim d).
  at::Tensor t = global;
  std::vector<int64_t> shape(global.sizes().begin(), global.sizes().end());
  std::vector<sharding::Chunk> chunks = sharding::localChunks(shape, spec, mesh, coords);
  for (size_t d = 0; d < chunks.size(); ++d) {
    const sharding::Chunk& c = chunks[d];
    if (c.offset == 0 && c.size == shape[d]) continue;
    auto dim = static_cast<int64_t>(d);
    if (c.blocks <= 1) {
      t = t.narrow(dim, c.offset, c.size);
      continue;
    }
    std::vector<at::Tensor> runs;
    for (int64_t b = 0; b < c.blocks; ++b)
      runs.push_back(t.narrow(dim, c.offset + b * c.blockStride, c.blockSize()));
    t = at::cat(runs, dim);
  }
  t = t.contiguous();
  for (size_t a = 0; a < spec.placements.size(); ++a) {
    const Placement& p = spec.placements[a];
    if (p.isPartial() && p.reduce == sharding::ReduceOp::Sum && coords[a] != 0) t = at::zeros_like(t);
  }
  return t.clone();
}

namespace {

// fn(rank) on one thread per rank, all joined: the results in rank order,
// or the first failing rank's error.
template <typename T, typename Fn>
Expected<std::vector<T>> onRankThreads(int64_t n, const Fn& fn) {
  std::vector<std::optional<Expected<T>>> made(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < n; ++r) threads.emplace_back([&, r] { made[static_cast<size_t>(r)] = fn(r); });
  for (auto& t : threads) t.join();
  std::vector<T> out;
  for (auto& m : made) {
    if (!m->hasValue()) return m->status();
    out.push_back(std::move(**m));
  }
  return out;
}

// runRank on `shared`'s groups when given (ThreadedWorld), else on groups
// it builds.
Expected<RankResult> runRankOn(const program::LoadedProgram& lp, int64_t rank,
                               const c10::intrusive_ptr<c10d::Store>& store, const TensorMap& inputs,
                               const RankOptions& options, MeshComm* shared) {
  const program::Program& p = lp.program();
  if (p.pipeline) return runPipelineRank(lp, rank, store, inputs, options);
  auto where = [&](const Status& s) { return s.withContext("rank " + std::to_string(rank)); };
  selectDevice(options.device);
  RankMemoryProbe memory(options.device);
  auto loadStart = std::chrono::steady_clock::now();
  SPMD_ASSIGN_OR_RETURN(TensorMap weights, loadRankWeights(lp, rank, options.device));
  double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
  int64_t firstStep = 0;
  if (!options.resume.empty()) {
    auto step = loadCheckpoint(options.resume, p, rank, weights);
    SPMD_RETURN_IF_ERROR(agreeOnResume(*store, rank, p.mesh.numRanks(), step.status()));
    firstStep = *step;
  }
  auto runner = ProgramRunner::create(p.graph, weights, {options.device});
  if (!runner) return where(runner.status());
  std::vector<int64_t> coords = p.mesh.coords(rank);
  std::vector<std::vector<c10::IValue>> batches;
  std::vector<std::unordered_map<std::string, int64_t>> symbols;  // per batch
  for (size_t b = 0; b <= options.moreBatches.size(); ++b) {
    const TensorMap& global = b == 0 ? inputs : options.moreBatches[b - 1];
    symbols.push_back(globalSymbols(p, global));
    auto local = shardInputs(p, global, coords);
    if (!local) return local.status();
    auto bound = runner->bindInputs(*local);
    if (!bound) return bound.status();
    batches.push_back(std::move(*bound));
  }
  std::unique_ptr<MeshComm> owned;
  MeshComm* comm = shared;
  if (comm) {
    comm->beginRun();
  } else {
    SPMD_ASSIGN_OR_RETURN(owned, MeshComm::create(store, p.mesh, rank, options.comm));
    comm = owned.get();
  }
  CollectiveScope scope(comm);
  // Outputs that update a weight in place after each step.
  std::vector<std::pair<std::string, at::Tensor>> updates;
  const std::vector<std::string> names = runner->outputNames();  // a copy: the runner goes before the outputs
  for (size_t i = 0; i < p.graph.signature.outputs.size() && i < names.size(); ++i) {
    const ir::OutputSpec& o = p.graph.signature.outputs[i];
    bool mutation = o.kind == ir::OutputKind::ParameterMutation || o.kind == ir::OutputKind::BufferMutation;
    if (mutation && weights.count(o.target)) updates.emplace_back(names[i], weights.at(o.target));
  }
  RankResult result;
  memory.markState();
  GraphStep step({options.cudaGraph, /*warmup=*/2,
                  graphPoolBytes(options.predictedPeakBytes, tensorBytes(weights)), options.device});
  Expected<TensorMap> outputs = Status::error("program did not run");
  int runs = std::max(options.repeat, 1) * std::max(options.steps, 1);
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    // Batches continue where the checkpoint left off (bit-exact resume).
    size_t batch = static_cast<size_t>(firstStep + i) % batches.size();
    comm->setSymbols(symbols[batch]);
    // The last step's outputs (new weights, gradients) go before this one runs.
    outputs = Status::error("program did not run");
    outputs = step.run(*runner, batches[batch], *comm);
    if (!outputs) return where(outputs.status());
    for (auto& [name, weight] : updates) {
      auto it = outputs->find(name);
      if (it != outputs->end()) weight.copy_(it->second);
    }
    auto loss = outputs->find("loss");
    double value = loss == outputs->end() ? std::nan("") : loss->second.to(at::kDouble).sum().item<double>();
    synchronizeDevice(options.device);  // a GPU step ends when its kernels do
    SPMD_RETURN_IF_ERROR(where(comm->failed()));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (loss != outputs->end()) result.losses.push_back(value);
    if (options.onStep) options.onStep(firstStep + i, value, seconds.back());
    if (options.savesAfter(i, runs))
      SPMD_RETURN_IF_ERROR(where(saveAfterStep(options, p, rank, weights, firstStep + i + 1, *store)));
  }
  result.stepSeconds = medianStepSeconds(seconds);
  result.loadSeconds = loadSeconds;
  result.memory = memory.figures();  // before gathering outputs
  // The weights are not read again: rank 0 gathers the whole outputs (a
  // billion-parameter model's gradients) in the room they held, and every
  // rank hands their pages (and each output shard's once sent) back to the
  // system: the 1.1 B mixed step at tp 4 held 3 GB per idle rank beside rank
  // 0's 4.4 GB of gathered gradients.
  updates.clear();
  runner = Status::error("released after the last step");
  weights.clear();
  releaseCachedGatherBlocks();
  try {
    for (size_t i = 0; i < names.size() && i < p.outputs.size(); ++i) {
      if (names[i].empty()) continue;
      auto it = outputs->find(names[i]);
      if (it == outputs->end()) continue;
      at::Tensor g = toGlobal(it->second, p.outputs[i].spec, p.outputs[i].globalType, *comm);
      outputs->erase(it);  // its shard: rank 0 then holds the whole outputs, not the shards beside them
      if (rank == 0) result.outputs.emplace(names[i], g.cpu());
      g = at::Tensor();
      releaseCachedGatherBlocks();
    }
    synchronizeDevice(options.device);
    SPMD_RETURN_IF_ERROR(where(comm->failed()));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("rank " + std::to_string(rank) + ": gathering outputs failed: " + firstLine(what));
  }
  result.stats = comm->stats();
  return result;
}

}  // namespace

Expected<RankResult> runRank(const program::LoadedProgram& lp, int64_t rank,
                             const c10::intrusive_ptr<c10d::Store>& store, const TensorMap& inputs,
                             const RankOptions& options) {
  return runRankOn(lp, rank, store, inputs, options, nullptr);
}

Expected<std::unique_ptr<ThreadedWorld>> ThreadedWorld::create(const sharding::Mesh& mesh,
                                                               const CommOptions& options) {
  auto world = std::unique_ptr<ThreadedWorld>(new ThreadedWorld());
  world->mesh_ = mesh;
  world->store_ = c10::make_intrusive<c10d::HashStore>();
  SPMD_ASSIGN_OR_RETURN(world->comms_,
                        onRankThreads<std::unique_ptr<MeshComm>>(mesh.numRanks(), [&](int64_t r) {
                          return MeshComm::create(world->store_, mesh, r, options);
                        }));
  return world;
}

Status saveAfterStep(const RankOptions& o, const program::Program& p, int64_t rank, const TensorMap& weights,
                     int64_t step, c10d::Store& store, const StageSave* stages) {
  if (!o.saveDcp) return saveCheckpoint(o.save, p, rank, weights, step, store, o.keep, stages);
  if (o.saveEvery > 0)
    return saveDcpStep(o.save, p, rank, weights, step, store, o.keep, {o.dcpFormat, stages});
  return saveDcpCheckpoint(o.save, p, rank, weights, step, store, {o.dcpFormat, stages});
}

Expected<std::vector<RankResult>> runThreadedRanks(const program::LoadedProgram& program,
                                                   const TensorMap& inputs, const RankOptions& options,
                                                   ThreadedWorld* world) {
  const program::Program& p = program.program();
  int64_t n = program::worldSize(p);
  // Saves and resumes agree through store keys a reused store already holds.
  bool shared = world && world->usable() && !p.pipeline && p.mesh == world->mesh() &&
                options.resume.empty() && options.save.empty() && !options.comm.nccl;
  c10::intrusive_ptr<c10d::Store> store =
      shared ? world->store_ : c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::HashStore>());
  auto out = onRankThreads<RankResult>(n, [&](int64_t r) {
    MeshComm* comm = shared ? world->comms_[static_cast<size_t>(r)].get() : nullptr;
    return runRankOn(program, r, store, inputs, options, comm);
  });
  if (!out && shared) world->usable_ = false;
  return out;
}

Expected<RankResult> runThreaded(const program::LoadedProgram& program, const TensorMap& inputs,
                                 const RankOptions& options, ThreadedWorld* world) {
  SPMD_ASSIGN_OR_RETURN(std::vector<RankResult> ranks, runThreadedRanks(program, inputs, options, world));
  return std::move(ranks[0]);
}

}  // namespace spmd::runtime
