// A summary of an archive for `spmdc inspect`.
//
//   mlp.pt2: export schema 8.17, torch 2.11.0+cu130
//   parameters (4): 33,088 elements, 132,352 bytes
//     fc1.weight  f32[256, 64]
//   ...
//   ops (3 kinds, 5 nodes):
//     aten.addmm.default  2
#pragma once

#include <string>

#include "pt2/Archive.h"

namespace spmd::pt2 {

/// Human-readable summary: versions, inputs and outputs by kind with shapes
/// and dtypes, op histogram, parameter count and bytes.
std::string inspectText(const Archive& archive);
/// The same summary as a JSON document (pretty-printed, keys sorted).
std::string inspectJson(const Archive& archive);

}  // namespace spmd::pt2
