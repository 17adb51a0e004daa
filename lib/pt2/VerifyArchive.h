// The archive half of the verifier (the IR half is ir/Verify.h): checks
// every stored tensor's metadata against its payload member and against
// the graph input that reads it, before anything slices its bytes.
//
//   fc1.weight: f32 sizes [256, 64] strides [64, 1] offset 0 in weight_0 (65,536 bytes)   ok
//   weight_0 cut to 1,000 bytes -> "payload of 'fc1.weight' (model/data/weights/weight_0) has
//                                   1000 bytes but its metadata needs 65536; the archive is
//                                   truncated or corrupt, re-export it"
#pragma once

#include "io/Zip.h"
#include "pt2/Archive.h"
#include "serialize/FromExportJson.h"

namespace spmd::pt2 {

/// Checks every payload of `archive` (weights and constants): sizes,
/// strides and storage offset valid (ir::verifyTensorType), the bytes they
/// reach inside the member, and dtype, sizes, strides and storage offset
/// equal to those of the graph input that reads it (`offsets`: the graph
/// values' storage offsets). Reads member sizes only, never payload bytes.
Status verifyPayloads(const io::ZipArchive& zip, const Archive& archive,
                      const serialize::StorageOffsets& offsets);

}  // namespace spmd::pt2
