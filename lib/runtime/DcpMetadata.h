// The `.metadata` file of a PyTorch Distributed Checkpoint (DCP) folder, as
// torch.distributed.checkpoint's FileSystemWriter writes it (torch 2.4 to
// 2.14): a pickled Metadata whose state_dict_metadata maps each key to a
// TensorStorageMetadata (dtype, global size, chunks with offsets and sizes)
// or a BytesStorageMetadata, and whose storage_data maps (key, chunk
// offsets) to the file, byte offset and length of that chunk's torch.save
// bytes.
//
//   ckpt/.metadata        Metadata(state_dict_metadata={"model.w": TensorStorageMetadata(
//                            TensorProperties(torch.float32), torch.Size([8, 4]),
//                            [ChunkStorageMetadata(offsets=(0, 0), sizes=(4, 4)), ...])}, ...,
//                          storage_data={MetadataIndex("model.w", (0, 0)): _StorageInfo("__0_0.distcp", 0,
//                          1321), ...})
//   ckpt/__0_0.distcp     rank 0's chunks, each a torch.save'd tensor at its offset
//
// No LibTorch here (the fuzz harness compiles this file alone).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Types.h"
#include "support/Status.h"

namespace spmd::runtime {

/// Where one chunk's (or bytes item's) serialized bytes lie.
struct DcpStorage {
  std::string file;  ///< a plain file name inside the checkpoint folder ("__0_0.distcp")
  int64_t offset = 0;
  int64_t length = 0;
  /// The bytes are a safetensors tensor's raw little-endian elements
  /// (DCP's HuggingFaceStorageWriter format), not a torch.save'd tensor.
  bool raw = false;
};

/// One saved piece of a tensor: a box of the global tensor.
struct DcpChunk {
  std::vector<int64_t> offsets, sizes;
  DcpStorage storage;
};

/// One tensor of the checkpoint.
struct DcpTensor {
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<int64_t> size;
  std::vector<DcpChunk> chunks;
};

/// A parsed and verified `.metadata`.
struct DcpMetadata {
  std::map<std::string, DcpTensor> tensors;  ///< by DCP key ("model.layers.0.wq.weight")
  std::map<std::string, DcpStorage> bytes;   ///< bytes items (optimizer param_groups, ...), by key
};

/// Parses `bytes` (the contents of `path`) and verifies it: a pickled
/// torch.distributed.checkpoint.metadata.Metadata; per tensor a known dtype,
/// a size of dims >= 0, chunks of its rank inside it whose volumes add up to
/// the tensor's (no byte of it unsaved); per chunk and bytes item a storage
/// record with a plain file name, a non-negative offset and length, and no
/// storage transforms (compression). Errors read "<path>: <what>" and name
/// the key.
Expected<DcpMetadata> parseDcpMetadata(std::string_view bytes, const std::string& path);

/// The pickled Metadata of `md` that torch.distributed.checkpoint.load reads
/// (class paths and fields as torch 2.14 writes them; bytes items are not
/// written).
Expected<std::string> formatDcpMetadata(const DcpMetadata& md);

/// The torch dtype name of `t` ("float32"), or "" when DCP has none for it.
std::string_view torchDtypeName(ir::ScalarType t);

}  // namespace spmd::runtime
