// Kernels of the spmd.* ops (see ir/Collectives.h):
//
//   spmd.all_reduce(%x, "tp", "sum")             -> allreduce on this rank's tp group
//   spmd.all_gather(%x, "dp", 0)                 -> [n, *local] buffer, moved into dim 0
//   spmd.all_gather(%x, "tp", 0, split_factor=2) -> dim 0 viewed as [2, c]; gathered inside
//   spmd.reduce_scatter(%x, "tp", 0, "sum")      -> the group's reduce_scatter (NCCL, Gloo in torch 2.x);
//                                                   allreduce + narrow where a backend has none
//   spmd.all_to_all(%x, "tp", 1, 0)              -> alltoall_base over stacked chunks
//   spmd.all_gather(%x, "tp", 0, size=5)         -> uneven (torch.chunk 2,2,1,0): padded to 2, unpadded
//   spmd.local_size(5, "[S(0)]", 0)              -> this rank's size (2, 2, 1 or 0 on 4 ranks)
//   spmd.global_symbol("s52")                    -> the symbol's value, bound from the global inputs
//   spmd.local_slice / spmd.zero_partial          -> local, from the rank's axis coordinate
//   spmd.vocab_embedding(%w, %i, "[S(0)]", 256)   -> lookup of the rows held, zeros elsewhere
//   spmd.wait(%r)                                 -> completes an async collective
//
// With async=true a kernel returns the buffer at once and registers the
// work with the MeshComm; spmd.wait finishes it. Avg reductions sum, then
// divide by the group size (Gloo has no average).
#include "runtime/CollectiveOps.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "runtime/Comm.h"
#include "runtime/GatherPool.h"

namespace spmd::runtime {
namespace {

using Stack = torch::jit::Stack;

MeshComm& comm() {
  MeshComm* c = CollectiveScope::current();
  if (!c)
    throw std::runtime_error(
        "collective op outside a distributed run: this program needs spmd-run -n <ranks>");
  return *c;
}

int64_t axisOf(MeshComm& c, const std::string& name) {
  int64_t a = c.axisIndex(name);
  if (a < 0) throw std::runtime_error("mesh has no axis '" + name + "'");
  return a;
}

struct Reduce {
  c10d::ReduceOp op;
  bool avg = false;
};

Reduce reduceOf(const std::string& s) {
  if (s == "sum") return {c10d::ReduceOp::SUM, false};
  if (s == "avg") return {c10d::ReduceOp::SUM, true};
  if (s == "max") return {c10d::ReduceOp::MAX, false};
  if (s == "min") return {c10d::ReduceOp::MIN, false};
  throw std::runtime_error("unknown reduction '" + s + "'");
}

at::Tensor averaged(at::Tensor t, bool avg, int64_t n) {
  if (!avg) return t;
  return t.is_floating_point() ? t.div_(static_cast<double>(n)) : t.div(n, "floor");
}

int64_t bytesOf(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// `x` with dim `dim` zero-padded at the end to `to` (x itself when it has that size).
at::Tensor padDim(const at::Tensor& x, int64_t dim, int64_t to) {
  int64_t have = x.size(dim);
  if (have == to) return x;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[static_cast<size_t>(dim)] = to - have;
  return at::cat({x, at::zeros(shape, x.options())}, dim);
}

// Piece `i` of `size` split over `n` ranks (torch.chunk).
sharding::Chunk pieceOf(int64_t size, int64_t n, int64_t i) { return sharding::chunkOf(size, n, i); }

// Returns `result` now, or registers `work` and returns the handle.
void finish(Stack& s, size_t nargs, MeshComm& c, bool async, const at::Tensor& handle,
            c10::intrusive_ptr<c10d::Work> work, std::function<at::Tensor()> done) {
  torch::jit::drop(s, nargs);
  c.track(work);
  if (async) {
    c.addPending(handle, {std::move(work), std::move(done)});
    s.emplace_back(handle);
    return;
  }
  if (work) work->wait();
  c.release(work);
  s.emplace_back(done());
}

// A collective in flight: the tensor it hands out now, and its completion.
struct Started {
  at::Tensor handle;
  MeshComm::Pending pending;
};

// Issues an all-reduce of `t` (in place) on `axis`, counting `bytes` sent
// (not counted when negative).
c10::intrusive_ptr<c10d::Work> issueAllReduce(MeshComm& c, int64_t axis, at::Tensor& t, const Reduce& r,
                                              int64_t bytes) {
  std::vector<at::Tensor> v{t};
  c10d::AllreduceOptions o;
  o.reduceOp = r.op;
  if (bytes >= 0) {
    c.stats().collectives += 1;
    c.stats().bytesSent += bytes;
  }
  return c.group(axis).allreduce(v, o);
}

// An all-reduce of a copy of `x` on `axis`, started; `count` adds it to
// the communicator's statistics.
Started startAllReduce(MeshComm& c, int64_t axis, const at::Tensor& x, const Reduce& r, bool count) {
  int64_t n = c.mesh().size(axis);
  at::Tensor t = x.clone(at::MemoryFormat::Contiguous);
  c10::intrusive_ptr<c10d::Work> work;
  if (n > 1) work = issueAllReduce(c, axis, t, r, count ? 2 * (n - 1) * bytesOf(t) / n : -1);
  return {t, {work, [t, r, n] { return averaged(t, r.avg, n); }}};
}

void allReduce(Stack& s) {
  // c10d's worker threads write into these buffers: no inference tensors.
  c10::InferenceMode normalTensors(false);
  auto a = torch::jit::last(s, 4);
  MeshComm& c = comm();
  Started st =
      startAllReduce(c, axisOf(c, a[1].toStringRef()), a[0].toTensor(), reduceOf(a[2].toStringRef()), true);
  finish(s, 4, c, a[3].toBool(), st.handle, st.pending.work, st.pending.finish);
}

// Local shape with `dim` split into [sf, rest] when sf > 1.
std::vector<int64_t> splitShape(const at::Tensor& x, int64_t dim, int64_t sf) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (sf == 1) return shape;
  int64_t size = shape[static_cast<size_t>(dim)];
  if (size % sf)
    throw std::runtime_error("dim " + std::to_string(dim) + " of size " + std::to_string(size) +
                             " does not split by " + std::to_string(sf));
  shape[static_cast<size_t>(dim)] = size / sf;
  shape.insert(shape.begin() + dim, sf);
  return shape;
}

// An all-gather of `x` along `dim` (a strided shard when sf > 1) on `axis`,
// started; `count` adds it to the communicator's statistics. `size` >= 0:
// the whole dim, split unevenly (each of the sf rows of size / sf by
// torch.chunk): pieces travel padded to the chunk. Trailing ranks hold the
// short and empty pieces, so each row's data are the first size / sf of its
// ranks' padded pieces laid end to end.
Started startAllGather(MeshComm& c, int64_t axis, const at::Tensor& x, int64_t dim, int64_t sf, int64_t size,
                       bool count) {
  int64_t n = c.mesh().size(axis);
  dim = dim < 0 ? dim + x.dim() : dim;
  int64_t coord = c.coords()[static_cast<size_t>(axis)];
  if (size >= 0 && size % sf != 0)
    throw std::runtime_error("all_gather: dim " + std::to_string(dim) + " of size " + std::to_string(size) +
                             " does not split into " + std::to_string(sf) + " rows");
  int64_t row = size >= 0 ? size / sf : -1;
  std::vector<int64_t> inner = splitShape(x, dim, sf);
  int64_t gdim = sf > 1 ? dim + 1 : dim;
  int64_t held = inner[static_cast<size_t>(gdim)];
  int64_t chunk = size >= 0 ? (row + n - 1) / n : held;
  if (size >= 0 && held != pieceOf(row, n, coord).size)
    throw std::runtime_error("all_gather: dim " + std::to_string(dim) + " holds " + std::to_string(held) +
                             " rows" + (sf > 1 ? " per run" : "") + ", but this rank's piece of " +
                             std::to_string(row) + " over " + std::to_string(n) + " ranks is " +
                             std::to_string(pieceOf(row, n, coord).size));
  at::Tensor in = x.contiguous().view(inner);
  if (size >= 0) in = padDim(in, gdim, chunk).contiguous();
  std::vector<int64_t> bufShape(in.sizes().begin(), in.sizes().end());
  bufShape.insert(bufShape.begin(), n);
  at::Tensor buf = emptyGatherBuffer(bufShape, x.options());
  std::vector<int64_t> outShape(x.sizes().begin(), x.sizes().end());
  outShape[static_cast<size_t>(dim)] = size >= 0 ? size : outShape[static_cast<size_t>(dim)] * n;
  c10::intrusive_ptr<c10d::Work> work;
  if (n > 1) {
    std::vector<std::vector<at::Tensor>> outs(1);
    for (int64_t i = 0; i < n; ++i) outs[0].push_back(buf[i]);
    std::vector<at::Tensor> ins{in};
    work = c.group(axis).allgather(outs, ins);
    if (count) {
      c.stats().collectives += 1;
      c.stats().bytesSent += (n - 1) * bytesOf(in);
    }
  } else {
    buf[0].copy_(in);
  }
  return {buf, {work, [buf, gdim, outShape, row, n] {
                  // [n, ..., (sf,) chunk, ...] -> the ranks' pieces end to end in each row
                  at::Tensor all = buf.movedim(0, gdim);
                  std::vector<int64_t> merged(all.sizes().begin(), all.sizes().end());
                  merged[static_cast<size_t>(gdim)] *= merged[static_cast<size_t>(gdim) + 1];
                  merged.erase(merged.begin() + gdim + 1);
                  at::Tensor rows = all.reshape(merged);
                  if (row >= 0) rows = rows.narrow(gdim, 0, row);
                  return rows.contiguous().view(outShape);
                }}};
}

void allGather(Stack& s) {
  // c10d's worker threads write into these buffers: no inference tensors.
  c10::InferenceMode normalTensors(false);
  auto a = torch::jit::last(s, 6);
  MeshComm& c = comm();
  Started st = startAllGather(c, axisOf(c, a[1].toStringRef()), a[0].toTensor(), a[2].toInt(), a[3].toInt(),
                              a[4].toInt(), true);
  finish(s, 6, c, a[5].toBool(), st.handle, st.pending.work, st.pending.finish);
}

// Issues the group's own reduce-scatter of `in` (dim 0 split into n chunks)
// into `out`; null when the backend has none (Gloo before it gained one).
c10::intrusive_ptr<c10d::Work> issueReduceScatter(MeshComm& c, int64_t axis, at::Tensor& out, at::Tensor& in,
                                                  const Reduce& r) {
  c10d::ReduceScatterOptions o;
  o.reduceOp = r.op;
  try {
    auto work = c.group(axis)._reduce_scatter_base(out, in, o);
    c.stats().collectives += 1;
    c.stats().bytesSent += (c.mesh().size(axis) - 1) * bytesOf(out);
    return work;
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("does not support") == std::string::npos) throw;
    return nullptr;
  }
}

void reduceScatter(Stack& s) {
  // c10d's worker threads write into these buffers: no inference tensors.
  c10::InferenceMode normalTensors(false);
  auto a = torch::jit::last(s, 5);
  at::Tensor x = a[0].toTensor();
  MeshComm& c = comm();
  int64_t axis = axisOf(c, a[1].toStringRef());
  int64_t dim = a[2].toInt();
  Reduce r = reduceOf(a[3].toStringRef());
  bool async = a[4].toBool();
  int64_t n = c.mesh().size(axis);
  dim = dim < 0 ? dim + x.dim() : dim;
  // Uneven (torch.chunk): every rank's piece is padded to the chunk, and
  // this rank keeps its own rows of the reduced chunk.
  int64_t whole = x.size(dim);
  int64_t chunk = (whole + n - 1) / n;
  int64_t mine = pieceOf(whole, n, c.coords()[static_cast<size_t>(axis)]).size;
  // The scattered dim goes first, so each rank's chunk is one contiguous block.
  at::Tensor in = padDim(x.movedim(dim, 0), 0, chunk * n).contiguous();
  std::vector<int64_t> outShape(in.sizes().begin(), in.sizes().end());
  outShape[0] = chunk;
  at::Tensor out = at::empty(outShape, in.options());
  c10::intrusive_ptr<c10d::Work> work;
  if (n == 1) out.copy_(in);
  if (n > 1) work = issueReduceScatter(c, axis, out, in, r);
  if (n > 1 && !work) {
    // No reduce-scatter in this backend: all-reduce, then keep this rank's chunk.
    int64_t coord = c.coords()[static_cast<size_t>(axis)];
    work = issueAllReduce(c, axis, in, r, 2 * (n - 1) * bytesOf(in) / n);
    finish(s, 5, c, async, in, work, [in, r, n, dim, coord, chunk, mine] {
      return averaged(in.narrow(0, coord * chunk, mine).movedim(0, dim).contiguous(), r.avg, n);
    });
    return;
  }
  finish(s, 5, c, async, out, work, [out, r, n, dim, mine] {
    return averaged(out.narrow(0, 0, mine).movedim(0, dim).contiguous(), r.avg, n);
  });
}

void allToAll(Stack& s) {
  // c10d's worker threads write into these buffers: no inference tensors.
  c10::InferenceMode normalTensors(false);
  auto a = torch::jit::last(s, 6);
  at::Tensor x = a[0].toTensor();
  MeshComm& c = comm();
  int64_t axis = axisOf(c, a[1].toStringRef());
  int64_t splitDim = a[2].toInt(), concatDim = a[3].toInt();
  int64_t size = a[4].toInt();  // the whole concat dim when it is split unevenly
  bool async = a[5].toBool();
  int64_t n = c.mesh().size(axis);
  int64_t coord = c.coords()[static_cast<size_t>(axis)];
  splitDim = splitDim < 0 ? splitDim + x.dim() : splitDim;
  concatDim = concatDim < 0 ? concatDim + x.dim() : concatDim;
  // Pieces of the split dim follow torch.chunk; uneven ones (of either dim)
  // travel padded to the chunk and are unpadded on arrival.
  int64_t whole = x.size(splitDim), held = x.size(concatDim);
  int64_t splitChunk = (whole + n - 1) / n, concatChunk = size >= 0 ? (size + n - 1) / n : held;
  std::vector<at::Tensor> pieces;
  for (int64_t j = 0; j < n; ++j) {
    sharding::Chunk p = pieceOf(whole, n, j);
    pieces.push_back(
        padDim(padDim(x.narrow(splitDim, p.offset, p.size), splitDim, splitChunk), concatDim, concatChunk));
  }
  at::Tensor in = at::stack(pieces).contiguous();
  at::Tensor out = at::empty_like(in);
  c10::intrusive_ptr<c10d::Work> work;
  if (n > 1) {
    std::vector<int64_t> counts;
    work = c.group(axis).alltoall_base(out, in, counts, counts);
    c.stats().collectives += 1;
    c.stats().bytesSent += (n - 1) * bytesOf(in) / n;
  } else {
    out.copy_(in);
  }
  int64_t mine = pieceOf(whole, n, coord).size;
  finish(s, 6, c, async, out, work, [out, splitDim, concatDim, n, mine, size, held] {
    std::vector<at::Tensor> got;
    for (int64_t i = 0; i < n; ++i)
      got.push_back(
          out[i].narrow(splitDim, 0, mine).narrow(concatDim, 0, size >= 0 ? pieceOf(size, n, i).size : held));
    return at::cat(got, concatDim);
  });
}

void localSlice(Stack& s) {
  auto a = torch::jit::last(s, 5);
  at::Tensor x = a[0].toTensor();
  MeshComm& c = comm();
  int64_t axis = axisOf(c, a[1].toStringRef());
  int64_t dim = a[2].toInt();
  int64_t sf = a[3].toInt();
  bool divisible = a[4].toBool();
  int64_t n = c.mesh().size(axis);
  int64_t coord = c.coords()[static_cast<size_t>(axis)];
  dim = dim < 0 ? dim + x.dim() : dim;
  if (divisible && dim >= 0 && dim < x.dim() && x.size(dim) % (n * sf) != 0)
    throw std::runtime_error("dim " + std::to_string(dim) + " of size " + std::to_string(x.size(dim)) +
                             " does not divide over mesh axis '" + a[1].toStringRef() + "' of size " +
                             std::to_string(n) +
                             ": this program splits that symbolic dim evenly because its trace-time size "
                             "divided; give sizes that divide, or export with a trace-time size that does "
                             "not divide");
  std::vector<int64_t> inner = splitShape(x, dim, sf);
  int64_t sdim = sf > 1 ? dim + 1 : dim;
  // torch.chunk: rank `coord` holds its piece, trailing ranks fewer rows or none.
  sharding::Chunk piece = pieceOf(inner[static_cast<size_t>(sdim)], n, coord);
  std::vector<int64_t> outShape(x.sizes().begin(), x.sizes().end());
  outShape[static_cast<size_t>(dim)] = piece.size * sf;
  at::Tensor r = x.reshape(inner).narrow(sdim, piece.offset, piece.size).contiguous().view(outShape);
  torch::jit::drop(s, 5);
  s.emplace_back(r);
}

void zeroPartial(Stack& s) {
  auto a = torch::jit::last(s, 2);
  at::Tensor x = a[0].toTensor();
  MeshComm& c = comm();
  int64_t axis = axisOf(c, a[1].toStringRef());
  at::Tensor r = c.coords()[static_cast<size_t>(axis)] == 0 ? x : at::zeros_like(x);
  torch::jit::drop(s, 2);
  s.emplace_back(r);
}

// spmd.vocab_embedding(weight, indices, spec, vocab): the rows of the
// [vocab, D] table this rank holds under `spec` (one run, or sf runs of a
// strided shard) are looked up; indices outside them give zero rows.
void vocabEmbedding(Stack& s) {
  auto a = torch::jit::last(s, 4);
  at::Tensor w = a[0].toTensor();
  at::Tensor idx = a[1].toTensor();
  auto spec = sharding::ShardingSpec::parse(a[2].toStringRef());
  TORCH_CHECK(spec.hasValue(), spec.status().message());
  int64_t vocab = a[3].toInt();
  MeshComm& c = comm();
  sharding::Chunk rows = sharding::localChunks({vocab, w.size(1)}, *spec, c.mesh(), c.coords())[0];
  TORCH_CHECK(rows.size == w.size(0), "vocab_embedding: the table holds ", w.size(0), " rows, its layout ",
              a[2].toStringRef(), " gives this rank ", rows.size);
  int64_t run = rows.blockSize();
  at::Tensor local = at::zeros_like(idx);
  at::Tensor held = at::zeros_like(idx, idx.options().dtype(at::kBool));
  for (int64_t b = 0; b < rows.blocks; ++b) {
    int64_t start = rows.offset + b * rows.blockStride;
    at::Tensor in = idx.ge(start).logical_and(idx.lt(start + run));
    local = at::where(in, idx - start + b * run, local);
    held = held.logical_or(in);
  }
  at::Tensor out = at::embedding(w, local).mul(held.unsqueeze(-1).to(w.scalar_type()));
  torch::jit::drop(s, 4);
  s.emplace_back(out);
}

// spmd.local_size(size, spec, dim): this rank's size of dim `dim` (global
// `size`) under `spec`.
void localSize(Stack& s) {
  auto a = torch::jit::last(s, 3);
  int64_t size = a[0].toInt();
  auto spec = sharding::ShardingSpec::parse(a[1].toStringRef());
  TORCH_CHECK(spec.hasValue(), spec.status().message());
  int64_t dim = a[2].toInt();
  MeshComm& c = comm();
  TORCH_CHECK(dim >= 0 && size >= 0 && spec->placements.size() == static_cast<size_t>(c.mesh().numAxes()),
              "local_size: bad arguments for ", a[1].toStringRef(), " on mesh ", c.mesh().str());
  std::vector<int64_t> shape(static_cast<size_t>(dim + 1), 1);
  shape[static_cast<size_t>(dim)] = size;
  for (auto& p : spec->placements)
    if (p.isShard() && p.dim != dim) p = sharding::Placement::replicate();
  Status ok = sharding::checkShardable(shape, *spec, c.mesh());
  TORCH_CHECK(ok.isOk(), "local_size: ", ok.message());
  int64_t local = sharding::localShape(shape, *spec, c.mesh(), c.coords())[static_cast<size_t>(dim)];
  torch::jit::drop(s, 3);
  s.emplace_back(local);
}

// spmd.global_symbol(name): the run-time value of a symbol of the exported
// program, bound from this step's global inputs.
void globalSymbol(Stack& s) {
  std::string name = s.back().toStringRef();
  const int64_t* v = comm().symbol(name);
  TORCH_CHECK(v != nullptr, "global_symbol: no input binds symbol ", name);
  torch::jit::drop(s, 1);
  s.emplace_back(*v);
}

void waitOp(Stack& s) {
  at::Tensor x = s.back().toTensor();
  auto r = comm().wait(x);
  if (!r) throw std::runtime_error(r.status().message());
  torch::jit::drop(s, 1);
  s.emplace_back(*r);
}

// Dtypes a backend cannot carry travel as one it can, and come back:
//   bool -> uint8; int16, uint16 -> int32; uint32 -> int64 (widened: sums,
//   max and min are exact); uint64 -> int64's bits (moved exactly; sums
//   wrap as uint64 does); complex -> its real view (a trailing dim of 2,
//   which no collective's dim argument names).
// Neither Gloo nor NCCL has bool or int16; Gloo has no unsigned type past
// uint8, and neither has complex.
struct Carrier {
  at::Tensor value;                            // what the collective moves
  std::function<at::Tensor(at::Tensor)> back;  // its result, in the original dtype
};

std::optional<Carrier> carrierOf(const at::Tensor& x) {
  if (x.is_complex())
    return Carrier{at::view_as_real(x.resolve_conj()).contiguous(),
                   [](const at::Tensor& t) { return at::view_as_complex(t.contiguous()); }};
  at::ScalarType want;
  switch (x.scalar_type()) {
    case at::kBool:
      want = at::kByte;
      break;
    case at::kShort:
    case at::kUInt16:
      want = at::kInt;
      break;
    case at::kUInt32:
      want = at::kLong;
      break;
    case at::kUInt64:
      return Carrier{x.contiguous().view(at::kLong),
                     [](const at::Tensor& t) { return t.contiguous().view(at::kUInt64); }};
    default:
      return std::nullopt;
  }
  at::ScalarType type = x.scalar_type();
  return Carrier{x.to(want), [type](const at::Tensor& t) { return t.to(type); }};
}

// A kernel on a carried dtype runs synchronously on its carrier. NArgs: the
// kernel's argument count (the tensor is the first, async the last).
template <void (*Kernel)(Stack&), size_t NArgs>
void asCarriedType(Stack& s) {
  c10::IValue& self = s[s.size() - NArgs];
  c10::InferenceMode normalTensors(false);
  std::optional<Carrier> carrier = carrierOf(self.toTensor());
  if (!carrier) return Kernel(s);
  self = carrier->value;
  s.back() = false;
  Kernel(s);
  s.back() = carrier->back(s.back().toTensor());
}

const LocalOpDef kCollectives[] = {
    {"spmd.all_gather",
     "spmd::all_gather(Tensor self, str axis, int dim, *, int split_factor=1, int size=-1, bool async=False) "
     "-> "
     "Tensor",
     asCarriedType<allGather, 6>},
    {"spmd.all_reduce", "spmd::all_reduce(Tensor self, str axis, str op, *, bool async=False) -> Tensor",
     asCarriedType<allReduce, 4>},
    {"spmd.all_to_all",
     "spmd::all_to_all(Tensor self, str axis, int split_dim, int concat_dim, *, int size=-1, bool "
     "async=False) "
     "-> Tensor",
     asCarriedType<allToAll, 6>},
    {"spmd.global_symbol", "spmd::global_symbol(str name) -> int", globalSymbol},
    {"spmd.local_size", "spmd::local_size(int size, str spec, int dim) -> int", localSize},
    {"spmd.local_slice",
     "spmd::local_slice(Tensor self, str axis, int dim, *, int split_factor=1, bool divisible=False) -> "
     "Tensor",
     localSlice},
    {"spmd.reduce_scatter",
     "spmd::reduce_scatter(Tensor self, str axis, int dim, str op, *, bool async=False) -> Tensor",
     asCarriedType<reduceScatter, 5>},
    {"spmd.vocab_embedding",
     "spmd::vocab_embedding(Tensor weight, Tensor indices, str spec, int vocab) -> Tensor", vocabEmbedding},
    {"spmd.wait", "spmd::wait(Tensor self) -> Tensor", waitOp},
    {"spmd.zero_partial", "spmd::zero_partial(Tensor self, str axis) -> Tensor", zeroPartial},
};

}  // namespace

at::Tensor allReduceNow(MeshComm& comm, int64_t axis, const at::Tensor& x, sharding::ReduceOp op) {
  c10::InferenceMode normalTensors(false);
  if (std::optional<Carrier> carrier = carrierOf(x))
    return carrier->back(allReduceNow(comm, axis, carrier->value, op));
  Started st = startAllReduce(comm, axis, x, reduceOf(std::string(sharding::reduceOpName(op))), false);
  comm.track(st.pending.work);
  if (st.pending.work) st.pending.work->wait();
  return st.pending.finish();
}

at::Tensor allGatherNow(MeshComm& comm, int64_t axis, const at::Tensor& x, int64_t dim, int64_t splitFactor,
                        int64_t size) {
  c10::InferenceMode normalTensors(false);
  if (std::optional<Carrier> carrier = carrierOf(x))
    return carrier->back(allGatherNow(comm, axis, carrier->value, dim, splitFactor, size));
  Started st = startAllGather(comm, axis, x, dim, splitFactor, size, false);
  comm.track(st.pending.work);
  if (st.pending.work) st.pending.work->wait();
  return st.pending.finish();
}

const LocalOp* findCollective(std::string_view target) { return findLocalOp<kCollectives>(target); }

}  // namespace spmd::runtime
