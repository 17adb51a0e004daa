// Kernels of the MoE experts ops (see MoeOps.h). One assignment is a (token,
// k) pair routed to expert indices[t, k] with weight weights[t, k]; token
// t's output is the sum over its assignments of weight * FFN_e(x[t]), with
// FFN_e(v) = w2[e] @ (silu(w1[e] @ v) * (w3[e] @ v)).
//
// Under expert parallelism on an axis of n ranks, rank r holds experts
// [r * E / n, (r + 1) * E / n) and its own tokens. Each rank sorts its
// assignments by expert, so those for rank j are one contiguous run; it
// sends its rows per expert first (an all-to-all of E integers, as
// torchtitan's), then the rows with the per-rank sums as splits
// (all_to_all_single with splits: the receivers' row counts are known only
// now); the counts also say which local expert each received row is for,
// so no expert ids travel. The receiver runs its local experts on what it
// received and sends the results back with the splits reversed; the sender
// adds each result, times its weight, to its token. The backward sends the
// token rows (the forward keeps none of what it received: a recompute that
// trades one row exchange for [rows, D] per layer held until the backward),
// their output gradients and weights the same way and returns the input
// gradient and, per assignment, the weight's gradient; the experts' weight
// gradients stay on the rank that holds them.
#include "runtime/MoeOps.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/Comm.h"
#include "runtime/ScopedAxis.h"

namespace spmd::runtime {
namespace {

using Stack = torch::jit::Stack;

/// The axis a kernel exchanges over: none (one rank holds every expert).
using Axis = ScopedAxis;

/// This rank's assignments, sorted by expert, and who gets them.
struct Routing {
  at::Tensor token;                             ///< [A] token of each sorted assignment
  at::Tensor order;                             ///< [A] its index in indices.reshape(-1)
  std::vector<int64_t> sendCounts, recvCounts;  ///< rows to / from each rank of the axis
  std::vector<int64_t> perExpert;               ///< rows for each global expert
  at::Tensor recvLocal;                         ///< [sum(recvCounts)] local expert of each received row
};

std::vector<int64_t> toVector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

/// Rows of `send` (split by `sendCounts` over the axis ranks) exchanged:
/// returns what the ranks sent here, `recvCounts` rows from each.
at::Tensor exchange(const Axis& ax, const at::Tensor& send, const std::vector<int64_t>& sendCounts,
                    const std::vector<int64_t>& recvCounts) {
  at::Tensor in = send.contiguous();
  if (ax.size == 1) return in;
  std::vector<int64_t> shape(in.sizes().begin(), in.sizes().end());
  shape[0] = sum(recvCounts);
  at::Tensor out = at::empty(shape, in.options());
  std::vector<int64_t> outSplits = recvCounts, inSplits = sendCounts;  // c10d may move them away
  auto work = ax.comm->group(ax.index).alltoall_base(out, in, outSplits, inSplits);
  ax.comm->track(work);
  work->wait();
  ax.comm->release(work);
  int64_t row = in.dim() > 1 ? in.numel() / std::max<int64_t>(in.size(0), 1) : 1;
  int64_t own = sendCounts[static_cast<size_t>(ax.coord)];
  ax.comm->stats().collectives += 1;
  int64_t bytes = (in.size(0) - own) * row * static_cast<int64_t>(in.element_size());
  ax.comm->stats().bytesSent += bytes;
  ax.comm->stats().moeBytesSent += bytes;
  return out;
}

Routing route(const Axis& ax, const at::Tensor& indices, int64_t experts) {
  TORCH_CHECK(indices.dim() == 2, "indices must be [tokens, k], got ", indices.sizes());
  TORCH_CHECK(experts % ax.size == 0, experts, " experts do not divide over ", ax.size, " ranks");
  Routing r;
  at::Tensor flat = indices.reshape(-1).to(at::kLong);
  // One copy to the host for this rank's routing: the rows per expert and
  // the number of indices outside [0, experts) (a GPU run syncs here once,
  // as torch's all_to_all_single needs its split sizes on the host).
  at::Tensor outside = at::logical_or(flat < 0, flat >= experts).sum().to(at::kLong).reshape({1});
  std::vector<int64_t> counts =
      toVector(at::cat({at::bincount(flat.clamp(0, experts - 1), {}, experts), outside}));
  TORCH_CHECK(counts.back() == 0, "an expert index is outside [0, ", experts, ")");
  counts.pop_back();
  r.perExpert = counts;
  r.order = at::argsort(flat, /*stable=*/true);
  r.token = at::floor_divide(r.order, indices.size(1));
  int64_t local = experts / ax.size;
  r.sendCounts.assign(static_cast<size_t>(ax.size), 0);
  for (int64_t e = 0; e < experts; ++e)
    r.sendCounts[static_cast<size_t>(e / local)] += r.perExpert[static_cast<size_t>(e)];
  // The counts exchange, per expert as torchtitan's: its result sizes the
  // all-to-alls (the second host copy), and since each sender's rows come
  // sorted by expert it also names the local expert of every received row,
  // so no expert ids travel with the rows.
  std::vector<int64_t> recvPerExpert = r.perExpert;
  if (ax.size > 1) {
    std::vector<int64_t> splits(static_cast<size_t>(ax.size), local);
    recvPerExpert = toVector(exchange(ax, at::tensor(r.perExpert, at::kLong), splits, splits));
  }
  r.recvCounts.assign(static_cast<size_t>(ax.size), 0);
  for (size_t i = 0; i < recvPerExpert.size(); ++i)
    r.recvCounts[i / static_cast<size_t>(local)] += recvPerExpert[i];
  r.recvLocal = at::repeat_interleave(at::arange(local, at::kLong).repeat({ax.size}),
                                      at::tensor(recvPerExpert, at::kLong))
                    .to(flat.device());
  return r;
}

/// The strings of a str[]? argument (none for None).
std::vector<std::string> strings(const c10::IValue& list) {
  std::vector<std::string> out;
  if (list.isNone()) return out;
  for (const c10::IValue& v : list.toListRef()) out.push_back(v.toStringRef());
  return out;
}

/// Adds this rank's tokens per expert to its statistics (spmd-run's
/// summary); nothing outside a distributed run, nor on a rank whose tokens
/// another rank counts: one off coordinate 0 of an axis in `replicas`, the
/// axes over which the tokens are replicated (tp inside the experts).
void countTokens(const std::vector<int64_t>& perExpert, const std::vector<std::string>& replicas) {
  MeshComm* c = CollectiveScope::current();
  if (!c) return;
  for (const std::string& name : replicas)
    if (scopedAxis(name, "spmd.moe_experts").coord != 0) return;
  std::vector<int64_t>& total = c->stats().expertTokens;
  if (total.size() < perExpert.size()) total.resize(perExpert.size(), 0);
  for (size_t e = 0; e < perExpert.size(); ++e) total[e] += perExpert[e];
}

/// Rows of each local expert j: indices into the received rows. One host
/// copy (the rows per local expert) rather than one nonzero per expert.
std::vector<at::Tensor> rowsPerExpert(const at::Tensor& localExpert, int64_t numLocal) {
  at::Tensor ids = localExpert.to(at::kLong);
  std::vector<int64_t> counts = toVector(at::bincount(ids, {}, numLocal));
  at::Tensor sorted = at::argsort(ids, /*stable=*/true);
  std::vector<at::Tensor> rows;
  int64_t start = 0;
  for (int64_t n : counts) {
    rows.push_back(sorted.narrow(0, start, n));
    start += n;
  }
  return rows;
}

/// FFN_j of rows `x` [R, D] for every local expert j (w1 [El, H, D], ...).
at::Tensor expertsForward(const at::Tensor& x, const at::Tensor& localExpert, const at::Tensor& w1,
                          const at::Tensor& w2, const at::Tensor& w3) {
  at::Tensor y = at::zeros({x.size(0), w2.size(1)}, x.options());
  auto rows = rowsPerExpert(localExpert, w1.size(0));
  for (int64_t j = 0; j < w1.size(0); ++j) {
    const at::Tensor& r = rows[static_cast<size_t>(j)];
    if (r.numel() == 0) continue;
    at::Tensor v = x.index_select(0, r);
    at::Tensor a = at::silu(at::matmul(v, w1[j].t())) * at::matmul(v, w3[j].t());
    y.index_copy_(0, r, at::matmul(a, w2[j].t()));
  }
  return y;
}

/// What expertsBackward computes for the received rows.
struct RowGrads {
  at::Tensor x;       ///< [R, D] gradient of each row's input
  at::Tensor weight;  ///< [R] gradient of each row's routing weight: <grad, FFN(x)>
  at::Tensor w1, w2, w3;
};

/// Gradients of weight * FFN_j(x) for rows x [R, D] with output gradients
/// `grad` [R, D] and routing weights `weight` [R].
RowGrads expertsBackward(const at::Tensor& x, const at::Tensor& grad, const at::Tensor& weight,
                         const at::Tensor& localExpert, const at::Tensor& w1, const at::Tensor& w2,
                         const at::Tensor& w3) {
  RowGrads g{at::zeros_like(x), at::zeros({x.size(0)}, x.options()), at::zeros_like(w1), at::zeros_like(w2),
             at::zeros_like(w3)};
  auto rows = rowsPerExpert(localExpert, w1.size(0));
  for (int64_t j = 0; j < w1.size(0); ++j) {
    const at::Tensor& r = rows[static_cast<size_t>(j)];
    if (r.numel() == 0) continue;
    at::Tensor v = x.index_select(0, r), g0 = grad.index_select(0, r);
    at::Tensor gy = g0 * weight.index_select(0, r).to(x.scalar_type()).unsqueeze(1);
    at::Tensor h1 = at::matmul(v, w1[j].t()), h3 = at::matmul(v, w3[j].t());
    at::Tensor s = at::silu(h1), a = s * h3;
    g.weight.index_copy_(0, r, (g0 * at::matmul(a, w2[j].t())).sum(1));
    g.w2[j].copy_(at::matmul(gy.t(), a));
    at::Tensor ga = at::matmul(gy, w2[j]);
    at::Tensor sig = at::sigmoid(h1);
    at::Tensor gh1 = ga * h3 * sig * (1 + h1 * (1 - sig)), gh3 = ga * s;
    g.w1[j].copy_(at::matmul(gh1.t(), v));
    g.w3[j].copy_(at::matmul(gh3.t(), v));
    g.x.index_copy_(0, r, at::matmul(gh1, w1[j]) + at::matmul(gh3, w3[j]));
  }
  return g;
}

/// Forward on `ax`: dispatch, local experts, combine.
at::Tensor forward(const Axis& ax, const at::Tensor& x, const at::Tensor& indices, const at::Tensor& weights,
                   const at::Tensor& w1, const at::Tensor& w2, const at::Tensor& w3, int64_t experts,
                   const std::vector<std::string>& replicas) {
  TORCH_CHECK(x.dim() == 2 && w1.dim() == 3 && w2.dim() == 3 && w3.dim() == 3,
              "expected x [tokens, hidden] and stacked w1, w2, w3 [experts, ...]");
  TORCH_CHECK(w1.size(0) * ax.size == experts, "w1 holds ", w1.size(0), " experts, expected ",
              experts / ax.size);
  Routing r = route(ax, indices, experts);
  countTokens(r.perExpert, replicas);
  at::Tensor rows = exchange(ax, x.index_select(0, r.token), r.sendCounts, r.recvCounts);
  at::Tensor y = expertsForward(rows, r.recvLocal, w1, w2, w3);
  at::Tensor back = exchange(ax, y, r.recvCounts, r.sendCounts);
  if (ax.size > 1) {  // torchtitan: tokens out, results back; their gradients the same way in the backward
    int64_t out = sum(r.sendCounts) - r.sendCounts[static_cast<size_t>(ax.coord)];
    int64_t in = sum(r.recvCounts) - r.recvCounts[static_cast<size_t>(ax.coord)];
    ax.comm->stats().moeTorchtitanBytes +=
        2 * (out + in) * x.size(1) * static_cast<int64_t>(x.element_size());
  }
  at::Tensor w = weights.reshape(-1).index_select(0, r.order).to(x.scalar_type()).unsqueeze(1);
  return at::zeros_like(x).index_add_(0, r.token, back * w);
}

/// Backward on `ax`: the gradients of x, weights, w1, w2, w3.
std::vector<at::Tensor> backward(const Axis& ax, const at::Tensor& grad, const at::Tensor& x,
                                 const at::Tensor& indices, const at::Tensor& weights, const at::Tensor& w1,
                                 const at::Tensor& w2, const at::Tensor& w3, int64_t experts) {
  TORCH_CHECK(w1.size(0) * ax.size == experts, "w1 holds ", w1.size(0), " experts, expected ",
              experts / ax.size);
  Routing r = route(ax, indices, experts);
  auto send = [&](const at::Tensor& t) { return exchange(ax, t, r.sendCounts, r.recvCounts); };
  at::Tensor rows = send(x.index_select(0, r.token));
  at::Tensor grads = send(grad.index_select(0, r.token));
  at::Tensor w = send(weights.reshape(-1).index_select(0, r.order));
  RowGrads g = expertsBackward(rows, grads, w, r.recvLocal, w1, w2, w3);
  at::Tensor gx = exchange(ax, g.x, r.recvCounts, r.sendCounts);
  at::Tensor gw = exchange(ax, g.weight, r.recvCounts, r.sendCounts);
  at::Tensor gradX = at::zeros_like(x).index_add_(0, r.token, gx);
  at::Tensor gradW = at::zeros({weights.numel()}, weights.options());
  gradW.index_copy_(0, r.order, gw.to(weights.scalar_type()));
  return {gradX, gradW.reshape(weights.sizes()), g.w1, g.w2, g.w3};
}

// Boxed kernels. Arguments: x, indices, weights, w1, w2, w3[, axis, experts], replicas.
template <bool kSharded>
void forwardKernel(Stack& s) {
  c10::InferenceMode normalTensors(false);  // c10d's threads write the exchanged buffers
  constexpr size_t kArgs = kSharded ? 9 : 7;
  auto a = torch::jit::last(s, kArgs);
  Axis ax = kSharded ? scopedAxis(a[6].toStringRef(), "spmd.moe_experts") : Axis{};
  const at::Tensor& w1 = a[3].toTensor();
  int64_t experts = kSharded ? a[7].toInt() : w1.size(0);
  at::Tensor out = forward(ax, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), w1, a[4].toTensor(),
                           a[5].toTensor(), experts, strings(a[kArgs - 1]));
  torch::jit::drop(s, kArgs);
  s.emplace_back(std::move(out));
}

// Arguments: grad, x, indices, weights, w1, w2, w3[, axis, experts].
template <bool kSharded>
void backwardKernel(Stack& s) {
  c10::InferenceMode normalTensors(false);
  constexpr size_t kArgs = kSharded ? 9 : 7;
  auto a = torch::jit::last(s, kArgs);
  Axis ax = kSharded ? scopedAxis(a[7].toStringRef(), "spmd.moe_experts_backward") : Axis{};
  const at::Tensor& w1 = a[4].toTensor();
  int64_t experts = kSharded ? a[8].toInt() : w1.size(0);
  auto out = backward(ax, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(), w1,
                      a[5].toTensor(), a[6].toTensor(), experts);
  torch::jit::drop(s, kArgs);
  for (at::Tensor& t : out) s.emplace_back(std::move(t));
}

#define SPMD_MOE_ARGS "Tensor x, Tensor indices, Tensor weights, Tensor w1, Tensor w2, Tensor w3"
#define SPMD_MOE_GRADS "(Tensor, Tensor, Tensor, Tensor, Tensor)"
const LocalOpDef kMoeOps[] = {
    {"spmdc.moe_experts.default", "spmdc::moe_experts(" SPMD_MOE_ARGS ", str[]? replicas=None) -> Tensor",
     forwardKernel<false>},
    {"spmdc.moe_experts_backward.default",
     "spmdc::moe_experts_backward(Tensor grad, " SPMD_MOE_ARGS ") -> " SPMD_MOE_GRADS, backwardKernel<false>},
    {"spmd.moe_experts",
     "spmd::moe_experts(" SPMD_MOE_ARGS ", str axis, int experts, str[]? replicas=None) -> Tensor",
     forwardKernel<true>},
    {"spmd.moe_experts_backward",
     "spmd::moe_experts_backward(Tensor grad, " SPMD_MOE_ARGS ", str axis, int experts) -> " SPMD_MOE_GRADS,
     backwardKernel<true>},
};
#undef SPMD_MOE_ARGS
#undef SPMD_MOE_GRADS

}  // namespace

const LocalOp* findMoeOp(std::string_view target) { return findLocalOp<kMoeOps>(target); }

}  // namespace spmd::runtime
