// Kernels of the ring-attention ops (see RingAttentionOps.h).
//
// On an axis of n ranks, rank r holds query block r and, at first, key /
// value block r (contiguous sequence chunks). Step i (0 <= i < n) works on
// key / value block j = (r - i) mod n: before computing it the rank posts
// the send of the block it holds to rank r + 1 and the receive of the next
// one from rank r - 1 (point-to-point, overlapped with the block's
// compute), so keys and values cross the ring n - 1 times per forward.
// Partial outputs combine with the log-sum-exp rescaling:
//
//   lse' = logaddexp(lse, lse_j);  out' = out e^(lse - lse') + out_j e^(lse_j - lse')
//
// Causal: blocks j > r are skipped, the diagonal block j = r is masked
// (its local positions are the global ones shifted by the same offset).
// Which blocks are skipped follows from the causal flag and the block
// indices alone: nothing is read back from the device (no host sync per
// block). An explicit mask adds the block's columns of the rank's mask
// rows, and every block is computed: a block masked whole (-inf, or HF's
// finfo.min) adds exactly nothing (its probabilities are e^-inf = 0, its
// log-sum-exp leaves the running one unchanged: logaddexp(x, -inf) = x,
// out * e^0 + 0), so results are those of skipping it. Without
// load-balanced chunks the last rank computes every block anyway, so the
// step (bounded by the slowest rank, each step waiting on its neighbour)
// takes no longer.
//
// The backward rotates the keys and values the same way (n - 1 sends) and
// with them the partial dK / dV of the block: after its step the rank sends
// them to rank r + 1, which works on the same block at the next step and
// adds its part; the last step's send brings each block's gradients home
// (n sends of dK and dV). Gradients are those of torch's math attention:
// P = e^(S - lse), dV = P^T dO, dS = P (dO V^T - rowsum(dO out)).
#include "runtime/RingAttentionOps.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/Comm.h"
#include "runtime/ScopedAxis.h"

namespace spmd::runtime {
namespace {

using Stack = torch::jit::Stack;

/// The ring: this rank's coordinate on the axis, and the axis's size.
using Ring = ScopedAxis;

/// One point-to-point exchange in flight: `tensors` flattened into one
/// buffer sent to the next rank, the same shapes received from the previous.
class Exchange {
 public:
  Exchange(const Ring& ring, const std::vector<at::Tensor>& tensors, int tag) : ring_(ring) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : tensors) {
      flat.push_back(t.contiguous().reshape(-1));
      shapes_.push_back(t.sizes().vec());
    }
    send_ = {at::cat(flat)};
    recv_ = {at::empty_like(send_[0])};
    int next = static_cast<int>((ring.coord + 1) % ring.size);
    int prev = static_cast<int>((ring.coord + ring.size - 1) % ring.size);
    c10d::Backend& g = ring.comm->group(ring.index);
    sendWork_ = g.send(send_, next, tag);
    recvWork_ = g.recv(recv_, prev, tag);
    ring.comm->track(sendWork_);
    ring.comm->track(recvWork_);
    ring.comm->stats().collectives += 1;
    ring.comm->stats().bytesSent += send_[0].numel() * static_cast<int64_t>(send_[0].element_size());
  }

  /// Waits for both directions; returns what the previous rank sent.
  std::vector<at::Tensor> wait() {
    sendWork_->wait();
    recvWork_->wait();
    ring_.comm->release(sendWork_);
    ring_.comm->release(recvWork_);
    std::vector<at::Tensor> out;
    int64_t offset = 0;
    for (const auto& shape : shapes_) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      out.push_back(recv_[0].narrow(0, offset, n).view(shape));
      offset += n;
    }
    return out;
  }

 private:
  Ring ring_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<at::Tensor> send_, recv_;
  c10::intrusive_ptr<c10d::Work> sendWork_, recvWork_;
};

constexpr int kKvTag = 7301;
constexpr int kGradTag = 7302;

/// An additive float mask (a bool mask: true keeps, false masks).
std::optional<at::Tensor> additive(const std::optional<at::Tensor>& mask) {
  if (!mask || mask->scalar_type() != at::kBool) return mask;
  return at::zeros(mask->sizes(), at::kFloat)
      .masked_fill_(mask->logical_not(), -std::numeric_limits<float>::infinity());
}

/// The scores of query block `r` against key block `j` (scaled, masked),
/// or nothing when the causal structure masks the block whole.
std::optional<at::Tensor> scores(const at::Tensor& q, const at::Tensor& k,
                                 const std::optional<at::Tensor>& mask, double scale, bool causal, int64_t r,
                                 int64_t j) {
  if (causal && j > r) return std::nullopt;
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  if (mask) {
    int64_t cols = k.size(-2);
    s.add_(mask->size(-1) == 1 ? *mask : mask->narrow(-1, j * cols, cols));
  }
  if (causal && j == r) {
    at::Tensor above = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).triu_(1);
    s.masked_fill_(above, -std::numeric_limits<double>::infinity());
  }
  return s;
}

/// `x` with its -inf entries as 0 (a row masked whole subtracts nothing).
at::Tensor finite(const at::Tensor& x) { return x.masked_fill(at::isneginf(x), 0); }

/// Forward: (out, lse) of this rank's queries against every key block.
std::vector<at::Tensor> forward(const Ring& ring, const at::Tensor& q0, const at::Tensor& k0,
                                const at::Tensor& v0, const std::optional<at::Tensor>& mask0, double scale,
                                bool causal) {
  at::Tensor q = q0.to(at::kFloat), k = k0.to(at::kFloat), v = v0.to(at::kFloat);
  std::optional<at::Tensor> mask = additive(mask0);
  if (mask) mask = mask->to(at::kFloat);
  std::vector<int64_t> outShape = q.sizes().vec();
  outShape.back() = v.size(-1);
  at::Tensor out = at::zeros(outShape, q.options());
  at::Tensor lse =
      at::full(q.sizes().slice(0, q.dim() - 1), -std::numeric_limits<double>::infinity(), q.options());
  for (int64_t i = 0; i < ring.size; ++i) {
    int64_t j = (ring.coord - i + ring.size) % ring.size;
    std::optional<Exchange> next;
    if (i + 1 < ring.size) next.emplace(ring, std::vector<at::Tensor>{k, v}, kKvTag);
    if (auto s = scores(q, k, mask, scale, causal, ring.coord, j)) {
      at::Tensor blockLse = at::logsumexp(*s, -1);
      at::Tensor blockOut = at::matmul(s->sub_(finite(blockLse).unsqueeze(-1)).exp_(), v);
      s.reset();
      at::Tensor both = at::logaddexp(lse, blockLse), base = finite(both);
      out = out * at::exp(lse - base).unsqueeze(-1) + blockOut * at::exp(blockLse - base).unsqueeze(-1);
      lse = both;
    }
    if (next) {
      auto kv = next->wait();
      k = kv[0], v = kv[1];
    }
  }
  return {out.to(q0.scalar_type()), lse};
}

/// Backward: (dq, dk, dv) of this rank's blocks.
std::vector<at::Tensor> backward(const Ring& ring, const at::Tensor& grad0, const at::Tensor& q0,
                                 const at::Tensor& k0, const at::Tensor& v0,
                                 const std::optional<at::Tensor>& mask0, const at::Tensor& out0,
                                 const at::Tensor& lse0, double scale, bool causal) {
  at::Tensor dout = grad0.to(at::kFloat), q = q0.to(at::kFloat), k = k0.to(at::kFloat), v = v0.to(at::kFloat);
  std::optional<at::Tensor> mask = additive(mask0);
  if (mask) mask = mask->to(at::kFloat);
  at::Tensor lse = finite(lse0.to(at::kFloat)).unsqueeze(-1);
  at::Tensor rowDot = (dout * out0.to(at::kFloat)).sum(-1, /*keepdim=*/true);
  at::Tensor dq = at::zeros_like(q);
  std::optional<Exchange> grads;  // the previous step's block gradients, on their way here
  for (int64_t i = 0; i < ring.size; ++i) {
    int64_t j = (ring.coord - i + ring.size) % ring.size;
    std::optional<Exchange> next;
    if (i + 1 < ring.size) next.emplace(ring, std::vector<at::Tensor>{k, v}, kKvTag);
    at::Tensor dk = at::zeros_like(k), dv = at::zeros_like(v);
    if (auto s = scores(q, k, mask, scale, causal, ring.coord, j)) {
      at::Tensor p = s->sub_(lse).exp_();  // in place: one [L/cp, S/cp] block at a time
      s.reset();
      dv = at::matmul(p.transpose(-2, -1), dout);
      at::Tensor ds = at::matmul(dout, v.transpose(-2, -1)).sub_(rowDot).mul_(p);
      p.reset();
      dq.add_(at::matmul(ds, k), scale);
      dk = at::matmul(ds.transpose(-2, -1), q).mul_(scale);
    }
    if (grads) {  // the partial gradients of block j from the ranks before
      auto g = grads->wait();
      dk.add_(g[0]);
      dv.add_(g[1]);
    }
    if (ring.size == 1) return {dq.to(q0.scalar_type()), dk.to(k0.scalar_type()), dv.to(v0.scalar_type())};
    grads.emplace(ring, std::vector<at::Tensor>{dk, dv}, kGradTag);
    if (next) {
      auto kv = next->wait();
      k = kv[0], v = kv[1];
    }
  }
  std::vector<at::Tensor> dkv = grads->wait();  // the last step's send brought this rank's block home
  return {dq.to(q0.scalar_type()), dkv[0].to(k0.scalar_type()), dkv[1].to(v0.scalar_type())};
}

std::optional<at::Tensor> optionalTensor(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toTensor();
}

// Arguments: q, k, v, scale, causal[, axis], mask.
template <bool kSharded>
void forwardKernel(Stack& s) {
  c10::InferenceMode normalTensors(false);  // c10d's threads write the exchanged buffers
  constexpr size_t kArgs = kSharded ? 7 : 6;
  auto a = torch::jit::last(s, kArgs);
  Ring ring = kSharded ? scopedAxis(a[5].toStringRef(), "spmd.ring_attention") : Ring{};
  auto out = forward(ring, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), optionalTensor(a[kArgs - 1]),
                     a[3].toDouble(), a[4].toBool());
  torch::jit::drop(s, kArgs);
  for (at::Tensor& t : out) s.emplace_back(std::move(t));
}

// Arguments: grad_out, q, k, v, out, lse, scale, causal[, axis], mask.
template <bool kSharded>
void backwardKernel(Stack& s) {
  c10::InferenceMode normalTensors(false);
  constexpr size_t kArgs = kSharded ? 10 : 9;
  auto a = torch::jit::last(s, kArgs);
  Ring ring = kSharded ? scopedAxis(a[8].toStringRef(), "spmd.ring_attention_backward") : Ring{};
  auto out = backward(ring, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(),
                      optionalTensor(a[kArgs - 1]), a[4].toTensor(), a[5].toTensor(), a[6].toDouble(),
                      a[7].toBool());
  torch::jit::drop(s, kArgs);
  for (at::Tensor& t : out) s.emplace_back(std::move(t));
}

// The mask is the last argument: optional, after the axis of the sharded form.
#define SPMD_RING_ARGS "Tensor query, Tensor key, Tensor value, float scale, bool causal"
#define SPMD_RING_BWD_ARGS                                                                              \
  "Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, Tensor lse, float scale, bool " \
  "causal"
#define SPMD_RING_MASK "Tensor? mask=None"
const LocalOpDef kRingOps[] = {
    {"spmdc.ring_attention.default",
     "spmdc::ring_attention(" SPMD_RING_ARGS ", " SPMD_RING_MASK ") -> (Tensor, Tensor)",
     forwardKernel<false>},
    {"spmdc.ring_attention_backward.default",
     "spmdc::ring_attention_backward(" SPMD_RING_BWD_ARGS ", " SPMD_RING_MASK ") -> (Tensor, Tensor, Tensor)",
     backwardKernel<false>},
    {"spmd.ring_attention",
     "spmd::ring_attention(" SPMD_RING_ARGS ", str axis, " SPMD_RING_MASK ") -> (Tensor, Tensor)",
     forwardKernel<true>},
    {"spmd.ring_attention_backward",
     "spmd::ring_attention_backward(" SPMD_RING_BWD_ARGS ", str axis, " SPMD_RING_MASK
     ") -> (Tensor, Tensor, Tensor)",
     backwardKernel<true>},
};
#undef SPMD_RING_ARGS
#undef SPMD_RING_BWD_ARGS
#undef SPMD_RING_MASK

}  // namespace

const LocalOp* findRingAttentionOp(std::string_view target) { return findLocalOp<kRingOps>(target); }

}  // namespace spmd::runtime
