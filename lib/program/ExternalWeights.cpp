// Weight sources (see ExternalWeights.h).
//
//   weight lm_head.weight bf16[256, 64] [S(0)] on mesh 4, source
//   model.safetensors : model.embed_tokens.weight (tied)
//   -> rank 2 preads rows [128, 192) of the tensor: 8 KiB of a 32 KiB tensor,
//      straight into its buffer; nothing else of the file is read or mapped.
#include "program/ExternalWeights.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "program/Writer.h"
#include "support/Checksum.h"
#include "support/Strings.h"

namespace spmd::program {
namespace {

constexpr size_t kBlock = 4096;
constexpr size_t kBlocks = 16;

std::string named(const WeightEntry& w) {
  return "tensor '" + w.source->tensor + "' (weight '" + w.fqn + "')";
}

// Where sampleChecksum's blocks start within `bytes` bytes (none: hash all).
std::vector<uint64_t> sampleOffsets(uint64_t bytes) {
  std::vector<uint64_t> offsets;
  if (bytes <= kBlock * kBlocks) return offsets;
  const uint64_t last = bytes - kBlock;
  for (uint64_t i = 0; i < kBlocks; ++i) offsets.push_back(last * i / (kBlocks - 1));
  return offsets;
}

// Reads exactly out.size() bytes at `offset` of `fd`.
Status readAt(int fd, uint64_t offset, std::span<std::byte> out, const std::string& path) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::error(path + ": cannot read " + std::to_string(out.size()) + " bytes at offset " +
                           std::to_string(offset) +
                           (n < 0 ? ": " + std::string(std::strerror(errno)) : ": end of file"));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// XXH3 of the sampled blocks of a tensor of `size` bytes (all of it when
// small), each fetched by `read(offset, out)`: from memory or from a file.
Expected<uint64_t> sampled(uint64_t size, const std::function<Status(uint64_t, std::span<std::byte>)>& read) {
  std::vector<uint64_t> offsets = sampleOffsets(size);
  std::vector<std::byte> bytes(offsets.empty() ? size : kBlock * kBlocks);
  if (offsets.empty()) SPMD_RETURN_IF_ERROR(read(0, bytes));
  for (size_t i = 0; i < offsets.size(); ++i)
    SPMD_RETURN_IF_ERROR(read(offsets[i], std::span(bytes).subspan(i * kBlock, kBlock)));
  return checksum(bytes);
}

}  // namespace

uint64_t sampleChecksum(std::span<const std::byte> bytes) {
  return *sampled(bytes.size(), [&](uint64_t offset, std::span<std::byte> out) {
    std::memcpy(out.data(), bytes.data() + offset, out.size());
    return Status::ok();
  });
}

std::string sourcePath(const std::string& root, const std::string& file) {
  if (file.empty() || file.front() == '/' || root.empty()) return file;
  return root.back() == '/' ? root + file : root + "/" + file;
}

SourceFiles::Open::~Open() {
  if (fd >= 0) ::close(fd);
}

Expected<const SourceFiles::Open*> SourceFiles::open(const std::string& file) {
  std::string path = sourcePath(root_, file);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = files_.find(path);
  if (it == files_.end()) {
    // The map serves the header only; tensor bytes are read with pread, so
    // no page of the file stays mapped into the rank (its RSS is its copy).
    SPMD_ASSIGN_OR_RETURN(io::SafetensorsFile f, io::SafetensorsFile::open(path));
    auto o = std::make_unique<Open>(std::move(f));
    o->headerChecksum = checksum(o->file.headerBytes());
    o->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (o->fd < 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
    it = files_.emplace(path, std::move(o)).first;
  }
  return it->second.get();
}

uint64_t SourceFiles::Open::offsetOf(const io::SafetensorsEntry& e) const {
  return static_cast<uint64_t>(static_cast<const char*>(e.data) - file.headerBytes().data());
}

Expected<uint64_t> SourceFiles::Open::sample(const io::SafetensorsEntry& e) const {
  return sampled(e.bytes, [&](uint64_t offset, std::span<std::byte> out) {
    return readAt(fd, offsetOf(e) + offset, out, file.path());
  });
}

Expected<const io::SafetensorsEntry*> SourceFiles::entry(const std::string& file, const std::string& tensor) {
  SPMD_ASSIGN_OR_RETURN(const Open* f, open(file));
  const io::SafetensorsEntry* e = f->file.find(tensor);
  if (!e) return Status::error(f->file.path() + " has no tensor '" + tensor + "'");
  return e;
}

Expected<DescribedSource> SourceFiles::describe(const std::string& file, const std::string& tensor) {
  SPMD_ASSIGN_OR_RETURN(const Open* f, open(file));
  SPMD_ASSIGN_OR_RETURN(const io::SafetensorsEntry* e, entry(file, tensor));
  DescribedSource d;
  d.ref.file = file;
  d.ref.tensor = tensor;
  d.ref.dtype = e->dtype;
  d.ref.fileBytes = f->file.size();
  d.ref.headerChecksum = f->headerChecksum;
  SPMD_ASSIGN_OR_RETURN(d.ref.sampleChecksum, f->sample(*e));
  d.shape = e->shape;
  return d;
}

namespace {

bool floating(ir::ScalarType t) {
  using S = ir::ScalarType;
  return t == S::Half || t == S::BFloat16 || t == S::Float || t == S::Double;
}

}  // namespace

Status recordSources(Program& program) {
  SourceFiles files(program.weightsRoot);
  for (WeightEntry& w : program.weights) {
    if (!w.source || w.source->zeros) continue;
    std::string what = " (it should hold weight '" + w.fqn + "')";
    auto d = files.describe(w.source->file, w.source->tensor);
    if (!d)
      return Status::error(d.status().message() + what +
                           "; export again from the checkpoint you compile against");
    std::string path = sourcePath(program.weightsRoot, w.source->file);
    std::string have = std::string(ir::scalarTypeName(d->ref.dtype)) + formatShape(d->shape);
    std::string need = std::string(ir::scalarTypeName(w.dtype)) + formatShape(w.globalShape);
    if (d->shape != w.globalShape ||
        (d->ref.dtype != w.dtype && !(floating(d->ref.dtype) && floating(w.dtype))))
      return Status::error(path + ": tensor '" + w.source->tensor + "' is " + have + " but weight '" + w.fqn +
                           "' is " + need + "; export again from this checkpoint");
    w.source = d->ref;
  }
  return Status::ok();
}

Status SourceFiles::verify(const WeightEntry& w) {
  if (!w.source || w.source->zeros) return Status::ok();
  const WeightSourceRef& ref = *w.source;
  std::string path = sourcePath(root_, ref.file);
  const char* redo = ": the checkpoint changed since compile; recompile the program against it";
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size != ref.fileBytes)  // checked before parsing: a truncated file's header lies
    return Status::error(path + " has " + std::to_string(size) + " bytes, " + std::to_string(ref.fileBytes) +
                         " at compile time (it holds " + named(w) + ")" + redo);
  auto f = open(ref.file);
  if (!f && ec)
    return Status::error(f.status().message() + " (it holds " + named(w) +
                         "); pass spmd-run --weights-root DIR where the checkpoint moved, or recompile");
  if (!f) return Status::error(f.status().message() + " (it holds " + named(w) + ")" + redo);
  if ((*f)->headerChecksum != ref.headerChecksum)
    return Status::error(
        path + ": its header (names, dtypes, shapes, offsets) differs from compile time (it holds " +
        named(w) + ")" + redo);
  const io::SafetensorsEntry* e = (*f)->file.find(ref.tensor);
  if (!e) return Status::error(path + " has no " + named(w) + redo);
  if (e->dtype != ref.dtype || e->shape != w.globalShape)
    return Status::error(path + ": " + named(w) + " is " + std::string(ir::scalarTypeName(e->dtype)) +
                         formatShape(e->shape) + ", the program needs " +
                         std::string(ir::scalarTypeName(ref.dtype)) + formatShape(w.globalShape) + redo);
  SPMD_ASSIGN_OR_RETURN(uint64_t sampled, (*f)->sample(*e));
  if (sampled != ref.sampleChecksum)
    return Status::error(path + ": the bytes of " + named(w) + " differ from compile time" + redo);
  return Status::ok();
}

Status SourceFiles::readShard(const WeightEntry& w, const sharding::Mesh& mesh, int64_t rank,
                              std::span<std::byte> out) {
  SPMD_CHECK(w.source.has_value());
  if (w.source->zeros) {
    if (!out.empty()) std::memset(out.data(), 0, out.size());
    return Status::ok();
  }
  // Each rank checks what it reads (64 KiB of samples), on every node.
  SPMD_RETURN_IF_ERROR(verify(w));
  SPMD_ASSIGN_OR_RETURN(const Open* f, open(w.source->file));
  const io::SafetensorsEntry* e = f->file.find(w.source->tensor);
  SPMD_CHECK(e != nullptr);
  std::vector<sharding::Chunk> chunks = sharding::localChunks(w.globalShape, w.spec, mesh, mesh.coords(rank));
  int64_t elem = ir::elementSize(e->dtype);
  uint64_t need = static_cast<uint64_t>(elem);
  for (const auto& c : chunks) need *= static_cast<uint64_t>(c.size);
  if (out.size() != need)
    return Status::error(f->file.path() + ": " + named(w) + ": rank " + std::to_string(rank) +
                         "'s region has " + std::to_string(need) + " bytes, the buffer " +
                         std::to_string(out.size()));
  // The runs of the region in order, each read where it lies (a row shard is one read).
  Status st = Status::ok();
  std::byte* next = out.data();
  uint64_t base = f->offsetOf(*e);
  forEachRun(w.globalShape, elem, chunks, [&](uint64_t offset, uint64_t bytes) {
    if (st.isOk()) st = readAt(f->fd, base + offset, std::span(next, bytes), f->file.path());
    next += bytes;
  });
  return st;
}

}  // namespace spmd::program
