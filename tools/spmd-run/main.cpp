// spmd-run: runs an exported program on one device, or a compiled program
// on N workers.
//
//   spmd-run model.pt2 --inputs in.safetensors --output out.safetensors [--device cpu|cuda]
//   spmd-run -n 8 model.spmd --inputs in.safetensors --output out.safetensors [--verify model.pt2]
//   spmd-run -n 8 model.spmd --inputs in.safetensors --steps 20 --verify-against expected.safetensors
//   spmd-run --worker model.spmd ...      (one rank; torchrun's environment: torchrun --no-python)
//   spmd-run --calibrate -n 4 [--mesh 2x2 --axes dp,tp] -o profile.json   (a device profile)
//
// Inputs are named input.<i> or by the program's signature; outputs are
// written as output.<i>, loss, grad.<fqn>, buffer.<fqn>, mutated.<name>.
// Errors print "error: <file>: <what>" to stderr; the exit code is 2 for bad
// input (unreadable model or inputs, inputs that do not fit the program) and
// 1 for any other failure. The output file is written atomically: a failed
// run leaves none.
#include <ATen/Context.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <string>

#include "passes/Report.h"
#include "pt2/Archive.h"
#include "runtime/BuildInfo.h"
#include "runtime/Calibrate.h"
#include "runtime/Checkpoint.h"
#include "runtime/Dcp.h"
#include "runtime/Distributed.h"
#include "runtime/HfCheckpoint.h"
#include "runtime/OpLibrary.h"
#include "runtime/Runner.h"
#include "runtime/TensorIO.h"
#include "runtime/Verify.h"
#include "support/FirstLine.h"
#include "support/Log.h"
#include "support/Strings.h"
#include "support/Version.h"

namespace {

using namespace spmd;

constexpr int kBadInput = 2;
constexpr int kFailure = 1;

/// Prints "error: <file>: <what>" (no second prefix when <what> already names the file).
int fail(int code, const std::string& file, const Status& status) {
  const std::string& what = status.message();
  std::cerr << "error: ";
  if (!file.empty() && what.rfind(file + ":", 0) != 0) std::cerr << file << ": ";
  std::cerr << what << "\n";
  return code;
}

struct Options {
  std::string model;
  std::string inputs;
  std::string output;
  std::string device = "auto";
};

void printSummary(const runtime::TensorMap& outputs) {
  for (const auto& [name, t] : outputs) {
    std::cout << name << ": " << c10::toString(t.scalar_type()) << " " << formatShape(t.sizes()) << "\n";
  }
}

/// Runs one .pt2 on one device; returns the exit code.
int runSingle(const Options& o) {
  Expected<c10::Device> resolved = runtime::resolveDevice(o.device, 0);
  if (!resolved) return fail(kBadInput, "", resolved.status());
  const c10::Device device = *resolved;
  runtime::selectDevice(device);
  Expected<pt2::Archive> archive = pt2::readArchive(o.model);
  if (!archive) return fail(kBadInput, o.model, archive.status());
  Expected<runtime::ProgramRunner> runner = runtime::ProgramRunner::create(*archive, {device});
  if (!runner) return fail(kFailure, o.model, runner.status());
  runtime::TensorMap inputs;
  if (!o.inputs.empty()) {
    Expected<runtime::TensorMap> read = runtime::readTensors(o.inputs);
    if (!read) return fail(kBadInput, o.inputs, read.status());
    inputs = std::move(read).value();
  }
  const std::string& inputFile = o.inputs.empty() ? o.model : o.inputs;
  Expected<std::vector<c10::IValue>> bound = runner->bindInputs(inputs);
  if (!bound) return fail(kBadInput, inputFile, bound.status());
  Expected<runtime::TensorMap> outputs = runner->execute(std::move(bound).value());
  if (!outputs) return fail(kFailure, o.model, outputs.status());
  if (o.output.empty()) {
    printSummary(*outputs);
    return 0;
  }
  Status written = runtime::writeTensors(o.output, *outputs);
  if (!written.isOk()) return fail(kFailure, o.output, written);
  return 0;
}

}  // namespace

/// Folds --save-dcp / --resume-dcp into `d` (a DCP folder is --save/--resume's
/// target in DCP form); errors for flags that do not combine.
Status applyDcpFlags(const std::string& saveDcp, const std::string& resumeDcp, const std::string& format,
                     runtime::DistributedOptions& d) {
  std::optional<runtime::DcpFormat> f = runtime::parseDcpFormat(format);
  if (!f) return Status::error("--dcp-format " + format + ": use torch or hf");
  if (*f != runtime::DcpFormat::Torch && saveDcp.empty())
    return Status::error("--dcp-format applies to --save-dcp: add --save-dcp DIR");
  d.dcpFormat = *f;
  if (!saveDcp.empty()) {
    if (!d.save.empty()) return Status::error("--save and --save-dcp: choose one checkpoint format");
    d.save = saveDcp;
    d.saveDcp = true;
  }
  if (!resumeDcp.empty()) {
    if (!d.resume.empty()) return Status::error("--resume and --resume-dcp: choose one checkpoint");
    SPMD_ASSIGN_OR_RETURN(d.resume, runtime::resolveDcpFolder(resumeDcp));
  }
  return Status::ok();
}

/// True when `path` starts like a .spmd program (else it is read as a .pt2).
bool isSpmdProgram(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  f.read(magic, sizeof magic);
  return std::string(magic, sizeof magic) == "SPMDPROG";
}

int main(int argc, char** argv) {
  CLI::App app{
      "spmd-run: run an exported PyTorch program (.pt2) on one device, or a compiled .spmd on N workers"};
  app.footer(
      "Exit codes: 0 success, 1 failure (or --verify above tolerance), 2 bad input (model, inputs, usage).");
  app.set_version_flag("--version", "spmd-run " + std::string(kVersion) + ", " + runtime::buildSummary());
  Options o;
  runtime::DistributedOptions d;
  bool worker = false;
  app.add_option("model", o.model, "a torch.export archive (.pt2) or a compiled program (.spmd)");
  app.add_option("--inputs", o.inputs, "safetensors file with input.<i> (or signature-named) tensors");
  app.add_option(
      "-o,--output", o.output,
      "safetensors file to write (output.<i>, loss, grad.<fqn>, ...); --calibrate: the profile (JSON)");
  app.add_option("--device", o.device, "cpu, cuda, or auto: cuda when this build and machine have a GPU")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("-n,--nproc-per-node", d.nproc, "workers to start on this node (.spmd)");
  app.add_option("--nnodes", d.nnodes, "number of nodes");
  app.add_option("--node-rank", d.nodeRank, "this node's rank");
  app.add_option("--master-addr", d.masterAddr, "address of rank 0's rendezvous store");
  app.add_option("--master-port", d.masterPort, "port of the store (default: a free one)");
  app.add_option("--bind-addr", d.bindAddr,
                 "address this node's workers listen on for peers (default: the one that reaches "
                 "--master-addr; GLOO_SOCKET_IFNAME names an interface instead)");
  app.add_option("--verify", d.verify,
                 "also run this .pt2 on one device and compare the outputs (--steps 1)");
  app.add_option("--verify-against", d.verifyAgainst,
                 "compare the outputs with this safetensors file of expected ones (e.g. written by PyTorch; "
                 "names as --output writes them: output.<i>, loss, grad.<fqn>, parameter.<fqn>, ...)");
  double rtol = 0, atol = 0;
  CLI::Option* rtolOpt = app.add_option(
      "--rtol", rtol,
      "--verify/--verify-against: relative tolerance for every output; an output passes when "
      "RMS(got - want) <= atol + rtol * RMS(want). Default by dtype (torch.testing.assert_close's): " +
          runtime::defaultToleranceTable());
  CLI::Option* atolOpt = app.add_option(
      "--atol", atol, "--verify/--verify-against: absolute tolerance (default by dtype, as --rtol)");
  app.add_option("--timeout", d.timeoutSeconds, "seconds before a collective or the rendezvous fails");
  app.add_option("--repeat", d.repeat, "execute the program this many times per worker (benchmarks)");
  app.add_flag("-q,--quiet", d.quiet, "print only errors");
  std::string logLevel;
  app.add_option("--log-level", logLevel,
                 "trace, debug, info, warn (default), error or off, for this process and its workers; "
                 "default from SPMD_LOG_LEVEL");
  app.add_option("--steps", d.steps, "train steps: parameter and buffer updates feed the next step");
  app.add_option("--loss-log", d.lossLog, "write one JSON line per step: step, loss, step_ms");
  app.add_option("--save", d.save,
                 "save a sharded checkpoint to this folder (as step-<N>/, with 'latest' naming the newest) "
                 "after the last step");
  app.add_option("--save-every", d.saveEvery, "also save every N steps (0: only after the last)")
      ->check(CLI::NonNegativeNumber);
  app.add_option(
         "--keep", d.keep,
         "step folders of --save (or --save-dcp with --save-every) to keep, newest first (0: all; default 2)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resume", d.resume,
                 "start from a checkpoint: a --save folder (its latest step) or one step folder; a "
                 "checkpoint saved under another mesh or layout is resharded");
  std::string saveDcp, resumeDcp, dcpFormat = "torch";
  app.add_option("--save-dcp", saveDcp,
                 "after the last step, save a PyTorch Distributed Checkpoint folder (.metadata + "
                 "__<rank>_0.distcp) that torch.distributed.checkpoint.load reads; with --save-every, "
                 "as step-<N>/ folders in it, --keep of them (docs/CHECKPOINTS.md)");
  app.add_option(
      "--dcp-format", dcpFormat,
      "the layout --save-dcp writes: torch (default; FileSystemWriter's) or hf (DCP's Hugging Face "
      "safetensors, as HuggingFaceStorageWriter(save_distributed=True) writes: a "
      "shard-<rank+1>-model-00001-of-00001.safetensors per rank, read by HuggingFaceStorageReader)");
  app.add_option("--resume-dcp", resumeDcp,
                 "start from a PyTorch Distributed Checkpoint folder (dcp.save, FSDP2, torchtitan), or "
                 "the newest complete step-<N>/ folder in it, resharded to this program's layout "
                 "(docs/CHECKPOINTS.md)");
  app.add_option("--weights-root", d.weightsRoot,
                 "a program compiled by reference: the folder its checkpoint files lie in now (default: "
                 "where they were at compile time)");
  std::string consolidate, maxShardSize = "5GB";
  runtime::HfExportOptions hf;
  app.add_option("--consolidate", consolidate,
                 "write --output (one safetensors file, tensors by FQN) or --hf-output from a sharded "
                 "checkpoint folder");
  app.add_option(
      "--hf-output", hf.outDir,
      "--consolidate: write a Hugging Face model folder (sharded safetensors + index, no optimizer "
      "states) that transformers' from_pretrained loads");
  app.add_option("--max-shard-size", maxShardSize, "--hf-output: largest safetensors file (default 5GB)");
  app.add_option("--hf-config-from", hf.configFrom,
                 "--hf-output: copy config.json and the tokenizer files from this Hugging Face folder");
  app.add_flag("--worker", worker,
               "run as one worker (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment)");
  app.add_option("--profile", d.profile,
                 "write each rank's measured peak memory, step time and bytes sent to this JSON file "
                 "(for spmdc explain --profile; .spmd runs)");
  app.add_option("--stats-dir", d.statsDir, "worker: folder for its statistics")->group("");
  app.add_option(
      "--load-library", d.opLibraries,
      "load a shared library of custom ops (TORCH_LIBRARY) first; every worker loads it (repeatable)");
  app.add_option("--cuda-graph", d.cudaGraph,
                 "capture the step as one CUDA graph after warm-up and replay it: on, off, or auto (default: "
                 "on where the device is a GPU and the program has static shapes and no host syncs)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  app.add_flag("--allow-tf32", d.allowTf32,
               "let float32 matmuls and convolutions use TF32 on GPUs (faster, "
               "about 10 mantissa bits)");
  runtime::CalibrateOptions cal;
  bool calibrate = false;
  app.add_flag("--calibrate", calibrate,
               "measure this machine on -n workers (matmul FLOP/s, copy bandwidth, per mesh axis the "
               "all-reduce/all-gather latency and bandwidth) and write a device profile to -o")
      ->group("Calibration");
  app.add_flag("--calibrate-quick", cal.quick, "--calibrate with small sizes and few repetitions (seconds)")
      ->group("Calibration");
  app.add_option("--mesh", cal.mesh, "--calibrate: mesh shape, e.g. 2x2 (default: one axis of all ranks)")
      ->group("Calibration");
  app.add_option("--axes", cal.axes, "--calibrate: mesh axis names, e.g. dp,tp")->group("Calibration");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "error: " << e.what() << " (see --help)\n";
    return kBadInput;
  }
  if (Status st = logging::configure(logLevel); !st.isOk()) return fail(kBadInput, "", st);
  if (Status st = applyDcpFlags(saveDcp, resumeDcp, dcpFormat, d); !st.isOk()) return fail(kBadInput, "", st);
  if (rtolOpt->count()) d.rtol = rtol;
  if (atolOpt->count()) d.atol = atol;
  for (const std::string& lib : d.opLibraries)
    if (Status st = runtime::loadOpLibrary(lib); !st.isOk()) return fail(kBadInput, "", st);
  if (!calibrate && !cal.quick && (!cal.mesh.empty() || !cal.axes.empty())) {
    std::cerr << "error: --mesh and --axes apply to --calibrate (a program carries its own mesh)\n";
    return kBadInput;
  }
  if (calibrate || cal.quick) {
    cal.output = o.output;
    d.device = o.device;
    return worker ? runtime::runCalibrateWorker(d, cal, std::cerr)
                  : runtime::runCalibrate(d, cal, std::cout, std::cerr);
  }
  if (!consolidate.empty() && !hf.outDir.empty()) {
    auto bytes = parseByteSize("--max-shard-size", maxShardSize);
    if (!bytes) return fail(kBadInput, "", bytes.status());
    hf.maxShardBytes = *bytes;
    Status st = runtime::consolidateToHf(consolidate, hf);
    return st.isOk() ? 0 : fail(kBadInput, "", st);
  }
  if (!consolidate.empty()) {
    Status st = runtime::consolidateCheckpoint(consolidate, o.output);
    return st.isOk() ? 0 : fail(kBadInput, "", st);
  }
  if (o.model.empty()) {
    std::cerr << "error: name a program (.pt2 or .spmd), or --consolidate a checkpoint (see --help)\n";
    return kBadInput;
  }
  if (d.allowTf32) {  // every worker is this tool too, passed --allow-tf32
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  if (!worker && !isSpmdProgram(o.model)) {
    if (d.cudaGraph == "on") {
      std::cerr << "error: --cuda-graph on applies to compiled programs (.spmd); " << o.model
                << " runs eagerly (pass --cuda-graph auto or off)\n";
      return kBadInput;
    }
    return runSingle(o);
  }
  d.program = o.model;
  d.inputs = o.inputs;
  d.output = o.output;
  d.device = o.device;
  d.predictPeakBytes = [](const program::Program& p) { return passes::estimateMemory(p).peakBytes; };
  // The libraries turn LibTorch's exceptions into errors where they call it;
  // one that slips through still ends in one line, not an abort.
  try {
    return worker ? runtime::runWorker(d, std::cerr) : runtime::runDistributed(d, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::cerr << "error: " << firstLine(what) << "\n";
    return 1;
  }
}
