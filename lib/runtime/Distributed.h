// spmd-run's distributed mode: the launcher side (validate the program and
// inputs, start the workers, verify, summarize) and the worker side (one
// rank, configured by torchrun's environment variables).
//
//   spmd-run -n 8 llama.spmd --inputs batch.safetensors --output out.safetensors --verify llama.pt2
//     -> 8 workers `spmd-run --worker llama.spmd ...` with RANK=0..7, WORLD_SIZE=8, ...
//     -> rank 0 writes out.safetensors; the launcher checks it against llama.pt2 run on one device
//   spmd-run: 8 ranks, 1.2 s wall, step 14.1 ms, 57,344 B sent per rank (max)
//     memory per rank (max): state 2,097,152 B, peak 3,145,728 B (predicted 3,100,000 B, -1.4%), ...
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "program/Program.h"
#include "runtime/Dcp.h"
#include "runtime/TensorIO.h"

namespace spmd::runtime {

/// Options of a distributed run (launcher and workers).
struct DistributedOptions {
  std::string program;          ///< the .spmd file
  std::string inputs;           ///< global inputs (safetensors), optional
  std::string output;           ///< written by rank 0, optional
  std::string device = "auto";  ///< cpu, cuda, or auto (cuda when this build and machine have a GPU)
  /// Shared libraries of custom ops (TORCH_LIBRARY) every worker loads.
  std::vector<std::string> opLibraries;
  int nproc = 1;  ///< workers on this node (-n)
  int nnodes = 1;
  int nodeRank = 0;
  std::string masterAddr = "127.0.0.1";
  /// Address this node's workers bind their Gloo transport to; empty: the
  /// one that reaches masterAddr (GLOO_SOCKET_IFNAME, when set, wins).
  std::string bindAddr;
  int masterPort = 0;  ///< 0: a free port
  /// .pt2 to run on one device and compare with the outputs (Verify.h).
  std::string verify;
  /// safetensors file of expected outputs (written by PyTorch) to compare with.
  std::string verifyAgainst;
  /// Tolerances of --verify/--verify-against; unset: by dtype (defaultTolerance).
  std::optional<double> rtol;
  std::optional<double> atol;
  int timeoutSeconds = 60;  ///< collectives and rendezvous fail after this
  int repeat = 1;           ///< executions per worker (benchmarks); the last one's outputs are written
  bool quiet = false;
  std::string statsDir;  ///< worker: where to write its statistics (set by the launcher)
  /// Launcher: JSON file of each of this node's ranks' measured memory,
  /// step time and bytes sent ({"format": 1, "program", "mesh", "ranks"}).
  std::string profile;
  /// Launcher: the compiler's per-rank peak estimate of a program, printed
  /// beside the measured peak (set by the tool, which links the compiler's
  /// passes; unset: not printed).
  std::function<int64_t(const program::Program&)> predictPeakBytes;
  int steps = 1;  ///< train steps (mutation outputs update the weights in between)
  /// JSON lines {"step", "loss", "step_ms"}, written by rank 0; a non-finite
  /// loss is written as null. On --resume, lines of steps at or after the
  /// checkpoint's (from a run that did not reach its next save) are dropped.
  std::string lossLog;
  std::string save;    ///< sharded checkpoint folder written after the last step
  int saveEvery = 0;   ///< also save every this many steps (0: only after the last)
  int keep = 2;        ///< step folders of `save` kept (0: all)
  std::string resume;  ///< checkpoint (root with `latest`, or a step folder) to start from
  /// Write `save` as a PyTorch Distributed Checkpoint folder (Dcp.h).
  bool saveDcp = false;
  /// The layout `saveDcp` writes (--dcp-format).
  DcpFormat dcpFormat = DcpFormat::Torch;
  /// Where a by-reference program's relative weight files lie, when not
  /// where they were at compile time (--weights-root).
  std::string weightsRoot;
  /// --cuda-graph: on, off or auto (auto: on where the program and device
  /// allow it, CudaGraph.h).
  std::string cudaGraph = "auto";
  /// --allow-tf32: float32 matmuls and convolutions may use TF32 on GPUs.
  bool allowTf32 = false;
};

/// Reads the global inputs: one safetensors file, or a folder of them (one
/// batch per file, sorted by name, cycled over the steps).
Expected<std::vector<TensorMap>> readBatches(const std::string& path);

/// Launches the workers and waits for them; returns the process exit code
/// (0 ok, 1 failure or verification above tolerance, 2 bad input).
int runDistributed(const DistributedOptions& options, std::ostream& out, std::ostream& err);

/// Runs this process as one worker (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
/// MASTER_PORT from the environment); returns its exit code.
int runWorker(const DistributedOptions& options, std::ostream& err);

}  // namespace spmd::runtime
