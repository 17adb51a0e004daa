// A checkpoint written as a Hugging Face model folder, loadable by
// transformers' from_pretrained.
//
//   spmd-run --consolidate ckpt/ --hf-output out/ --hf-config-from /models/llama-1b --max-shard-size 1GB
//   -> out/model-00001-of-00003.safetensors ... (each at most 1 GB, tensors in
//      layer order), out/model.safetensors.index.json ({"metadata":
//      {"total_size": ...}, "weight_map": {name: file}}), out/config.json and
//      the tokenizer files copied from the source folder; optimizer states
//      are left out. One file fits: out/model.safetensors and no index.
#pragma once

#include <cstdint>
#include <string>

#include "support/Status.h"

namespace spmd::runtime {

/// What consolidateToHf writes.
struct HfExportOptions {
  /// The folder to write (created; must not hold safetensors already).
  std::string outDir;
  /// Largest file (transformers' save_pretrained default: 5 GB).
  int64_t maxShardBytes = 5'000'000'000;
  /// A Hugging Face folder whose config.json (required) and, where present,
  /// generation config and tokenizer files are copied; empty: weights only.
  std::string configFrom;
};

/// Writes checkpoint `dir` (spmd-run --save) as a Hugging Face folder:
/// parameters and buffers by FQN (the names a model exported with
/// `spmdc_export --hf DIR` has are the checkpoint's own), in their stored
/// dtype, in files of at most maxShardBytes (a tensor larger than that gets
/// a file of its own) with an index when there are several. Every file is
/// written atomically, the index last. Errors name the folder: a checkpoint
/// loadCheckpoint refuses, an output folder that holds safetensors files,
/// a configFrom without config.json, I/O.
Status consolidateToHf(const std::string& dir, const HfExportOptions& options);

}  // namespace spmd::runtime
