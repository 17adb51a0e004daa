// The .spmd reader (see Reader.h and Format.h for the layout).
//
//   53 50 4d 44 50 52 4f 47  01 00 00 00 00 00 00 00   "SPMDPROG", major 1, minor 0
//   a0 0f 00 00 00 00 00 00  7b 22 66 6f ...           JSON length 4000, "{"fo...
//   -> data section at alignUp(24 + 4000) = 4032; blob offsets count from there.
//
// Checks, in order: magic, header length, major version, JSON length
// against the file, JSON, then every weight's blobs against its plan
// (count, index, bytes) and the data section (alignment, bounds).
#include "program/Reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "program/Format.h"
#include "program/ProgramJson.h"
#include "program/Writer.h"

namespace spmd::program {
namespace {

uint64_t getLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

std::string indexStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Header checks; returns the JSON length.
Expected<uint64_t> checkHeader(const io::MappedFile& f) {
  std::string_view bytes = f.view();
  bool magicPrefix =
      bytes.substr(0, kMagic.size()) == kMagic.substr(0, std::min(bytes.size(), kMagic.size()));
  if (!magicPrefix)
    return Status::error("not an spmd program (bad magic; expected a file written by spmdc compile)");
  if (f.size() < kHeaderSize)
    return Status::error("truncated file: " + std::to_string(f.size()) + " bytes, shorter than the " +
                         std::to_string(kHeaderSize) + "-byte header");
  uint64_t major = getLe(f.data() + 8, 4);
  uint64_t minor = getLe(f.data() + 12, 4);
  if (major != static_cast<uint64_t>(kFormatVersion))
    return Status::error("format version " + std::to_string(major) + "." + std::to_string(minor) +
                         " is not supported (this build reads " + std::to_string(kFormatVersion) +
                         ".x); recompile the program with this spmdc");
  uint64_t jsonLength = getLe(f.data() + 16, 8);
  if (jsonLength > f.size() - kHeaderSize)
    return Status::error("truncated file: the header announces " + std::to_string(jsonLength) +
                         " bytes of JSON but only " + std::to_string(f.size() - kHeaderSize) + " follow");
  uint64_t dataStart = dataSectionOffset(jsonLength);
  if (dataStart > f.size())
    return Status::error("truncated file: " + std::to_string(f.size()) +
                         " bytes, the data section starts at " + std::to_string(dataStart));
  return jsonLength;
}

// Every blob of `w` matches its plan and lies in the data section.
Status checkWeight(const WeightEntry& w, const sharding::Mesh& mesh, uint64_t dataSize) {
  std::string where = "weight '" + w.fqn + "'";
  int64_t elem = ir::elementSize(w.dtype);
  int64_t limit = std::numeric_limits<int64_t>::max() / std::max<int64_t>(elem, 1);
  int64_t numel = 1;
  for (int64_t s : w.globalShape) {
    if (s < 0 || (s > 0 && numel > limit / s))
      return Status::error(where + ": global shape " + indexStr(w.globalShape) + " is negative or too large");
    numel *= s;
  }
  auto plans = planShards(w.globalShape, w.spec, mesh);
  if (!plans) return plans.status().withContext(where);
  if (plans->size() != w.shards.size())
    return Status::error(where + ": " + std::to_string(w.shards.size()) + " blobs, but spec " + w.spec.str() +
                         " on mesh " + mesh.str() + " needs " + std::to_string(plans->size()));
  for (size_t i = 0; i < plans->size(); ++i) {
    const ShardBlob& b = w.shards[i];
    const ShardPlan& plan = (*plans)[i];
    std::string bw = where + " blob " + indexStr(b.index);
    if (b.index != plan.index) return Status::error(bw + ": expected index " + indexStr(plan.index));
    int64_t shardNumel = 1;
    for (const auto& c : plan.chunks) shardNumel *= c.size;
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

}  // namespace

const WeightEntry* LoadedProgram::weight(std::string_view fqn) const {
  for (const auto& w : program_->weights)
    if (w.fqn == fqn) return &w;
  return nullptr;
}

Expected<std::span<const std::byte>> LoadedProgram::shardFor(const WeightEntry& entry, int64_t rank) const {
  const sharding::Mesh& mesh = program_->mesh;
  if (rank < 0 || rank >= mesh.numRanks())
    return Status::error(path() + ": rank " + std::to_string(rank) + " is outside mesh " + mesh.str());
  std::vector<int64_t> coords = mesh.coords(rank);
  std::vector<int64_t> index(coords.size(), -1);
  for (size_t a = 0; a < coords.size() && a < entry.spec.placements.size(); ++a)
    if (entry.spec.placements[a].isShard()) index[a] = coords[a];
  for (const ShardBlob& b : entry.shards) {
    if (b.index != index) continue;
    SPMD_CHECK(dataStart_ + b.offset + b.bytes <= file_.size());
    const auto* base = reinterpret_cast<const std::byte*>(file_.data());
    return std::span<const std::byte>(base + dataStart_ + b.offset, static_cast<size_t>(b.bytes));
  }
  return Status::error(path() + ": weight '" + entry.fqn + "' has no blob " + indexStr(index) + " for rank " +
                       std::to_string(rank));
}

Expected<LoadedProgram> readProgram(const std::string& path) {
  SPMD_ASSIGN_OR_RETURN(io::MappedFile file, io::MappedFile::open(path));
  auto jsonLength = checkHeader(file);
  if (!jsonLength) return jsonLength.status().withContext(path);
  auto program = programFromJson(file.view().substr(kHeaderSize, static_cast<size_t>(*jsonLength)));
  if (!program) return Status::error(path + ": corrupt program JSON: " + program.status().message());
  uint64_t dataStart = dataSectionOffset(*jsonLength);
  for (const auto& w : program->weights) {
    Status s = checkWeight(w, program->mesh, file.size() - dataStart);
    if (!s.isOk()) return s.withContext(path);
  }
  // The header's version is authoritative (a newer minor may be read).
  program->formatVersion = static_cast<int>(getLe(file.data() + 8, 4));
  program->formatMinor = static_cast<int>(getLe(file.data() + 12, 4));
  LoadedProgram out;
  out.program_ = std::make_unique<Program>(std::move(*program));
  out.dataStart_ = dataStart;
  out.file_ = std::move(file);
  return out;
}

}  // namespace spmd::program
