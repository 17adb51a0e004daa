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
// With load_balance (the sequence in 2n chunks, rank r holding chunks r and
// 2n-1-r: ContextParallelBalance.cpp) each block is computed in part
// instead (partOf): every rank the same number of scores.
// Which blocks are skipped follows from the causal flag and the block
// indices alone: nothing is read back from the device (no host sync per
// block). An explicit mask adds the block's columns of the rank's mask
// rows, and every block is computed: a block masked whole (-inf, or HF's
// finfo.min) adds exactly nothing (its probabilities are e^-inf = 0, its
// log-sum-exp leaves the running one unchanged: logaddexp(x, -inf) = x,
// out * e^0 + 0), so results are those of skipping it. Mask columns
// follow the block's chunks (two pieces when load-balanced).
//
// The backward rotates the keys and values the same way (n - 1 sends) and
// with them the partial dK / dV of the block: after its step the rank sends
// them to rank r + 1, which works on the same block at the next step and
// adds its part; the last step's send brings each block's gradients home
// (n sends of dK and dV). Keys and values cross the ring in their own
// dtype (bf16 models send half the bytes, as torch's ring); only the part
// of a block a rank computes is converted to float32 and computed so, and
// the travelling dK / dV stay float32 (torch's convert_to_f32). Gradients
// are those of torch's math attention:
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

/// The part of block `j` (the keys and values rank `j` held first) that
/// this rank's queries compute: query rows [q0, q0 + qn), key rows
/// [k0, k0 + kn), the causal triangle on the diagonal; none when masked
/// whole.
///
/// Contiguous chunks: causal skips j > r and masks the diagonal j = r.
/// Load-balanced (torch's _HeadTailLoadBalancer): the sequence is cut into
/// 2n chunks of h rows and rank r holds chunks r and 2n-1-r, in that order;
/// causal: the own block is one triangle (its two chunks ascend), a block
/// j < r is every query against its head chunk j (its tail 2n-1-j lies
/// after both of ours), a block j > r is our tail chunk against both of its
/// chunks (both lie before it and after our head): each rank computes the
/// same 2h x 2h + (n-1) 2h x h scores.
struct Part {
  int64_t q0 = 0, qn = 0, k0 = 0, kn = 0;
  bool diagonal = false;
};

struct Layout {
  int64_t rank = 0, ranks = 1;
  bool causal = false, balanced = false;
  /// kv_dtype: the dtype K and V cross the ring in (float32 keys and values
  /// the compiler proved to be fl(scale * x) of bf16 / f16 values x: they
  /// cross as x = half(k / scale), and fl(scale * x) is k bit for bit);
  /// else their own.
  std::optional<at::ScalarType> wire;
  double keyScale = 1.0, valueScale = 1.0;
};

/// A key or value block as it crosses the ring.
at::Tensor toWire(const at::Tensor& t, const Layout& l, double scale) {
  if (!l.wire) return t;
  return (scale == 1.0 ? t : t.div(scale)).to(*l.wire);
}

std::optional<Part> partOf(const Layout& l, int64_t j, int64_t rows, int64_t cols) {
  Part p{0, rows, 0, cols, l.causal && j == l.rank};
  if (!l.causal || j == l.rank) return p;
  if (!l.balanced) {
    if (j > l.rank) return std::nullopt;
    return p;
  }
  if (j < l.rank)
    p.kn = cols / 2;
  else
    p.q0 = rows / 2, p.qn = rows / 2;
  return p;
}

/// Block `j`'s columns of the mask rows [q0, q0 + qn): contiguous chunk j,
/// or (load-balanced) the block's head and tail chunks; a mask broadcast
/// over the keys (size 1) as it is.
at::Tensor maskPart(const at::Tensor& mask, const Layout& l, int64_t j, const Part& p, int64_t cols) {
  at::Tensor m = mask.size(-2) == 1 ? mask : mask.narrow(-2, p.q0, p.qn);
  if (m.size(-1) == 1) return m;
  if (!l.balanced) return m.narrow(-1, j * cols, cols).narrow(-1, p.k0, p.kn);
  int64_t h = cols / 2;
  at::Tensor both = at::cat({m.narrow(-1, j * h, h), m.narrow(-1, (2 * l.ranks - 1 - j) * h, h)}, -1);
  return both.narrow(-1, p.k0, p.kn);
}

/// The scores of the part `p` of block `j` (scaled, masked); `cols` is the
/// whole block's key rows.
at::Tensor scores(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& mask,
                  double scale, const Layout& l, int64_t j, const Part& p, int64_t cols) {
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  if (mask) s.add_(maskPart(*mask, l, j, p, cols));
  if (p.diagonal) {
    at::Tensor above = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).triu_(1);
    s.masked_fill_(above, -std::numeric_limits<double>::infinity());
  }
  return s;
}

/// The key rows of part `p` of a key or value block, in float32 (and
/// scaled back, see Layout::wire): only what the part computes is converted
/// (a skipped block, or the half a load-balanced block leaves, stays in the
/// dtype it crossed the ring in).
at::Tensor toFloat(const at::Tensor& block, const Part& p, const Layout& l, double scale) {
  at::Tensor f = block.narrow(-2, p.k0, p.kn).to(at::kFloat);
  return l.wire && scale != 1.0 ? f.mul(scale) : f;
}

/// Counts the scores a part computes (per-rank work, --profile's
/// ring_attention_scores).
void countScores(const ScopedAxis& ring, const at::Tensor& s) {
  if (ring.comm) ring.comm->stats().ringScores += s.numel();
}

/// `x` with its -inf entries as 0 (a row masked whole subtracts nothing).
at::Tensor finite(const at::Tensor& x) { return x.masked_fill(at::isneginf(x), 0); }

/// Forward: (out, lse) of this rank's queries against every key block.
std::vector<at::Tensor> forward(const Ring& ring, const at::Tensor& q0, const at::Tensor& k0,
                                const at::Tensor& v0, const std::optional<at::Tensor>& mask0, double scale,
                                const Layout& l) {
  // K and V rotate in their dtype (as torch's ring); what a rank computes of a block, in float32.
  at::Tensor q = q0.to(at::kFloat), kx = toWire(k0, l, l.keyScale), vx = toWire(v0, l, l.valueScale);
  std::optional<at::Tensor> mask = additive(mask0);
  if (mask) mask = mask->to(at::kFloat);
  std::vector<int64_t> outShape = q.sizes().vec();
  outShape.back() = v0.size(-1);
  at::Tensor out = at::zeros(outShape, q.options());
  at::Tensor lse =
      at::full(q.sizes().slice(0, q.dim() - 1), -std::numeric_limits<double>::infinity(), q.options());
  for (int64_t i = 0; i < ring.size; ++i) {
    int64_t j = (ring.coord - i + ring.size) % ring.size;
    std::optional<Exchange> next;
    if (i + 1 < ring.size) next.emplace(ring, std::vector<at::Tensor>{kx, vx}, kKvTag);
    if (auto p = partOf(l, j, q.size(-2), kx.size(-2))) {
      at::Tensor s = scores(q.narrow(-2, p->q0, p->qn), toFloat(kx, *p, l, l.keyScale), mask, scale, l, j, *p,
                            kx.size(-2));
      countScores(ring, s);
      at::Tensor blockLse = at::logsumexp(s, -1);
      at::Tensor blockOut =
          at::matmul(s.sub_(finite(blockLse).unsqueeze(-1)).exp_(), toFloat(vx, *p, l, l.valueScale));
      s.reset();
      at::Tensor o = out.narrow(-2, p->q0, p->qn), e = lse.narrow(-1, p->q0, p->qn);
      at::Tensor both = at::logaddexp(e, blockLse), base = finite(both);
      o.copy_(o * at::exp(e - base).unsqueeze(-1) + blockOut * at::exp(blockLse - base).unsqueeze(-1));
      e.copy_(both);
    }
    if (next) {
      auto kv = next->wait();
      kx = kv[0], vx = kv[1];
    }
  }
  return {out.to(q0.scalar_type()), lse};
}

/// Backward: (dq, dk, dv) of this rank's blocks.
std::vector<at::Tensor> backward(const Ring& ring, const at::Tensor& grad0, const at::Tensor& q0,
                                 const at::Tensor& k0, const at::Tensor& v0,
                                 const std::optional<at::Tensor>& mask0, const at::Tensor& out0,
                                 const at::Tensor& lse0, double scale, const Layout& l) {
  // K and V rotate in their dtype, the travelling dK and dV in float32 (torch's convert_to_f32).
  at::Tensor dout = grad0.to(at::kFloat), q = q0.to(at::kFloat), kx = toWire(k0, l, l.keyScale),
             vx = toWire(v0, l, l.valueScale);
  std::optional<at::Tensor> mask = additive(mask0);
  if (mask) mask = mask->to(at::kFloat);
  at::Tensor lse = finite(lse0.to(at::kFloat)).unsqueeze(-1);
  at::Tensor rowDot = (dout * out0.to(at::kFloat)).sum(-1, /*keepdim=*/true);
  at::Tensor dq = at::zeros_like(q);
  std::optional<Exchange> grads;  // the previous step's block gradients, on their way here
  for (int64_t i = 0; i < ring.size; ++i) {
    int64_t j = (ring.coord - i + ring.size) % ring.size;
    std::optional<Exchange> next;
    if (i + 1 < ring.size) next.emplace(ring, std::vector<at::Tensor>{kx, vx}, kKvTag);
    at::Tensor dk = at::zeros(kx.sizes(), kx.options().dtype(at::kFloat)),
               dv = at::zeros(vx.sizes(), vx.options().dtype(at::kFloat));
    if (auto pt = partOf(l, j, q.size(-2), kx.size(-2))) {
      auto rows = [&](const at::Tensor& x) { return x.narrow(-2, pt->q0, pt->qn); };
      at::Tensor kp = toFloat(kx, *pt, l, l.keyScale), vp = toFloat(vx, *pt, l, l.valueScale), qp = rows(q);
      at::Tensor p = scores(qp, kp, mask, scale, l, j, *pt, kx.size(-2));
      countScores(ring, p);
      p.sub_(rows(lse)).exp_();  // in place: one [L/cp, S/cp] block at a time
      at::Tensor g = rows(dout);
      dv.narrow(-2, pt->k0, pt->kn).copy_(at::matmul(p.transpose(-2, -1), g));
      at::Tensor ds = at::matmul(g, vp.transpose(-2, -1)).sub_(rows(rowDot)).mul_(p);
      p.reset();
      rows(dq).add_(at::matmul(ds, kp), scale);
      dk.narrow(-2, pt->k0, pt->kn).copy_(at::matmul(ds.transpose(-2, -1), qp).mul_(scale));
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
      kx = kv[0], vx = kv[1];
    }
  }
  std::vector<at::Tensor> dkv = grads->wait();  // the last step's send brought this rank's block home
  return {dq.to(q0.scalar_type()), dkv[0].to(k0.scalar_type()), dkv[1].to(v0.scalar_type())};
}

std::optional<at::Tensor> optionalTensor(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toTensor();
}

// The trailing arguments `a` (mask, load_balance, kv_dtype, key_scale, value_scale).
Layout layoutOf(const Ring& ring, bool causal, c10::ArrayRef<c10::IValue> a) {
  std::optional<at::ScalarType> w;
  if (!a[2].isNone()) w = a[2].toScalarType();
  return {ring.coord, ring.size, causal, a[1].toBool() && ring.size > 1, w, a[3].toDouble(), a[4].toDouble()};
}

// Arguments: q, k, v, scale, causal[, axis], then the trailing five
// (mask, load_balance, kv_dtype, key_scale, value_scale).
constexpr size_t kTrailing = 5;
template <bool kSharded>
void forwardKernel(Stack& s) {
  c10::InferenceMode normalTensors(false);  // c10d's threads write the exchanged buffers
  constexpr size_t kArgs = kSharded ? 11 : 10;
  auto a = torch::jit::last(s, kArgs);
  Ring ring = kSharded ? scopedAxis(a[5].toStringRef(), "spmd.ring_attention") : Ring{};
  auto tail = a.slice(kArgs - kTrailing);
  auto out = forward(ring, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), optionalTensor(tail[0]),
                     a[3].toDouble(), layoutOf(ring, a[4].toBool(), tail));
  torch::jit::drop(s, kArgs);
  for (at::Tensor& t : out) s.emplace_back(std::move(t));
}

// Arguments: grad_out, q, k, v, out, lse, scale, causal[, axis], the trailing five.
template <bool kSharded>
void backwardKernel(Stack& s) {
  c10::InferenceMode normalTensors(false);
  constexpr size_t kArgs = kSharded ? 14 : 13;
  auto a = torch::jit::last(s, kArgs);
  Ring ring = kSharded ? scopedAxis(a[8].toStringRef(), "spmd.ring_attention_backward") : Ring{};
  auto tail = a.slice(kArgs - kTrailing);
  auto out = backward(ring, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(),
                      optionalTensor(tail[0]), a[4].toTensor(), a[5].toTensor(), a[6].toDouble(),
                      layoutOf(ring, a[7].toBool(), tail));
  torch::jit::drop(s, kArgs);
  for (at::Tensor& t : out) s.emplace_back(std::move(t));
}

// The mask is optional, after the axis of the sharded form; then
// load_balance (the sequence in head + tail chunks,
// ContextParallelBalance.cpp) and kv_dtype with the keys' and values'
// scalings (ContextParallelRing.cpp: halfSource).
#define SPMD_RING_ARGS "Tensor query, Tensor key, Tensor value, float scale, bool causal"
#define SPMD_RING_BWD_ARGS                                                                              \
  "Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, Tensor lse, float scale, bool " \
  "causal"
#define SPMD_RING_MASK                                                                                 \
  "Tensor? mask=None, bool load_balance=False, ScalarType? kv_dtype=None, float key_scale=1.0, float " \
  "value_scale=1.0"
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
