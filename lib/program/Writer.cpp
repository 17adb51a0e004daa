// The .spmd writer (see Writer.h and Format.h for the layout).
//
//   weight w f32[4, 6] spec [S(1)] on mesh 2 (x)
//   -> plan: index [0] chunks {(0,4), (0,3)}, index [1] chunks {(0,4), (3,3)}
//   -> blob [0] at data offset 0 (48 bytes), blob [1] at data offset 64 (48 bytes)
//
// Steps: plan every weight's shards and their offsets (sizes alone decide
// the layout), print the JSON once to learn its length (checksums print at
// a fixed width, so the length does not depend on them), stream the blobs
// into the data section of a temporary file while hashing them, then print
// the JSON again with the checksums and write header, JSON and padding in
// front; the file is renamed over `path` once complete.
#include "program/Writer.h"

#include <cerrno>
#include <cstring>
#include <functional>
#include <set>

#include "program/ExternalWeights.h"
#include "program/Format.h"
#include "program/ProgramJson.h"
#include "program/Verifier.h"
#include "support/File.h"
#include "support/Strings.h"

namespace spmd::program {
namespace {

void putLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

// Validates one entry, fills its spec (normalized), local shape and shards
// with offsets from `dataEnd` on; returns the plans in shard order.
Expected<std::vector<ShardPlan>> layOut(WeightEntry& w, const sharding::Mesh& mesh, uint64_t& dataEnd) {
  std::string where = "weight '" + w.fqn + "'";
  int64_t elem = ir::elementSize(w.dtype);
  if (elem <= 0) return Status::error(where + ": unknown dtype " + std::to_string(static_cast<int>(w.dtype)));
  for (int64_t s : w.globalShape)
    if (s < 0) return Status::error(where + ": negative size in global shape " + formatShape(w.globalShape));
  if (w.spec.placements.empty()) w.spec = sharding::ShardingSpec::replicated(mesh.numAxes());
  auto spec = sharding::normalizeSpec(w.spec, static_cast<int64_t>(w.globalShape.size()), mesh);
  if (!spec) return spec.status().withContext(where);
  w.spec = *spec;
  auto plans = planShards(w.globalShape, w.spec, mesh);
  if (!plans) return plans.status().withContext(where);
  std::vector<int64_t> rank0;
  for (const auto& c : plans->front().chunks) rank0.push_back(c.size);
  if (w.localShape.empty() && !rank0.empty()) w.localShape = rank0;
  if (w.localShape != rank0)
    return Status::error(where + ": local shape " + formatShape(w.localShape) + " is not rank 0's shard " +
                         formatShape(rank0) + " of " + formatShape(w.globalShape) + " under " + w.spec.str());
  w.shards.clear();
  if (w.source) return plans;  // by reference: no blobs
  for (const auto& plan : *plans) {
    int64_t numel = 1;
    for (const auto& c : plan.chunks) numel *= c.size;
    dataEnd = alignUp(dataEnd);
    w.shards.push_back(ShardBlob{plan.index, dataEnd, static_cast<uint64_t>(numel * elem)});
    dataEnd += static_cast<uint64_t>(numel * elem);
  }
  return plans;
}

// Slices, hashes (into w.shards[i].checksum) and writes every blob of `w`.
Status writeBlobs(AtomicFile& file, uint64_t dataStart, WeightEntry& w, const std::vector<ShardPlan>& plans,
                  const WeightSource& source) {
  SPMD_ASSIGN_OR_RETURN(std::span<const std::byte> global, source.globalBytes(w.fqn));
  int64_t elem = ir::elementSize(w.dtype);
  uint64_t expected = static_cast<uint64_t>(product(w.globalShape) * elem);
  if (global.size() != expected)
    return Status::error("weight '" + w.fqn + "': the source holds " + std::to_string(global.size()) +
                         " bytes but " + std::string(ir::scalarTypeName(w.dtype)) +
                         formatShape(w.globalShape) + " needs " + std::to_string(expected));
  std::vector<std::byte> buffer;
  for (size_t i = 0; i < plans.size(); ++i) {
    ShardBlob& blob = w.shards[i];
    buffer.resize(blob.bytes);
    if (blob.bytes > 0) sliceRowMajor(global, w.globalShape, elem, plans[i].chunks, buffer.data());
    blob.checksum = checksum(buffer);
    SPMD_RETURN_IF_ERROR(file.padTo(dataStart + blob.offset));
    SPMD_RETURN_IF_ERROR(file.write(buffer.data(), buffer.size()));
  }
  return Status::ok();
}

Status writeFile(const std::string& path, Program& program, const WeightSource& source) {
  // Weights by reference: their integrity record, read from the checkpoint
  // here rather than in compile(), which auto-sharding runs per layout.
  SPMD_RETURN_IF_ERROR(recordSources(program));
  uint64_t dataEnd = 0;
  std::vector<std::vector<ShardPlan>> plans;
  std::set<std::string> seen;
  for (auto& w : program.weights) {
    if (!seen.insert(w.fqn).second) return Status::error("weight '" + w.fqn + "' appears twice");
    SPMD_ASSIGN_OR_RETURN(auto p, layOut(w, program.mesh, dataEnd));
    plans.push_back(std::move(p));
  }
  // Never write what the reader would refuse.
  SPMD_RETURN_IF_ERROR(verifyProgram(program, dataEnd));
  program.formatVersion = kFormatVersion;
  program.formatMinor = formatMinorFor(program);
  SPMD_ASSIGN_OR_RETURN(std::string draft, programToJsonText(program));
  uint64_t dataStart = dataSectionOffset(draft.size());

  // Atomic, not durable: a compiled program is recreated by compiling again,
  // and the fsync would cost a third of a large model's compile.
  AtomicFile file(path, /*durable=*/false);
  SPMD_RETURN_IF_ERROR(file.open());
  SPMD_RETURN_IF_ERROR(file.skipTo(dataStart));
  for (size_t i = 0; i < program.weights.size(); ++i)
    if (!program.weights[i].source)
      SPMD_RETURN_IF_ERROR(writeBlobs(file, dataStart, program.weights[i], plans[i], source));
  SPMD_CHECK(file.written() == dataStart + dataEnd);
  SPMD_ASSIGN_OR_RETURN(std::string json, programToJsonText(program));
  SPMD_CHECK(json.size() == draft.size());
  std::string front(kMagic);
  putLe(front, kFormatVersion, 4);
  putLe(front, static_cast<uint64_t>(formatMinorFor(program)), 4);
  putLe(front, json.size(), 8);
  putLe(front, checksum(json), 8);
  SPMD_CHECK(front.size() == kHeaderSize);
  front += json;
  front.resize(dataStart, '\0');
  SPMD_RETURN_IF_ERROR(file.writeAt(0, front));
  return file.commit();
}

}  // namespace

Expected<std::vector<ShardPlan>> planShards(const std::vector<int64_t>& globalShape,
                                            const sharding::ShardingSpec& spec, const sharding::Mesh& mesh) {
  SPMD_ASSIGN_OR_RETURN(sharding::ShardingSpec s,
                        sharding::normalizeSpec(spec, static_cast<int64_t>(globalShape.size()), mesh));
  std::vector<int64_t> shardedAxes;
  for (int64_t a = 0; a < mesh.numAxes(); ++a) {
    const auto& p = s.placements[static_cast<size_t>(a)];
    if (p.isPartial())
      return Status::error("spec " + s.str() + " has a Partial placement on mesh axis '" +
                           mesh.axisNames()[static_cast<size_t>(a)] + "' (a stored weight must be whole)");
    if (p.isShard()) shardedAxes.push_back(a);
  }
  std::vector<ShardPlan> plans;
  std::vector<int64_t> coords(static_cast<size_t>(mesh.numAxes()), 0);
  while (true) {
    ShardPlan plan;
    plan.index.assign(coords.size(), -1);
    for (int64_t a : shardedAxes) plan.index[static_cast<size_t>(a)] = coords[static_cast<size_t>(a)];
    plan.chunks = sharding::localChunks(globalShape, s, mesh, coords);
    plans.push_back(std::move(plan));
    // Odometer over the sharded axes, the last one fastest.
    size_t k = shardedAxes.size();
    while (k > 0) {
      auto a = static_cast<size_t>(shardedAxes[k - 1]);
      if (++coords[a] < mesh.size(static_cast<int64_t>(a))) break;
      coords[a] = 0;
      --k;
    }
    if (k == 0) break;
  }
  return plans;
}

void forEachRun(const std::vector<int64_t>& shape, int64_t elemSize,
                const std::vector<sharding::Chunk>& chunks,
                const std::function<void(uint64_t offset, uint64_t bytes)>& run) {
  SPMD_CHECK(chunks.size() == shape.size());
  size_t rank = shape.size();
  int64_t numel = 1;
  for (const auto& c : chunks) numel *= c.size;
  if (numel == 0) return;
  // k: the last dim the block does not cover whole; dims after it are whole,
  // so each run of dim k (one per strided block) is contiguous in memory.
  size_t k = rank;
  for (size_t d = 0; d < rank; ++d)
    if (chunks[d].offset != 0 || chunks[d].size != shape[d] || chunks[d].blocks != 1) k = d;
  if (k == rank) {
    run(0, static_cast<uint64_t>(numel * elemSize));
    return;
  }
  std::vector<int64_t> stride(rank, elemSize);  // bytes per step of each dim
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * shape[d + 1];
  // The global indices each dim before k takes, in local order.
  std::vector<std::vector<int64_t>> taken(k);
  for (size_t d = 0; d < k; ++d)
    for (int64_t b = 0; b < chunks[d].blocks; ++b)
      for (int64_t j = 0; j < chunks[d].blockSize(); ++j)
        taken[d].push_back(chunks[d].offset + b * chunks[d].blockStride + j);
  const sharding::Chunk& last = chunks[k];
  auto length = static_cast<uint64_t>(last.blockSize() * stride[k]);
  std::vector<size_t> index(k, 0);
  while (true) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) base += taken[d][index[d]] * stride[d];
    for (int64_t b = 0; b < last.blocks; ++b)
      run(static_cast<uint64_t>(base + (last.offset + b * last.blockStride) * stride[k]), length);
    size_t d = k;
    while (d > 0 && ++index[d - 1] == taken[d - 1].size()) index[--d] = 0;
    if (d == 0) break;
  }
}

void sliceRowMajor(std::span<const std::byte> global, const std::vector<int64_t>& shape, int64_t elemSize,
                   const std::vector<sharding::Chunk>& chunks, std::byte* out) {
  forEachRun(shape, elemSize, chunks, [&](uint64_t offset, uint64_t bytes) {
    SPMD_CHECK(offset + bytes <= global.size());
    std::memcpy(out, global.data() + offset, bytes);
    out += bytes;
  });
}

Status writeProgram(const std::string& path, Program& program, const WeightSource& source) {
  return writeFile(path, program, source).withContext(path);
}

}  // namespace spmd::program
