// The program verifier (see Verifier.h).
//
//   weight b f32[6] [R] local [6]: one blob, index [-1], 24 bytes -> ok
//   the same with local [7]       -> "weight 'b': local shape [7] is not rank 0's shard [6] of [6] under [R]"
//   a tensor value f32[-3, 4]     -> "value %x: size -3 in f32[-3, 4] is negative"
//
// Order: mesh, weights one by one, the weight table as a whole, then the
// graph's values and the boundary types, then weights against the graph
// inputs that read them. Nothing here multiplies or iterates before the
// numbers involved are bounded.
#include "program/Verifier.h"

#include "ir/Verify.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "program/Format.h"
#include "program/Writer.h"
#include "support/Strings.h"

namespace spmd::program {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Product of `sizes` times `elem`, or nullopt when a size is negative or
// the product exceeds int64.
std::optional<int64_t> byteSize(const std::vector<int64_t>& sizes, int64_t elem) {
  int64_t n = std::max<int64_t>(elem, 1);
  bool zero = false;
  for (int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    if (s == 0) zero = true;
    if (!zero && s > kInt64Max / n) return std::nullopt;
    if (!zero) n *= s;
  }
  return zero ? 0 : n;
}

Status checkMesh(const sharding::Mesh& mesh) {
  int64_t ranks = 1;
  for (int64_t s : mesh.shape()) {
    if (s < 1 || s > kMaxRanks / ranks)
      return Status::error("mesh " + formatShape(mesh.shape()) +
                           ": every axis needs size >= 1 and the mesh at most " + std::to_string(kMaxRanks) +
                           " ranks");
    ranks *= s;
  }
  return Status::ok();
}

// Every blob of `w` matches its plan and lies in the data section.
Status checkBlobs(const WeightEntry& w, const std::vector<ShardPlan>& plans, const std::string& where,
                  uint64_t dataSize) {
  int64_t elem = ir::elementSize(w.dtype);
  for (size_t i = 0; i < plans.size(); ++i) {
    const ShardBlob& b = w.shards[i];
    const ShardPlan& plan = plans[i];
    std::string bw = where + " blob " + formatShape(b.index);
    if (b.index != plan.index) return Status::error(bw + ": expected index " + formatShape(plan.index));
    int64_t shardNumel = 1;
    for (const auto& c : plan.chunks) shardNumel *= c.size;  // at most the global numel
    if (b.bytes != static_cast<uint64_t>(shardNumel * elem))
      return Status::error(bw + ": " + std::to_string(b.bytes) + " bytes, the shard needs " +
                           std::to_string(shardNumel * elem));
    if (b.offset % kAlignment != 0)
      return Status::error(bw + ": offset " + std::to_string(b.offset) + " is not " +
                           std::to_string(kAlignment) + "-byte aligned");
    if (b.offset > dataSize || b.bytes > dataSize - b.offset)
      return Status::error(bw + ": bytes [" + std::to_string(b.offset) + ", " +
                           std::to_string(b.offset + b.bytes) + ") lie outside the data section (" +
                           std::to_string(dataSize) + " bytes)");
  }
  return Status::ok();
}

Status checkWeight(const WeightEntry& w, const sharding::Mesh& mesh, uint64_t dataSize) {
  std::string where = "weight '" + w.fqn + "'";
  if (!byteSize(w.globalShape, ir::elementSize(w.dtype)))
    return Status::error(where + ": global shape " + formatShape(w.globalShape) +
                         " is negative or too large");
  auto plans = planShards(w.globalShape, w.spec, mesh);
  if (!plans) return plans.status().withContext(where);
  std::vector<int64_t> rank0;
  for (const auto& c : plans->front().chunks) rank0.push_back(c.size);
  if (w.localShape != rank0)
    return Status::error(where + ": local shape " + formatShape(w.localShape) + " is not rank 0's shard " +
                         formatShape(rank0) + " of " + formatShape(w.globalShape) + " under " + w.spec.str());
  if (w.source) {
    if (!w.shards.empty())
      return Status::error(where + ": has both a source and " + std::to_string(w.shards.size()) + " blobs");
    if (!w.source->zeros && (w.source->file.empty() || w.source->tensor.empty()))
      return Status::error(where + ": its source names no file or no tensor");
    if (!w.source->zeros && ir::elementSize(w.source->dtype) <= 0)
      return Status::error(where + ": its source has an unknown dtype");
    return Status::ok();
  }
  if (plans->size() != w.shards.size())
    return Status::error(where + ": " + std::to_string(w.shards.size()) + " blobs, but spec " + w.spec.str() +
                         " on mesh " + mesh.str() + " needs " + std::to_string(plans->size()));
  return checkBlobs(w, *plans, where, dataSize);
}

// No two non-empty blobs share a byte (sorted by offset, each ends before the next starts).
Status checkDisjoint(const std::vector<WeightEntry>& weights) {
  struct Span {
    uint64_t offset, bytes;
    const WeightEntry* w;
    const ShardBlob* b;
  };
  std::vector<Span> spans;
  for (const auto& w : weights)
    for (const auto& b : w.shards)
      if (b.bytes > 0) spans.push_back({b.offset, b.bytes, &w, &b});
  std::stable_sort(spans.begin(), spans.end(),
                   [](const Span& x, const Span& y) { return x.offset < y.offset; });
  auto name = [](const Span& s) {
    return "weight '" + s.w->fqn + "' blob " + formatShape(s.b->index) + ": bytes [" +
           std::to_string(s.offset) + ", " + std::to_string(s.offset + s.bytes) + ")";
  };
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].offset < spans[i - 1].offset + spans[i - 1].bytes)
      return Status::error(name(spans[i - 1]) + " overlap " + name(spans[i]));
  return Status::ok();
}

// Static sizes non-negative, byte size within int64 (symbolic sizes are bounded at run time).
Status checkType(const ir::TensorType& t, const std::string& where) {
  std::vector<int64_t> sizes;
  for (const ir::Dim& d : t.sizes) {
    if (!d.isStatic()) continue;
    if (d.value() < 0)
      return Status::error(where + ": size " + std::to_string(d.value()) + " in " + t.str() + " is negative");
    sizes.push_back(d.value());
  }
  if (!byteSize(sizes, ir::elementSize(t.dtype)))
    return Status::error(where + ": " + t.str() + " has more bytes than fit in 64 bits");
  return Status::ok();
}

Status checkValues(const Program& p) {
  const ir::Graph& g = p.graph.graph;
  for (size_t i = 0; i < g.numValues(); ++i) {
    const ir::Value* v = g.valueById(static_cast<int>(i));
    if (v && v->isTensor()) SPMD_RETURN_IF_ERROR(checkType(v->type(), "value %" + v->name()));
  }
  for (size_t i = 0; i < p.inputs.size(); ++i)
    SPMD_RETURN_IF_ERROR(checkType(p.inputs[i].globalType, "inputs[" + std::to_string(i) + "] global type"));
  for (size_t i = 0; i < p.outputs.size(); ++i)
    SPMD_RETURN_IF_ERROR(
        checkType(p.outputs[i].globalType, "outputs[" + std::to_string(i) + "] global type"));
  return Status::ok();
}

// A weight the graph reads has the dtype and static sizes of the graph input reading it.
Status checkWeightInputs(const Program& p) {
  std::map<std::string, const WeightEntry*, std::less<>> byFqn;
  for (const auto& w : p.weights) byFqn.emplace(w.fqn, &w);
  for (const ir::InputSpec& in : p.graph.signature.inputs) {
    bool weight = ir::isStored(in.kind);
    auto it = byFqn.find(in.target);
    if (!weight || !in.value || !in.value->isTensor() || it == byFqn.end()) continue;
    const WeightEntry& w = *it->second;
    const ir::TensorType& t = in.value->type();
    bool same = t.rank() == static_cast<int64_t>(w.localShape.size()) &&
                (t.dtype == ir::ScalarType::Unknown || t.dtype == w.dtype);
    for (size_t d = 0; same && d < t.sizes.size(); ++d)
      same = !t.sizes[d].isStatic() || t.sizes[d].value() == w.localShape[d];
    if (!same)
      return Status::error("weight '" + w.fqn + "': " + std::string(ir::scalarTypeName(w.dtype)) +
                           formatShape(w.localShape) + " per rank, but graph input %" + in.value->name() +
                           " reading it is " + t.str());
  }
  return Status::ok();
}

}  // namespace

Status verifyProgram(const Program& program, uint64_t dataSize) {
  SPMD_RETURN_IF_ERROR(checkMesh(program.mesh));
  std::set<std::string_view> seen;
  for (const auto& w : program.weights) {
    if (!seen.insert(w.fqn).second) return Status::error("weight '" + w.fqn + "' appears twice");
    SPMD_RETURN_IF_ERROR(checkWeight(w, program.mesh, dataSize));
  }
  SPMD_RETURN_IF_ERROR(checkDisjoint(program.weights));
  SPMD_RETURN_IF_ERROR(checkValues(program));
  SPMD_RETURN_IF_ERROR(checkWeightInputs(program));
  // Every node against its op, as the .pt2 reader checks the source.
  return ir::verifyProgram(program.graph);
}

}  // namespace spmd::program
