// The .spmd reader (see Reader.h and Format.h for the layout).
//
//   53 50 4d 44 50 52 4f 47  02 00 00 00 00 00 00 00   "SPMDPROG", major 2, minor 0
//   a0 0f 00 00 00 00 00 00  c2 94 d3 38 05 80 06 2d   JSON length 4000, its XXH3-64
//   7b 22 66 6f ...                                    "{"fo...
//   -> data section at alignUp(32 + 4000) = 4096; blob offsets count from there.
//
// Checks, in order: magic, version, header length, JSON length against the
// file, JSON checksum, JSON (mesh size bounded while parsing), the JSON's
// version against the header's, then verifyProgram (shapes, blobs against
// their plans and the data section, overlaps). A blob's checksum is checked
// when shardFor hands its bytes out (or by verifyWeights), so a rank hashes
// only the pages it reads.
#include "program/Reader.h"

#include <algorithm>
#include <cstring>

#include "program/Format.h"
#include "program/ProgramJson.h"
#include "program/Verifier.h"
#include "support/Strings.h"

namespace spmd::program {
namespace {

constexpr const char* kDamaged = "the file is damaged: recompile or copy it again";

uint64_t getLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

std::string versionStr(uint64_t major, uint64_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Header checks; returns the JSON length.
Expected<uint64_t> checkHeader(const io::MappedFile& f) {
  std::string_view bytes = f.view();
  if (bytes.substr(0, kMagic.size()) != kMagic.substr(0, std::min(bytes.size(), kMagic.size())))
    return Status::error("not an spmd program (bad magic; expected a file written by spmdc compile)");
  if (f.size() < 16)
    return Status::error("truncated file: " + std::to_string(f.size()) + " bytes, shorter than the " +
                         std::to_string(kHeaderSize) + "-byte header");
  uint64_t major = getLe(f.data() + 8, 4);
  uint64_t minor = getLe(f.data() + 12, 4);
  if (major != static_cast<uint64_t>(kFormatVersion))
    return Status::error("format version " + versionStr(major, minor) +
                         " is not supported (this build reads " + std::to_string(kFormatVersion) +
                         ".x); recompile the program with this spmdc");
  if (f.size() < kHeaderSize)
    return Status::error("truncated file: " + std::to_string(f.size()) + " bytes, shorter than the " +
                         std::to_string(kHeaderSize) + "-byte header");
  uint64_t jsonLength = getLe(f.data() + 16, 8);
  if (jsonLength > f.size() - kHeaderSize)
    return Status::error("truncated file: the header announces " + std::to_string(jsonLength) +
                         " bytes of JSON but only " + std::to_string(f.size() - kHeaderSize) + " follow");
  uint64_t dataStart = dataSectionOffset(jsonLength);
  if (dataStart > f.size())
    return Status::error("truncated file: " + std::to_string(f.size()) +
                         " bytes, the data section starts at " + std::to_string(dataStart));
  if (checksum(bytes.substr(kHeaderSize, static_cast<size_t>(jsonLength))) != getLe(f.data() + 24, 8))
    return Status::error(std::string("the program JSON does not match its checksum: ") + kDamaged);
  return jsonLength;
}

// The JSON's format_version is the header's.
Status checkJsonVersion(const Program& p, const io::MappedFile& f) {
  uint64_t major = getLe(f.data() + 8, 4);
  uint64_t minor = getLe(f.data() + 12, 4);
  if (p.formatVersion < 0 || p.formatMinor < 0 || static_cast<uint64_t>(p.formatVersion) != major ||
      static_cast<uint64_t>(p.formatMinor) != minor)
    return Status::error("the program JSON says format " + std::to_string(p.formatVersion) + "." +
                         std::to_string(p.formatMinor) + " but the header says " + versionStr(major, minor) +
                         "; recompile the program with this spmdc");
  return Status::ok();
}

}  // namespace

const WeightEntry* LoadedProgram::weight(std::string_view fqn) const {
  for (const auto& w : program_->weights)
    if (w.fqn == fqn) return &w;
  return nullptr;
}

Expected<std::span<const std::byte>> LoadedProgram::blob(const WeightEntry& entry, const ShardBlob& b) const {
  SPMD_CHECK(dataStart_ + b.offset + b.bytes <= file_.size());
  const auto* base = reinterpret_cast<const std::byte*>(file_.data());
  std::span<const std::byte> bytes(base + dataStart_ + b.offset, static_cast<size_t>(b.bytes));
  if (checksum(bytes) != b.checksum)
    return Status::error(path() + ": weight '" + entry.fqn + "' blob " + formatShape(b.index) +
                         " does not match its checksum: " + kDamaged);
  return bytes;
}

Expected<std::span<const std::byte>> LoadedProgram::shardFor(const WeightEntry& entry, int64_t rank) const {
  const sharding::Mesh& mesh = program_->mesh;
  if (rank < 0 || rank >= mesh.numRanks())
    return Status::error(path() + ": rank " + std::to_string(rank) + " is outside mesh " + mesh.str());
  std::vector<int64_t> coords = mesh.coords(rank);
  std::vector<int64_t> index(coords.size(), -1);
  for (size_t a = 0; a < coords.size() && a < entry.spec.placements.size(); ++a)
    if (entry.spec.placements[a].isShard()) index[a] = coords[a];
  for (const ShardBlob& b : entry.shards)
    if (b.index == index) return blob(entry, b);
  return Status::error(path() + ": weight '" + entry.fqn + "' has no blob " + formatShape(index) +
                       " for rank " + std::to_string(rank));
}

Status LoadedProgram::verifyWeights() const {
  for (const WeightEntry& w : program_->weights) {
    for (const ShardBlob& b : w.shards) SPMD_RETURN_IF_ERROR(blob(w, b).status());
    SPMD_RETURN_IF_ERROR(sources_->verify(w).withContext(path()));
  }
  return Status::ok();
}

ir::ScalarType LoadedProgram::storedDtype(const WeightEntry& entry) {
  return entry.source && !entry.source->zeros ? entry.source->dtype : entry.dtype;
}

Status LoadedProgram::readShard(const WeightEntry& entry, int64_t rank, std::span<std::byte> out) const {
  if (entry.source) {
    if (rank < 0 || rank >= program_->mesh.numRanks())
      return Status::error(path() + ": rank " + std::to_string(rank) + " is outside mesh " +
                           program_->mesh.str());
    return sources_->readShard(entry, program_->mesh, rank, out).withContext(path());
  }
  SPMD_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, shardFor(entry, rank));
  if (bytes.size() != out.size())
    return Status::error(path() + ": weight '" + entry.fqn + "' blob has " + std::to_string(bytes.size()) +
                         " bytes, its local shape needs " + std::to_string(out.size()));
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return Status::ok();
}

void LoadedProgram::setWeightsRoot(const std::string& root) {
  sources_ = std::make_unique<SourceFiles>(root);
}

Expected<LoadedProgram> readProgram(const std::string& path) {
  SPMD_ASSIGN_OR_RETURN(io::MappedFile file, io::MappedFile::open(path));
  auto jsonLength = checkHeader(file);
  if (!jsonLength) return jsonLength.status().withContext(path);
  auto program = programFromJson(file.view().substr(kHeaderSize, static_cast<size_t>(*jsonLength)));
  if (!program) return Status::error(path + ": corrupt program JSON: " + program.status().message());
  uint64_t dataStart = dataSectionOffset(*jsonLength);
  SPMD_RETURN_IF_ERROR(checkJsonVersion(*program, file).withContext(path));
  SPMD_RETURN_IF_ERROR(verifyProgram(*program, file.size() - dataStart).withContext(path));
  LoadedProgram out;
  out.program_ = std::make_unique<Program>(std::move(*program));
  out.dataStart_ = dataStart;
  out.sources_ = std::make_unique<SourceFiles>(out.program_->weightsRoot);
  out.file_ = std::move(file);
  return out;
}

}  // namespace spmd::program
