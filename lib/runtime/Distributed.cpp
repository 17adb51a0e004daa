// The launcher and worker sides of spmd-run's distributed mode (see
// Distributed.h).
#include "runtime/Distributed.h"

#include "pipeline/Verify.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launch/Launcher.h"
#include "launch/Ports.h"
#include "launch/WorkerEnv.h"
#include "runtime/BuildInfo.h"
#include "runtime/Checkpoint.h"
#include "runtime/CudaGraph.h"
#include "runtime/Dcp.h"
#include "runtime/GraphStep.h"
#include "runtime/LaunchSupport.h"
#include "runtime/Runner.h"
#include "runtime/Verify.h"
#include "runtime/Worker.h"
#include "support/File.h"
#include "support/Log.h"
#include "support/Strings.h"

namespace spmd::runtime {
namespace {

// Opens the loss log: fresh, or on --resume keeping the lines of steps
// before the checkpoint's (later ones came from a run that did not reach
// its next save; the resumed run writes them again).
Status openLossLog(const DistributedOptions& o, std::ofstream& log) {
  std::string kept;
  if (!o.resume.empty() && !isDcpCheckpoint(o.resume)) {  // a DCP resume keeps the whole log
    SPMD_ASSIGN_OR_RETURN(CheckpointIndex index, readCheckpointIndex(o.resume));
    std::ifstream in(o.lossLog);
    std::string line;
    while (std::getline(in, line)) {
      long long step = -1;
      if (std::sscanf(line.c_str(), "{\"step\": %lld", &step) == 1 && step >= 0 && step < index.step)
        kept += line + "\n";
    }
  }
  Status st = writeFileAtomic(o.lossLog, kept);
  if (!st.isOk()) return st;
  log.open(o.lossLog, std::ios::app);
  if (!log) return Status::error(o.lossLog + ": cannot write the loss log");
  return Status::ok();
}

// What one worker wrote to <stats-dir>/rank<r>: "bytes step state peak
// rss reserved load".
struct RankStats {
  int64_t rank = 0;
  int64_t bytesSent = 0;  // per execution
  double stepSeconds = 0;
  double loadSeconds = 0;
  RankMemory memory;
  std::vector<int64_t> expertTokens;  // MoE: tokens this rank routed to each expert, all steps
  int64_t moeBytes = 0;               // MoE all-to-alls, per execution
  int64_t moeTorchtitanBytes = 0;     // what torchtitan's ep would send, per execution
  int64_t ringScores = 0;             // ring-attention scores computed, per execution
};

// The statistics of this node's ranks (those whose file is readable).
std::vector<RankStats> readRankStats(const std::string& dir, const DistributedOptions& o) {
  std::vector<RankStats> out;
  for (int r = 0; r < o.nproc; ++r) {
    RankStats s;
    s.rank = static_cast<int64_t>(o.nodeRank) * o.nproc + r;
    std::ifstream f(dir + "/rank" + std::to_string(s.rank));
    RankMemory& m = s.memory;
    if (f >> s.bytesSent >> s.stepSeconds >> m.stateBytes >> m.peakBytes >> m.rssGrowthBytes >>
        m.reservedBytes >> s.loadSeconds) {
      size_t experts = 0;
      if (f >> s.moeBytes >> s.moeTorchtitanBytes >> experts) s.expertTokens.resize(experts);
      for (int64_t& t : s.expertTokens) f >> t;
      f >> s.ringScores;
      out.push_back(s);
    }
  }
  return out;
}

// "  memory per rank (max): state 1,024 B, peak 4,096 B (predicted 4,000 B,
// -2.3%), RSS growth 1,000,000 B" (the largest of this node's ranks).
std::string memoryLine(const std::vector<RankStats>& stats, int64_t predicted) {
  RankMemory most;
  for (const RankStats& s : stats) {
    most.stateBytes = std::max(most.stateBytes, s.memory.stateBytes);
    most.peakBytes = std::max(most.peakBytes, s.memory.peakBytes);
    most.rssGrowthBytes = std::max(most.rssGrowthBytes, s.memory.rssGrowthBytes);
    most.reservedBytes = std::max(most.reservedBytes, s.memory.reservedBytes);
  }
  std::string line = "  memory per rank (max): state " + withCommas(most.stateBytes) + " B, peak " +
                     withCommas(most.peakBytes) + " B";
  if (predicted > 0 && most.peakBytes > 0) {
    char diff[32];
    std::snprintf(
        diff, sizeof diff, "%+.1f%%",
        100.0 * static_cast<double>(predicted - most.peakBytes) / static_cast<double>(most.peakBytes));
    line += " (predicted " + withCommas(predicted) + " B, " + diff + ")";
  }
  if (most.reservedBytes > 0) line += ", reserved " + withCommas(most.reservedBytes) + " B";
  return line + ", RSS growth " + withCommas(most.rssGrowthBytes) + " B\n";
}

// "  moe: tokens per expert per step (all ranks, all MoE layers): [12, 0,
// 4, ...]" for a program with MoE experts; "" otherwise.
std::string expertTokensLine(const std::vector<RankStats>& stats, int64_t runs) {
  std::vector<int64_t> total;
  for (const RankStats& s : stats) {
    if (total.size() < s.expertTokens.size()) total.resize(s.expertTokens.size(), 0);
    for (size_t e = 0; e < s.expertTokens.size(); ++e) total[e] += s.expertTokens[e];
  }
  if (total.empty()) return "";
  int64_t bytes = 0, torchtitan = 0;
  for (const RankStats& s : stats) {
    bytes = std::max(bytes, s.moeBytes);
    torchtitan = std::max(torchtitan, s.moeTorchtitanBytes);
  }
  std::string line = "  moe: tokens per expert per step (all ranks, all MoE layers): [";
  for (size_t e = 0; e < total.size(); ++e) {
    char v[32];
    std::snprintf(v, sizeof v, "%s%g", e ? ", " : "",
                  static_cast<double>(total[e]) / static_cast<double>(runs));
    line += v;
  }
  line += "]\n";
  if (torchtitan > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f", static_cast<double>(bytes) / static_cast<double>(torchtitan));
    line += "  moe: all-to-all " + withCommas(bytes) + " B sent per rank per step (max); torchtitan's ep " +
            withCommas(torchtitan) + " B for the same routing (x" + ratio + ")\n";
  }
  return line;
}

// Writes --profile: {"format": 1, "program": <file name>, "mesh": [sizes],
// "ranks": [{"rank", "peak_bytes", "state_bytes", "rss_growth_bytes",
// ("reserved_bytes",) "step_ms", "load_ms", "bytes_sent"(, "ring_attention_scores")}]}
// (this node's ranks).
Status writeProfile(const DistributedOptions& o, const program::Program& p,
                    const std::vector<RankStats>& stats) {
  if (static_cast<int>(stats.size()) != o.nproc)
    return Status::error(o.profile + ": " + std::to_string(o.nproc - static_cast<int>(stats.size())) +
                         " worker(s) wrote no statistics; no profile written");
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["program"] = std::filesystem::path(o.program).filename().string();
  j["mesh"] = p.mesh.shape();
  j["ranks"] = nlohmann::ordered_json::array();
  for (const RankStats& s : stats) {
    nlohmann::ordered_json r = {{"rank", s.rank},
                                {"peak_bytes", s.memory.peakBytes},
                                {"state_bytes", s.memory.stateBytes},
                                {"rss_growth_bytes", s.memory.rssGrowthBytes}};
    if (s.memory.reservedBytes > 0) r["reserved_bytes"] = s.memory.reservedBytes;
    r["step_ms"] = s.stepSeconds * 1e3;
    r["load_ms"] = s.loadSeconds * 1e3;
    r["bytes_sent"] = s.bytesSent;
    if (s.ringScores > 0) r["ring_attention_scores"] = s.ringScores;
    j["ranks"].push_back(r);
  }
  return writeFileAtomic(o.profile, j.dump(2) + "\n");
}

// The launcher's check of --cuda-graph, before any worker starts: a bad
// value, or "on" where rank 0's device or the program rules it out.
Status checkCudaGraphRequest(const DistributedOptions& o, const program::Program& p) {
  SPMD_ASSIGN_OR_RETURN(CudaGraphMode mode, parseCudaGraphMode(o.cudaGraph));
  if (mode != CudaGraphMode::On) return Status::ok();
  SPMD_ASSIGN_OR_RETURN(c10::Device device, resolveDevice(o.device, 0));
  bool nccl = device.is_cuda() && ncclCompiled() && o.nproc <= static_cast<int>(at::getNumGPUs());
  GraphEligibility why = cudaGraphEligibility(p, {device.is_cuda(), nccl});
  SPMD_RETURN_IF_ERROR(resolveCudaGraph(mode, why, device.is_cuda()).status());
  return Status::ok();
}

// A worker's GPU settings: whether the step is captured as a CUDA
// graph (and the plan's peak that sizes its pool), and on NCCL the check
// that every async collective has its wait (CudaGraph.h's stream schedule,
// which c10d's NCCL groups run: each collective on NCCL's stream after an
// event on ours, our stream waiting on its end event at spmd.wait).
Status configureGpuStep(const DistributedOptions& o, const program::Program& p, RankOptions& ro) {
  SPMD_ASSIGN_OR_RETURN(CudaGraphMode mode, parseCudaGraphMode(o.cudaGraph));
  GraphEligibility why = cudaGraphEligibility(p, {ro.device.is_cuda(), ro.comm.nccl});
  if (why.eligible && !cudaGraphsCompiled()) why = {false, "this spmd-run was built without the NCCL path"};
  SPMD_ASSIGN_OR_RETURN(ro.cudaGraph, resolveCudaGraph(mode, why, ro.device.is_cuda()));
  ro.predictedPeakBytes = o.predictPeakBytes ? o.predictPeakBytes(p) : 0;
  if (ro.comm.nccl) {
    SPMD_ASSIGN_OR_RETURN(std::vector<StreamSlot> slots, deriveStreamSchedule(p.graph.graph));
    logging::debug("worker: ", slots.size(), " collectives on NCCL's stream, CUDA graph ",
                   ro.cudaGraph ? "on" : "off", why.eligible ? "" : " (" + why.reason + ")");
  }
  return Status::ok();
}

}  // namespace

Expected<std::vector<TensorMap>> readBatches(const std::string& path) {
  std::vector<TensorMap> out;
  if (!std::filesystem::is_directory(path)) {
    SPMD_ASSIGN_OR_RETURN(TensorMap t, readTensors(path));
    out.push_back(std::move(t));
    return out;
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(path))
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) return Status::error(path + ": the folder holds no .safetensors batches");
  for (const auto& f : files) {
    SPMD_ASSIGN_OR_RETURN(TensorMap t, readTensors(f));
    out.push_back(std::move(t));
  }
  return out;
}

int runDistributed(const DistributedOptions& o, std::ostream& out, std::ostream& err) {
  auto program = program::readProgram(o.program);
  if (!program) return fail(err, kBadInput, program.status().message());
  if (!o.weightsRoot.empty()) program->setWeightsRoot(o.weightsRoot);
  // Damaged weights are bad input, found before any worker starts (each
  // worker checks its own blobs again when it loads them).
  Status intact = program->verifyWeights();
  if (!intact.isOk()) return fail(err, kBadInput, intact.message());
  const program::Program& p = program->program();
  if (Status plan = pipeline::verifyPipeline(p); !plan.isOk())
    return fail(err, kBadInput, o.program + ": " + plan.message());
  int64_t ranks = program::worldSize(p);
  if (static_cast<int64_t>(o.nproc) * o.nnodes != ranks)
    return fail(err, kBadInput,
                o.program + ": the program's mesh " + p.mesh.str() +
                    (p.pipeline ? " in " + std::to_string(p.pipeline->stages) + " pipeline stages (axis " +
                                      p.pipeline->microbatchAxis + ": microbatches, not ranks)"
                                : std::string()) +
                    " needs " + std::to_string(ranks) + " ranks, but -n " + std::to_string(o.nproc) +
                    (o.nnodes > 1 ? " x --nnodes " + std::to_string(o.nnodes) : "") + " starts " +
                    std::to_string(o.nproc * o.nnodes) + "; pass -n " +
                    std::to_string(ranks / std::max(o.nnodes, 1)));
  if (!o.inputs.empty()) {
    auto batches = readBatches(o.inputs);
    if (!batches) return fail(err, kBadInput, batches.status().message());
    for (const auto& b : *batches) {
      Status st = checkGlobalInputs(p, b);
      if (!st.isOk()) return fail(err, kBadInput, o.inputs + ": " + st.message());
    }
  }
  if (!o.resume.empty()) {
    Status st = checkCheckpoint(o.resume, p);
    if (!st.isOk()) return fail(err, kBadInput, st.message());
  }
  if (Status st = checkCudaGraphRequest(o, p); !st.isOk()) return fail(err, kBadInput, st.message());
  if (o.nodeRank == 0)  // the node that verifies
    if (Status st = checkVerifyOptions(o, p.graph); !st.isOk()) return fail(err, kBadInput, st.message());
  ScratchDir scratch("spmd-run");
  const std::string& tmpDir = scratch.path;
  bool verifying = !o.verify.empty() || !o.verifyAgainst.empty();
  std::string output = o.output.empty() && verifying ? tmpDir + "/outputs.safetensors" : o.output;

  launch::LaunchConfig cfg = launchConfig(
      o, {"--worker", o.program, "--device", o.device, "--timeout", std::to_string(o.timeoutSeconds),
          "--repeat", std::to_string(o.repeat), "--stats-dir", tmpDir, "--steps", std::to_string(o.steps),
          "--save-every", std::to_string(o.saveEvery), "--keep", std::to_string(o.keep)});
  for (const auto& [flag, value] : {std::pair<const char*, std::string>{"--loss-log", o.lossLog},
                                    {o.saveDcp ? "--save-dcp" : "--save", o.save},
                                    {"--resume", o.resume},
                                    {"--weights-root", o.weightsRoot},
                                    {"--dcp-format", o.dcpFormat == DcpFormat::HuggingFace ? "hf" : ""}})
    if (!value.empty()) cfg.workerArgv.insert(cfg.workerArgv.end(), {flag, value});
  if (!o.inputs.empty()) cfg.workerArgv.insert(cfg.workerArgv.end(), {"--inputs", o.inputs});
  if (!output.empty()) cfg.workerArgv.insert(cfg.workerArgv.end(), {"--output", output});
  if (!o.bindAddr.empty()) cfg.workerArgv.insert(cfg.workerArgv.end(), {"--bind-addr", o.bindAddr});
  if (o.quiet) cfg.workerArgv.emplace_back("--quiet");
  cfg.workerArgv.insert(cfg.workerArgv.end(), {"--cuda-graph", o.cudaGraph});
  if (o.allowTf32) cfg.workerArgv.emplace_back("--allow-tf32");
  for (const std::string& lib : o.opLibraries)
    cfg.workerArgv.insert(cfg.workerArgv.end(), {"--load-library", lib});
  auto result = launch::launchWorkers(cfg, out, err);
  if (int code = launchFailure(result, err)) return code;

  int64_t maxBytes = 0;
  double maxStep = 0, maxLoad = 0;
  std::vector<RankStats> stats = readRankStats(tmpDir, o);
  for (const RankStats& s : stats) {
    maxBytes = std::max(maxBytes, s.bytesSent);
    maxStep = std::max(maxStep, s.stepSeconds);
    maxLoad = std::max(maxLoad, s.loadSeconds);
  }
  if (!o.profile.empty()) {
    Status st = writeProfile(o, p, stats);
    if (!st.isOk()) return fail(err, kFailure, st.message());
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "spmd-run: %lld ranks, %.2f s wall, weights loaded in %.2f s, step %.2f ms, %s B sent per "
                "rank per step (max)\n",
                static_cast<long long>(ranks), result->wallSeconds, maxLoad, maxStep * 1e3,
                withCommas(maxBytes).c_str());
  if (!o.quiet) out << line;
  if (!o.quiet && !stats.empty()) out << memoryLine(stats, o.predictPeakBytes ? o.predictPeakBytes(p) : 0);
  if (!o.quiet)
    out << expertTokensLine(stats, static_cast<int64_t>(std::max(o.steps, 1)) * std::max(o.repeat, 1));
  if (!verifying || o.nodeRank != 0) return 0;
  return verifyOutputs(o, output, out, err);
}

// Where this worker's Gloo transport listens: the interface named by
// GLOO_SOCKET_IFNAME, else --bind-addr, else the address this machine
// reaches MASTER_ADDR from (127.0.0.1 on one node; the node's own address
// when the master is on another machine, so that peers can connect back).
Status chooseBindAddress(const DistributedOptions& o, const std::string& masterAddr, CommOptions& comm) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    comm.interface = ifname;
    return Status::ok();
  }
  if (!o.bindAddr.empty()) {
    comm.hostname = o.bindAddr;
    return Status::ok();
  }
  SPMD_ASSIGN_OR_RETURN(comm.hostname, launch::localAddressFor(masterAddr));
  return Status::ok();
}

int runWorker(const DistributedOptions& o, std::ostream& err) {
  auto env = launch::workerEnvFromEnvironment();
  if (!env) return fail(err, kBadInput, env.status().message());
  launch::tagLogWithRank(env->rank);
  std::string who = "rank " + std::to_string(env->rank);
  auto program = program::readProgram(o.program);
  if (!program) return fail(err, kBadInput, program.status().message());
  if (!o.weightsRoot.empty()) program->setWeightsRoot(o.weightsRoot);
  if (program::worldSize(program->program()) != env->worldSize)
    return fail(err, kBadInput,
                who + ": the program's mesh needs " + std::to_string(program::worldSize(program->program())) +
                    " ranks, WORLD_SIZE is " + std::to_string(env->worldSize));
  std::vector<TensorMap> batches(1);
  if (!o.inputs.empty()) {
    auto read = readBatches(o.inputs);
    if (!read) return fail(err, kBadInput, read.status().message());
    batches = std::move(*read);
  }
  RankOptions ro;
  ro.repeat = o.repeat;
  ro.steps = o.steps;
  ro.save = o.save;
  ro.saveDcp = o.saveDcp;
  ro.dcpFormat = o.dcpFormat;
  ro.resume = o.resume;
  ro.moreBatches.assign(batches.begin() + 1, batches.end());
  ro.saveEvery = o.saveEvery;
  ro.keep = o.keep;
  std::ofstream lossLog;
  if (env->rank == 0 && !o.lossLog.empty()) {
    Status st = openLossLog(o, lossLog);
    if (!st.isOk()) return fail(err, kBadInput, who + ": " + st.message());
    ro.onStep = [&lossLog](int64_t step, double loss, double seconds) {
      char value[32] = "null";  // NaN and Inf are not JSON
      if (std::isfinite(loss)) std::snprintf(value, sizeof value, "%.9g", loss);
      char line[160];
      std::snprintf(line, sizeof line, "{\"step\": %lld, \"loss\": %s, \"step_ms\": %.3f}\n",
                    static_cast<long long>(step), value, seconds * 1e3);
      lossLog << line << std::flush;
    };
  }
  ro.comm.timeout = std::chrono::seconds(o.timeoutSeconds);
  Status bound = chooseBindAddress(o, env->masterAddr, ro.comm);
  if (!bound.isOk()) return fail(err, kBadInput, who + ": " + bound.message());
  auto device = resolveDevice(o.device, env->localRank);
  if (!device) return fail(err, kBadInput, who + ": " + device.status().message());
  ro.device = *device;
  // The GPU is chosen before the store and any group exist. NCCL needs a GPU
  // per rank; several ranks on one GPU talk over Gloo with CUDA tensors.
  selectDevice(ro.device);
  ro.comm.nccl =
      ro.device.is_cuda() && ncclCompiled() && env->localWorldSize <= static_cast<int64_t>(at::getNumGPUs());
  Status gpu = configureGpuStep(o, program->program(), ro);
  if (!gpu.isOk()) return fail(err, kBadInput, who + ": " + gpu.message());
  logging::debug("worker: ", o.program, " on ", ro.device.str(), " over ", ro.comm.nccl ? "NCCL" : "Gloo",
                 ", world size ", env->worldSize);
  auto opened = openRendezvousStore(*env, o.timeoutSeconds);
  if (!opened) return fail(err, kFailure, opened.status().message());
  c10::intrusive_ptr<c10d::Store> store = *opened;
  auto r = runRank(*program, env->rank, store, batches[0], ro);
  if (!r) {
    // runRank's errors usually carry the rank already.
    const std::string& m = r.status().message();
    return fail(err, kFailure, m.rfind(who + ": ", 0) == 0 ? m : who + ": " + m);
  }
  if (env->rank == 0 && !o.output.empty()) {
    Status st = writeTensors(o.output, r->outputs);
    if (!st.isOk()) return fail(err, kFailure, st.message());
  }
  if (!o.statsDir.empty()) {
    std::ofstream f(o.statsDir + "/rank" + std::to_string(env->rank));
    // Per execution: the counters add up over --steps and --repeat.
    int64_t runs = static_cast<int64_t>(std::max(o.steps, 1)) * std::max(o.repeat, 1);
    const RankMemory& m = r->memory;
    f << r->stats.bytesSent / runs << " " << r->stepSeconds << " " << m.stateBytes << " " << m.peakBytes
      << " " << m.rssGrowthBytes << " " << m.reservedBytes << " " << r->loadSeconds << "\n";
    f << r->stats.moeBytesSent / runs << " " << r->stats.moeTorchtitanBytes / runs << " "
      << r->stats.expertTokens.size();  // MoE: bytes per execution, tokens per expert over every step
    for (int64_t t : r->stats.expertTokens) f << " " << t;
    f << "\n" << r->stats.ringScores / runs << "\n";  // ring attention: scores per execution
  }
  finishRendezvous(*store, *env, o.timeoutSeconds);
  return 0;
}

}  // namespace spmd::runtime
