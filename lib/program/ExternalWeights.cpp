// Weight sources (see ExternalWeights.h).
//
//   weight lm_head.weight bf16[256, 64] [S(0)] on mesh 4, source
//   model.safetensors : model.embed_tokens.weight (tied)
//   -> rank 2 copies rows [128, 192) of the mapped tensor: 8 KiB of a 32 KiB
//      tensor, the only pages of it the rank touches.
#include "program/ExternalWeights.h"

#include <cstring>
#include <filesystem>

#include "program/Verifier.h"
#include "program/Writer.h"
#include "support/Checksum.h"

namespace spmd::program {
namespace {

constexpr size_t kBlock = 4096;
constexpr size_t kBlocks = 16;

std::string named(const WeightEntry& w) {
  return "tensor '" + w.source->tensor + "' (weight '" + w.fqn + "')";
}

}  // namespace

uint64_t sampleChecksum(std::span<const std::byte> bytes) {
  if (bytes.size() <= kBlock * kBlocks) return checksum(bytes);
  std::vector<std::byte> samples(kBlock * kBlocks);
  const size_t last = bytes.size() - kBlock;
  for (size_t i = 0; i < kBlocks; ++i)
    std::memcpy(samples.data() + i * kBlock, bytes.data() + last * i / (kBlocks - 1), kBlock);
  return checksum(samples);
}

std::string sourcePath(const std::string& root, const std::string& file) {
  if (file.empty() || file.front() == '/' || root.empty()) return file;
  return root.back() == '/' ? root + file : root + "/" + file;
}

Expected<const io::SafetensorsFile*> SourceFiles::open(const std::string& file) {
  std::string path = sourcePath(root_, file);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = files_.find(path);
  if (it == files_.end()) {
    SPMD_ASSIGN_OR_RETURN(io::SafetensorsFile f, io::SafetensorsFile::open(path));
    it = files_.emplace(path, std::make_unique<io::SafetensorsFile>(std::move(f))).first;
  }
  return it->second.get();
}

Expected<const io::SafetensorsEntry*> SourceFiles::entry(const std::string& file, const std::string& tensor) {
  SPMD_ASSIGN_OR_RETURN(const io::SafetensorsFile* f, open(file));
  const io::SafetensorsEntry* e = f->find(tensor);
  if (!e) return Status::error(f->path() + " has no tensor '" + tensor + "'");
  return e;
}

Expected<DescribedSource> SourceFiles::describe(const std::string& file, const std::string& tensor) {
  SPMD_ASSIGN_OR_RETURN(const io::SafetensorsFile* f, open(file));
  SPMD_ASSIGN_OR_RETURN(const io::SafetensorsEntry* e, entry(file, tensor));
  DescribedSource d;
  d.ref.file = file;
  d.ref.tensor = tensor;
  d.ref.dtype = e->dtype;
  d.ref.fileBytes = f->size();
  d.ref.headerChecksum = checksum(f->headerBytes());
  d.ref.sampleChecksum =
      sampleChecksum(std::span<const std::byte>(static_cast<const std::byte*>(e->data), e->bytes));
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
    std::string have = std::string(ir::scalarTypeName(d->ref.dtype)) + intListStr(d->shape);
    std::string need = std::string(ir::scalarTypeName(w.dtype)) + intListStr(w.globalShape);
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
  if (checksum((*f)->headerBytes()) != ref.headerChecksum)
    return Status::error(
        path + ": its header (names, dtypes, shapes, offsets) differs from compile time (it holds " +
        named(w) + ")" + redo);
  const io::SafetensorsEntry* e = (*f)->find(ref.tensor);
  if (!e) return Status::error(path + " has no " + named(w) + redo);
  if (e->dtype != ref.dtype || e->shape != w.globalShape)
    return Status::error(path + ": " + named(w) + " is " + std::string(ir::scalarTypeName(e->dtype)) +
                         intListStr(e->shape) + ", the program needs " +
                         std::string(ir::scalarTypeName(ref.dtype)) + intListStr(w.globalShape) + redo);
  auto bytes = std::span<const std::byte>(static_cast<const std::byte*>(e->data), e->bytes);
  if (sampleChecksum(bytes) != ref.sampleChecksum)
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
  SPMD_ASSIGN_OR_RETURN(const io::SafetensorsFile* f, open(w.source->file));
  const io::SafetensorsEntry* e = f->find(w.source->tensor);
  SPMD_CHECK(e != nullptr);
  std::vector<sharding::Chunk> chunks = sharding::localChunks(w.globalShape, w.spec, mesh, mesh.coords(rank));
  int64_t elem = ir::elementSize(e->dtype);
  uint64_t need = static_cast<uint64_t>(elem);
  for (const auto& c : chunks) need *= static_cast<uint64_t>(c.size);
  if (out.size() != need)
    return Status::error(f->path() + ": " + named(w) + ": rank " + std::to_string(rank) + "'s region has " +
                         std::to_string(need) + " bytes, the buffer " + std::to_string(out.size()));
  auto global = std::span<const std::byte>(static_cast<const std::byte*>(e->data), e->bytes);
  sliceRowMajor(global, w.globalShape, elem, chunks, out.data());
  return Status::ok();
}

}  // namespace spmd::program
