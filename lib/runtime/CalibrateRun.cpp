// The launcher and worker sides of spmd-run --calibrate (see Calibrate.h);
// the measurements are in Calibrate.cpp.
#include <ATen/Context.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/Launcher.h"
#include "launch/WorkerEnv.h"
#include "runtime/BuildInfo.h"
#include "runtime/Calibrate.h"
#include "runtime/LaunchSupport.h"
#include "support/File.h"

namespace spmd::runtime {

namespace {

// The mesh of --mesh/--axes, or one axis over all `ranks`; error when its
// rank count is not `ranks` or it has no axis of 2 or more ranks.
Expected<sharding::Mesh> calibrationMesh(const CalibrateOptions& c, int64_t ranks) {
  std::vector<int64_t> shape{ranks};
  if (!c.mesh.empty()) {
    auto parsed = sharding::Mesh::parseShape(c.mesh);
    if (!parsed) return parsed.status().withContext("--mesh " + c.mesh);
    shape = *parsed;
  }
  std::vector<std::string> names;
  for (size_t start = 0; !c.axes.empty() && start <= c.axes.size();) {
    size_t end = std::min(c.axes.find(',', start), c.axes.size());
    names.push_back(c.axes.substr(start, end - start));
    start = end + 1;
  }
  auto mesh = sharding::Mesh::create(shape, names);
  if (!mesh) return mesh.status().withContext("--calibrate --mesh " + c.mesh + " --axes " + c.axes);
  if (mesh->numRanks() != ranks)
    return Status::error("--calibrate: the mesh " + mesh->str() + " has " + std::to_string(mesh->numRanks()) +
                         " ranks, but " + std::to_string(ranks) + " workers start; pass -n " +
                         std::to_string(mesh->numRanks()) + " (times --nnodes)");
  if (ranks < 2)
    return Status::error("--calibrate measures links between ranks: start 2 or more workers (-n 2)");
  return mesh;
}

// -o names a file in an existing, writable folder (checked before any worker
// starts, so a bad path costs no measurement).
Status checkOutputPath(const std::string& output) {
  if (output.empty()) return Status::error("--calibrate: name the profile to write with -o profile.json");
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(output).parent_path();
  if (dir.empty()) dir = ".";
  if (fs::is_directory(output, ec))
    return Status::error(output + ": is a folder; -o names the profile file to write");
  if (!fs::is_directory(dir, ec))
    return Status::error(output + ": cannot write the profile: the folder " + dir.string() +
                         " does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    return Status::error(output + ": cannot write the profile: the folder " + dir.string() +
                         " is not writable");
  return Status::ok();
}

}  // namespace

int runCalibrate(const DistributedOptions& d, const CalibrateOptions& c, std::ostream& out,
                 std::ostream& err) {
  if (Status st = checkOutputPath(c.output); !st.isOk()) return fail(err, kBadInput, st.message());
  auto mesh = calibrationMesh(c, static_cast<int64_t>(d.nproc) * d.nnodes);
  if (!mesh) return fail(err, kBadInput, mesh.status().message());
  ScratchDir scratch("spmd-calibrate");
  launch::LaunchConfig cfg = launchConfig(d, {"--worker", "--calibrate", "--device", d.device, "--timeout",
                                              std::to_string(d.timeoutSeconds), "--stats-dir", scratch.path});
  for (const auto& [flag, value] : {std::pair<const char*, std::string>{"--mesh", c.mesh},
                                    {"--axes", c.axes},
                                    {"--bind-addr", d.bindAddr}})
    if (!value.empty()) cfg.workerArgv.insert(cfg.workerArgv.end(), {flag, value});
  if (c.quick) cfg.workerArgv.emplace_back("--calibrate-quick");
  if (int code = launchFailure(launch::launchWorkers(cfg, out, err), err)) return code;
  if (d.nodeRank != 0) return 0;  // rank 0, on node 0, measured for everyone
  auto profile = readFile(scratch.path + "/profile.json");
  auto summary = readFile(scratch.path + "/summary.txt");
  if (!profile || !summary) return fail(err, kFailure, "--calibrate: rank 0 wrote no measurements");
  if (Status st = writeFileAtomic(c.output, *profile); !st.isOk())
    return fail(err, kFailure, st.withContext(c.output).message());
  if (!d.quiet) out << *summary << "spmd-run: wrote " << c.output << " (spmdc compile --device-profile)\n";
  return 0;
}

int runCalibrateWorker(const DistributedOptions& d, const CalibrateOptions& c, std::ostream& err) {
  auto env = launch::workerEnvFromEnvironment();
  if (!env) return fail(err, kBadInput, env.status().message());
  launch::tagLogWithRank(env->rank);
  const std::string who = "rank " + std::to_string(env->rank);
  auto mesh = calibrationMesh(c, env->worldSize);
  if (!mesh) return fail(err, kBadInput, who + ": " + mesh.status().message());
  auto device = resolveDevice(d.device, env->localRank);
  if (!device) return fail(err, kBadInput, who + ": " + device.status().message());
  selectDevice(*device);
  CommOptions comm;
  comm.timeout = std::chrono::seconds(d.timeoutSeconds);
  comm.nccl =
      device->is_cuda() && ncclCompiled() && env->localWorldSize <= static_cast<int64_t>(at::getNumGPUs());
  if (Status st = chooseBindAddress(d, env->masterAddr, comm); !st.isOk())
    return fail(err, kBadInput, who + ": " + st.message());
  auto store = openRendezvousStore(*env, d.timeoutSeconds);
  if (!store) return fail(err, kFailure, store.status().message());
  auto meshComm = MeshComm::create(*store, *mesh, env->rank, comm);
  if (!meshComm) return fail(err, kFailure, meshComm.status().message());
  auto measured = measureMachine(**meshComm, *device, c.quick, env->localWorldSize);
  if (!measured) return fail(err, kFailure, measured.status().message());
  // Under spmd-run's launcher rank 0 hands its results over in --stats-dir;
  // started by torchrun, it writes -o itself.
  if (env->rank == 0 && !d.statsDir.empty()) {
    Status st = writeFileAtomic(d.statsDir + "/summary.txt", summaryText(*measured));
    if (st.isOk()) st = writeFileAtomic(d.statsDir + "/profile.json", profileJson(*measured));
    if (!st.isOk()) return fail(err, kFailure, who + ": " + st.message());
  } else if (env->rank == 0 && !c.output.empty()) {
    Status st = writeFileAtomic(c.output, profileJson(*measured));
    if (!st.isOk()) return fail(err, kFailure, who + ": " + st.withContext(c.output).message());
    err << summaryText(*measured);
  }
  finishRendezvous(**store, *env, d.timeoutSeconds);
  return 0;
}

}  // namespace spmd::runtime
