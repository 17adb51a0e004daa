// spmd-run --calibrate: measures this machine and backend (Gloo on CPU,
// NCCL on CUDA) and writes a device profile for spmdc --device-profile.
//
//   spmd-run --calibrate -n 4 --mesh 2x2 --axes dp,tp -o profile.json
//     -> 4 workers `spmd-run --worker --calibrate --mesh 2x2 ...`; each
//        times float32/bfloat16 matmuls and a large copy, then, axis by
//        axis, all-reduces and all-gathers of a few sizes through the same
//        kernels as spmd.all_reduce / spmd.all_gather
//     -> per axis, t = alpha + bytesMoved / bandwidth fitted by least squares
//        (bytesMoved as sharding::CostModel counts it), its residual printed
//     -> rank 0 assembles the profile; the launcher writes it atomically:
//   {"name": "...", "source": "spmd-run --calibrate on ...",
//    "compute": {"flops_per_second": {"float32": ..., "bfloat16": ..., "default": ...},
//                "memory_bytes_per_second": ...},
//    "links": {"intra_node": {...}, "inter_node": {...}}, "ranks_per_node": 4,
//    "axes": {"dp": {"alpha_seconds": ..., "bytes_per_second": ...}, "tp": {...}}}
//
// Every figure is the slowest rank's: a step waits for it.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Comm.h"
#include "runtime/Distributed.h"
#include "support/Status.h"

namespace spmd::runtime {

/// What --calibrate measures and where the profile goes (the launcher and
/// worker options travel in DistributedOptions: -n, --nnodes, --device, ...).
struct CalibrateOptions {
  std::string output;  ///< -o: the profile (JSON) to write
  std::string mesh;    ///< "4", "2x2"; empty: one axis over all ranks
  std::string axes;    ///< "dp,tp"; empty: Mesh::create's default names
  bool quick = false;  ///< small sizes and few repetitions (seconds, for tests)
};

/// A fit of t = alpha + bytes / bytesPerSecond.
struct LinkFit {
  double alphaSeconds = 0;
  double bytesPerSecond = 0;
  /// Root mean square of (fitted - measured) / measured over the points.
  double residual = 0;
  /// How the fit was made when least squares alone gave no positive alpha
  /// or bandwidth ("" when it did).
  std::string note;
};

/// Least-squares fit of seconds = alpha + bytes / bandwidth over `points`
/// (bytes, seconds), each weighted by 1 / seconds so that small messages
/// (which fix alpha) count as much as large ones (which fix the bandwidth).
/// A non-positive intercept falls back to alpha = the smallest message's
/// time; a non-positive slope to bandwidth = largest bytes / its time; both
/// are named in LinkFit::note. Error for fewer than 2 points or a
/// non-positive time.
Expected<LinkFit> fitLink(const std::vector<std::pair<double, double>>& points);

/// One timed collective: the slowest rank's median time.
struct CollectiveSample {
  std::string collective;  ///< "all_reduce" or "all_gather"
  int64_t bytes = 0;       ///< the all-reduced (= the gathered) tensor
  double bytesMoved = 0;   ///< what each rank sends, as sharding::CostModel counts it
  double seconds = 0;
};

/// The measurements of one mesh axis (of size > 1).
struct AxisFigures {
  std::string name;
  int64_t size = 0;
  bool crossesNodes = false;  ///< some group of the axis spans two nodes
  std::vector<CollectiveSample> samples;
  LinkFit fit;  ///< over every sample of the axis
};

/// Compute throughput of the slowest rank, every rank busy at once.
struct ComputeFigures {
  double float32FlopsPerSecond = 0;
  double bfloat16FlopsPerSecond = 0;
  double memoryBytesPerSecond = 0;  ///< a large copy: bytes read + written per second
  int64_t matmulN = 0;
  int64_t copyBytes = 0;
};

/// Everything --calibrate measured.
struct Calibration {
  ComputeFigures compute;
  std::vector<AxisFigures> axes;
  int64_t ranks = 0;
  int64_t ranksPerNode = 0;
  std::string backend;  ///< "gloo" or "nccl"
  std::string device;   ///< "cpu" or "cuda"
  bool quick = false;
};

/// Measures compute on every rank, then each mesh axis of size > 1 in
/// turn (collective over all ranks of `comm`: every rank calls it). Figures
/// are the slowest rank's, the same on every rank. Errors name the rank.
Expected<Calibration> measureMachine(MeshComm& comm, const c10::Device& device, bool quick,
                                     int64_t ranksPerNode);

/// The device profile of `c` (the format of Calibrate.h's top; the keys the
/// sharding::DeviceProfile loader accepts). intra_node / inter_node come
/// from the axis with the most ranks inside one node / across nodes; one
/// missing copies the other, which "source" says.
std::string profileJson(const Calibration& c);

/// The measurements as a table, with each axis's fit and residual.
std::string summaryText(const Calibration& c);

/// Launcher side of --calibrate: checks the options and -o's folder before
/// any worker starts, runs the workers, prints the measurements and writes
/// the profile atomically (none on failure). Returns the exit code (0 ok,
/// 1 failure, 2 bad input).
int runCalibrate(const DistributedOptions& d, const CalibrateOptions& c, std::ostream& out,
                 std::ostream& err);

/// Worker side of --calibrate (RANK, WORLD_SIZE, ... from the environment,
/// as runWorker): measures, and rank 0 writes "profile.json" and
/// "summary.txt" to d.statsDir (spmd-run's launcher), or without one the
/// profile to c.output (torchrun --no-python spmd-run --worker --calibrate
/// -o p.json). Returns the exit code.
int runCalibrateWorker(const DistributedOptions& d, const CalibrateOptions& c, std::ostream& err);

}  // namespace spmd::runtime
