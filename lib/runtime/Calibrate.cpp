// The measurements of spmd-run --calibrate and the profile they make (see
// Calibrate.h); CalibrateRun.cpp holds the launcher and worker around them.
#include "runtime/Calibrate.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <torch/version.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "runtime/BuildInfo.h"
#include "runtime/CollectiveOps.h"
#include "sharding/CostModel.h"
#include "support/FirstLine.h"
#include "support/Strings.h"

namespace spmd::runtime {
namespace {

using sharding::CollectiveKind;
using sharding::CostModel;
using sharding::ReduceOp;
using Clock = std::chrono::steady_clock;

// Sizes and repetitions of one mode.
struct Plan {
  std::vector<int64_t> messageBytes;  // the all-reduced (= gathered) tensor
  int repeats = 5;                    // timed repetitions; their median counts
  int64_t matmulN = 1024;             // n of the n x n x n matmuls
  int64_t copyBytes = 256 << 20;      // the copied tensor
};

Plan planFor(bool quick, bool cuda) {
  if (quick) return {{4 << 10, 64 << 10, 1 << 20}, 3, 128, 8 << 20};
  if (cuda) return {{8 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20}, 5, 8192, int64_t{1} << 30};
  return {{4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20}, 5, 1024, 256 << 20};
}

// Back-to-back calls per timed repetition: enough that a small message's
// time is not the clock's. The same on every rank (a collective count that
// differed between ranks would hang).
int itersFor(int64_t bytes, bool quick) {
  if (quick) return 2;
  return static_cast<int>(std::clamp<int64_t>((int64_t{32} << 20) / std::max<int64_t>(bytes, 1), 2, 50));
}

// The median over `repeats` of the mean time of `iters` calls of `f`, after
// one warm-up call; `before` runs untimed before each repetition.
template <typename F, typename B>
double medianSeconds(int repeats, int iters, const c10::Device& device, F f, B before) {
  f();
  synchronizeDevice(device);
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    before();
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) f();
    synchronizeDevice(device);
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(s.size() / 2), s.end());
  return s[s.size() / 2];
}

// The largest `value` over all ranks (a max over every axis in turn).
double slowest(MeshComm& comm, double value, const c10::Device& device) {
  at::Tensor t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(device));
  for (int64_t a = 0; a < comm.mesh().numAxes(); ++a)
    if (comm.mesh().size(a) > 1) t = allReduceNow(comm, a, t, ReduceOp::Max);
  return t.cpu().item<double>();
}

// True when some group of `axis` holds ranks of two nodes.
bool crossesNodes(const sharding::Mesh& mesh, int64_t axis, int64_t ranksPerNode) {
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    std::vector<int64_t> c = mesh.coords(r);
    c[static_cast<size_t>(axis)] = 0;
    if (mesh.rankAt(c) / ranksPerNode != r / ranksPerNode) return true;
  }
  return false;
}

ComputeFigures measureCompute(MeshComm& comm, const Plan& plan, const c10::Device& device, bool quick) {
  auto opts = at::TensorOptions().device(device);
  const int64_t n = plan.matmulN;
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  const int iters = quick ? 2 : 5;
  auto none = [] {};
  ComputeFigures f;
  f.matmulN = n;
  f.copyBytes = plan.copyBytes;
  for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    at::Tensor a = at::randn({n, n}, opts).to(type), b = at::randn({n, n}, opts).to(type);
    at::Tensor c = at::empty({n, n}, opts.dtype(type));
    double s = medianSeconds(
        plan.repeats, iters, device, [&] { at::mm_out(c, a, b); }, none);
    (type == at::kFloat ? f.float32FlopsPerSecond : f.bfloat16FlopsPerSecond) =
        flops / slowest(comm, s, device);
  }
  at::Tensor src = at::ones({plan.copyBytes / 4}, opts), dst = at::empty_like(src);
  double s = medianSeconds(
      plan.repeats, iters, device, [&] { dst.copy_(src); }, none);
  // A copy reads and writes every byte.
  f.memoryBytesPerSecond = 2.0 * static_cast<double>(plan.copyBytes) / slowest(comm, s, device);
  return f;
}

AxisFigures measureAxis(MeshComm& comm, int64_t axis, const Plan& plan, const c10::Device& device, bool quick,
                        int64_t ranksPerNode) {
  const sharding::Mesh& mesh = comm.mesh();
  const int64_t n = mesh.size(axis);
  AxisFigures ax;
  ax.name = mesh.axisNames()[static_cast<size_t>(axis)];
  ax.size = n;
  ax.crossesNodes = crossesNodes(mesh, axis, ranksPerNode);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor token = at::zeros({1}, opts);
  // The group starts each repetition together.
  auto barrier = [&] { allReduceNow(comm, axis, token, ReduceOp::Sum); };
  for (int64_t bytes : plan.messageBytes) {
    const int64_t elems = std::max<int64_t>(bytes / 4 / n, 1) * n;
    const int64_t b = elems * 4;
    const int iters = itersFor(b, quick);
    at::Tensor whole = at::zeros({elems}, opts), shard = at::zeros({elems / n}, opts);
    double ar = medianSeconds(
        plan.repeats, iters, device, [&] { allReduceNow(comm, axis, whole, ReduceOp::Sum); }, barrier);
    double ag = medianSeconds(
        plan.repeats, iters, device, [&] { allGatherNow(comm, axis, shard, 0, 1); }, barrier);
    ax.samples.push_back({"all_reduce", b,
                          static_cast<double>(CostModel::bytesMoved(CollectiveKind::AllReduce, n, b, b)),
                          slowest(comm, ar, device)});
    ax.samples.push_back({"all_gather", b,
                          static_cast<double>(CostModel::bytesMoved(CollectiveKind::AllGather, n, b / n, b)),
                          slowest(comm, ag, device)});
  }
  return ax;
}

}  // namespace

Expected<LinkFit> fitLink(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 2) return Status::error("a link fit needs at least 2 measurements");
  double w = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (const auto& [x, t] : points) {
    if (!(t > 0) || !(x >= 0)) return Status::error("a link fit needs positive times and sizes");
    const double wi = 1.0 / (t * t);
    w += wi, sx += wi * x, st += wi * t, sxx += wi * x * x, sxt += wi * x * t;
  }
  const double den = w * sxx - sx * sx;
  if (!(std::abs(den) > 1e-12 * w * sxx)) return Status::error("a link fit needs at least 2 message sizes");
  double beta = (w * sxt - sx * st) / den;
  double alpha = (st - beta * sx) / w;
  // (bytes, seconds) of the smallest and the largest message.
  const double tMin = std::min_element(points.begin(), points.end())->second;
  const auto [xMax, tMax] = *std::max_element(points.begin(), points.end());
  LinkFit fit;
  if (beta <= 0) {
    // Times do not grow with size: no bandwidth term to fit.
    beta = tMax / std::max(xMax, 1.0);
    alpha = tMin;
    fit.note = "time did not grow with size: bandwidth = largest message / its time, alpha = smallest's time";
  } else if (alpha <= 0) {
    alpha = tMin;
    double num = 0, d = 0;
    for (const auto& [x, t] : points) num += x * (t - alpha) / (t * t), d += x * x / (t * t);
    beta = num > 0 && d > 0 ? num / d : tMax / std::max(xMax, 1.0);
    fit.note = "fitted alpha was not positive: alpha = the smallest message's time, bandwidth refitted";
  }
  fit.alphaSeconds = alpha;
  fit.bytesPerSecond = 1.0 / beta;
  double sq = 0;
  for (const auto& [x, t] : points) sq += std::pow((alpha + beta * x - t) / t, 2);
  fit.residual = std::sqrt(sq / static_cast<double>(points.size()));
  return fit;
}

Expected<Calibration> measureMachine(MeshComm& comm, const c10::Device& device, bool quick,
                                     int64_t ranksPerNode) {
  const Plan plan = planFor(quick, device.is_cuda());
  Calibration c;
  try {
    c.compute = measureCompute(comm, plan, device, quick);
    for (int64_t a = 0; a < comm.mesh().numAxes(); ++a)
      if (comm.mesh().size(a) > 1) c.axes.push_back(measureAxis(comm, a, plan, device, quick, ranksPerNode));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("rank " + std::to_string(comm.rank()) + ": calibration failed: " + firstLine(what));
  }
  for (AxisFigures& ax : c.axes) {
    std::vector<std::pair<double, double>> points;
    for (const CollectiveSample& s : ax.samples) points.emplace_back(s.bytesMoved, s.seconds);
    SPMD_ASSIGN_OR_RETURN(ax.fit, fitLink(points));
  }
  c.ranks = comm.mesh().numRanks();
  c.ranksPerNode = ranksPerNode;
  c.backend = comm.nccl() ? "nccl" : "gloo";
  c.device = device.is_cuda() ? "cuda" : "cpu";
  c.quick = quick;
  return c;
}

namespace {

nlohmann::ordered_json linkJson(const LinkFit& f) {
  return {{"alpha_seconds", f.alphaSeconds}, {"bytes_per_second", f.bytesPerSecond}};
}

// The measured axis standing for `inter` (crossing nodes) or intra-node
// links: the one with the most ranks (the last of equals); null when none.
const AxisFigures* representative(const Calibration& c, bool inter) {
  const AxisFigures* best = nullptr;
  for (const AxisFigures& ax : c.axes)
    if (ax.crossesNodes == inter && (!best || ax.size >= best->size)) best = &ax;
  return best;
}

std::string hostName() {
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("localhost");
}

std::string utcDate() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

}  // namespace

std::string profileJson(const Calibration& c) {
  const AxisFigures* intra = representative(c, false);
  const AxisFigures* inter = representative(c, true);
  std::string source = "spmd-run --calibrate" + std::string(c.quick ? "-quick" : "") + " on " + hostName() +
                       ", " + utcDate() + ": " + std::to_string(c.ranks) + " ranks (" +
                       std::to_string(c.ranksPerNode) + " per node), " + c.backend + " on " + c.device +
                       ", LibTorch " + TORCH_VERSION + "; compute: the slowest rank's " +
                       std::to_string(c.compute.matmulN) + "^3 matmuls while every rank ran them, a " +
                       std::to_string(c.compute.copyBytes >> 20) +
                       " MiB copy (read + write); links: t = alpha + bytesMoved / bandwidth over "
                       "all-reduces and all-gathers, fit residual (RMS relative)";
  for (const AxisFigures& ax : c.axes) {
    char r[64];
    std::snprintf(r, sizeof r, " %s %.1f%%", ax.name.c_str(), ax.fit.residual * 100);
    source += r;
  }
  if (!intra) source += "; intra_node = inter_node: no axis stayed inside one node";
  if (!inter) source += "; inter_node = intra_node: one node, nothing crossed nodes";
  if (!intra) intra = inter;
  if (!inter) inter = intra;
  nlohmann::ordered_json j;
  j["name"] = hostName() + "-" + c.backend + "-" + c.device;
  j["source"] = source;
  j["compute"] = {{"flops_per_second",
                   {{"float32", c.compute.float32FlopsPerSecond},
                    {"bfloat16", c.compute.bfloat16FlopsPerSecond},
                    {"default", c.compute.float32FlopsPerSecond}}},
                  {"memory_bytes_per_second", c.compute.memoryBytesPerSecond}};
  j["links"] = {{"intra_node", linkJson(intra->fit)}, {"inter_node", linkJson(inter->fit)}};
  j["ranks_per_node"] = c.ranksPerNode;
  nlohmann::ordered_json axes = nlohmann::ordered_json::object();
  for (const AxisFigures& ax : c.axes) axes[ax.name] = linkJson(ax.fit);
  j["axes"] = axes;
  return j.dump(2) + "\n";
}

std::string summaryText(const Calibration& c) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "calibrate: %lld ranks, %s on %s%s\n", static_cast<long long>(c.ranks),
                c.backend.c_str(), c.device.c_str(), c.quick ? " (quick: small sizes, few repetitions)" : "");
  out += line;
  std::snprintf(line, sizeof line,
                "compute (slowest rank): matmul %lld^3 float32 %.3g GFLOP/s, bfloat16 %.3g GFLOP/s; "
                "copy %lld MiB %.3g GB/s\n",
                static_cast<long long>(c.compute.matmulN), c.compute.float32FlopsPerSecond / 1e9,
                c.compute.bfloat16FlopsPerSecond / 1e9, static_cast<long long>(c.compute.copyBytes >> 20),
                c.compute.memoryBytesPerSecond / 1e9);
  out += line;
  for (const AxisFigures& ax : c.axes) {
    std::snprintf(line, sizeof line, "axis %s (%lld ranks%s):\n  %14s %12s %12s\n", ax.name.c_str(),
                  static_cast<long long>(ax.size), ax.crossesNodes ? ", across nodes" : "", "bytes",
                  "all_reduce", "all_gather");
    out += line;
    for (size_t i = 0; i + 1 < ax.samples.size(); i += 2) {
      std::snprintf(line, sizeof line, "  %14s %9.1f us %9.1f us\n", withCommas(ax.samples[i].bytes).c_str(),
                    ax.samples[i].seconds * 1e6, ax.samples[i + 1].seconds * 1e6);
      out += line;
    }
    std::snprintf(line, sizeof line, "  fit: alpha %.1f us, %.3g GB/s, residual %.1f%%%s%s\n",
                  ax.fit.alphaSeconds * 1e6, ax.fit.bytesPerSecond / 1e9, ax.fit.residual * 100,
                  ax.fit.note.empty() ? "" : "; ", ax.fit.note.c_str());
    out += line;
  }
  return out;
}

}  // namespace spmd::runtime
