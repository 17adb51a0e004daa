// The .spmd writer (see Writer.h and Format.h for the layout).
//
//   weight w f32[4, 6] spec [S(1)] on mesh 2 (x)
//   -> plan: index [0] chunks {(0,4), (0,3)}, index [1] chunks {(0,4), (3,3)}
//   -> blob [0] at data offset 0 (48 bytes), blob [1] at data offset 64 (48 bytes)
//
// Steps: plan every weight's shards and their offsets (sizes alone decide
// the layout), print the JSON, then stream header, JSON, padding and blobs
// into a temporary file that is renamed over `path` once complete.
#include "program/Writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "program/Format.h"
#include "program/ProgramJson.h"

namespace spmd::program {
namespace {

// A file written under a temporary name and renamed into place by commit();
// destroyed uncommitted, it removes the temporary. Atomic for readers, not
// durable (see commit()).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)) {}
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status open() {
    std::string templ = path_ + ".tmp.XXXXXX";
    fd_ = ::mkstemp(templ.data());
    if (fd_ < 0) return sysError("cannot create a temporary file beside it");
    tmp_ = templ;
    if (::fchmod(fd_, 0644) != 0) return sysError("cannot set the file mode");
    return Status::ok();
  }

  Status write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return sysError("cannot write");
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
    return Status::ok();
  }

  /// Writes zeros up to file offset `offset`.
  Status padTo(uint64_t offset) {
    static const char kZeros[kAlignment] = {};
    SPMD_CHECK(offset >= written_);
    while (written_ < offset)
      SPMD_RETURN_IF_ERROR(write(kZeros, std::min<uint64_t>(offset - written_, kAlignment)));
    return Status::ok();
  }

  uint64_t written() const { return written_; }

  // No fsync: the rename keeps readers from ever seeing a partial file, and
  // a failed write leaves only the old file (or none). Durability across a
  // power loss is not promised; an fsync cost ~0.5 s per 10 MB program.
  Status commit() {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return sysError("cannot close");
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      return sysError("cannot rename the temporary file into place");
    tmp_.clear();
    return Status::ok();
  }

 private:
  Status sysError(const char* what) const {
    return Status::error(std::string(what) + ": " + std::strerror(errno));
  }

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

void putLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

std::string shapeStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Validates one entry, fills its spec (normalized), local shape and shards
// with offsets from `dataEnd` on; returns the plans in shard order.
Expected<std::vector<ShardPlan>> layOut(WeightEntry& w, const sharding::Mesh& mesh, uint64_t& dataEnd) {
  std::string where = "weight '" + w.fqn + "'";
  int64_t elem = ir::elementSize(w.dtype);
  if (elem <= 0) return Status::error(where + ": unknown dtype " + std::to_string(static_cast<int>(w.dtype)));
  for (int64_t s : w.globalShape)
    if (s < 0) return Status::error(where + ": negative size in global shape " + shapeStr(w.globalShape));
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
    return Status::error(where + ": local shape " + shapeStr(w.localShape) + " is not rank 0's shard " +
                         shapeStr(rank0) + " of " + shapeStr(w.globalShape) + " under " + w.spec.str());
  w.shards.clear();
  for (const auto& plan : *plans) {
    int64_t numel = 1;
    for (const auto& c : plan.chunks) numel *= c.size;
    dataEnd = alignUp(dataEnd);
    w.shards.push_back(ShardBlob{plan.index, dataEnd, static_cast<uint64_t>(numel * elem)});
    dataEnd += static_cast<uint64_t>(numel * elem);
  }
  return plans;
}

Status writeBlobs(AtomicFile& file, uint64_t dataStart, const WeightEntry& w,
                  const std::vector<ShardPlan>& plans, const WeightSource& source) {
  SPMD_ASSIGN_OR_RETURN(std::span<const std::byte> global, source.globalBytes(w.fqn));
  int64_t elem = ir::elementSize(w.dtype);
  uint64_t expected = static_cast<uint64_t>(product(w.globalShape) * elem);
  if (global.size() != expected)
    return Status::error("weight '" + w.fqn + "': the source holds " + std::to_string(global.size()) +
                         " bytes but " + std::string(ir::scalarTypeName(w.dtype)) + shapeStr(w.globalShape) +
                         " needs " + std::to_string(expected));
  std::vector<std::byte> buffer;
  for (size_t i = 0; i < plans.size(); ++i) {
    const ShardBlob& blob = w.shards[i];
    buffer.resize(blob.bytes);
    if (blob.bytes > 0) sliceRowMajor(global, w.globalShape, elem, plans[i].chunks, buffer.data());
    SPMD_RETURN_IF_ERROR(file.padTo(dataStart + blob.offset));
    SPMD_RETURN_IF_ERROR(file.write(buffer.data(), buffer.size()));
  }
  return Status::ok();
}

Status writeFile(const std::string& path, Program& program, const WeightSource& source) {
  uint64_t dataEnd = 0;
  std::vector<std::vector<ShardPlan>> plans;
  std::set<std::string> seen;
  for (auto& w : program.weights) {
    if (!seen.insert(w.fqn).second) return Status::error("weight '" + w.fqn + "' appears twice");
    SPMD_ASSIGN_OR_RETURN(auto p, layOut(w, program.mesh, dataEnd));
    plans.push_back(std::move(p));
  }
  program.formatVersion = kFormatVersion;
  program.formatMinor = kFormatMinor;
  SPMD_ASSIGN_OR_RETURN(std::string json, programToJsonText(program));
  std::string header(kMagic);
  putLe(header, kFormatVersion, 4);
  putLe(header, kFormatMinor, 4);
  putLe(header, json.size(), 8);
  SPMD_CHECK(header.size() == kHeaderSize);

  AtomicFile file(path);
  SPMD_RETURN_IF_ERROR(file.open());
  SPMD_RETURN_IF_ERROR(file.write(header.data(), header.size()));
  SPMD_RETURN_IF_ERROR(file.write(json.data(), json.size()));
  uint64_t dataStart = dataSectionOffset(json.size());
  SPMD_RETURN_IF_ERROR(file.padTo(dataStart));
  for (size_t i = 0; i < program.weights.size(); ++i)
    SPMD_RETURN_IF_ERROR(writeBlobs(file, dataStart, program.weights[i], plans[i], source));
  SPMD_CHECK(file.written() == dataStart + dataEnd);
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

void sliceRowMajor(std::span<const std::byte> global, const std::vector<int64_t>& shape, int64_t elemSize,
                   const std::vector<sharding::Chunk>& chunks, std::byte* out) {
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
    std::memcpy(out, global.data(), static_cast<size_t>(numel * elemSize));
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
  size_t run = static_cast<size_t>(last.blockSize() * stride[k]);
  std::vector<size_t> index(k, 0);
  while (true) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) base += taken[d][index[d]] * stride[d];
    for (int64_t b = 0; b < last.blocks; ++b) {
      int64_t src = base + (last.offset + b * last.blockStride) * stride[k];
      SPMD_CHECK(src + static_cast<int64_t>(run) <= static_cast<int64_t>(global.size()));
      std::memcpy(out, global.data() + src, run);
      out += run;
    }
    size_t d = k;
    while (d > 0 && ++index[d - 1] == taken[d - 1].size()) index[--d] = 0;
    if (d == 0) break;
  }
}

Status writeProgram(const std::string& path, Program& program, const WeightSource& source) {
  return writeFile(path, program, source).withContext(path);
}

}  // namespace spmd::program
