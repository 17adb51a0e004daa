// The JSON part of a .spmd file: a Program without its weight bytes.
//
//   {"format_version": {"major": 2, "minor": 0}, "name": "mlp",
//    "mesh": {"shape": [8], "axes": ["x"]},
//    "inputs": [{"name": "x", "spec": ["S(0)"], "global_type": {"dtype": 7, "sizes": [...], ...}}],
//    "outputs": [...],
//    "weights": [{"fqn": "fc1.weight", "dtype": 7, "global_shape": [256, 64], "local_shape": [32, 64],
//                 "spec": ["S(0)"],
//                 "shards": [{"index": [0], "offset": 0, "bytes": 8192, "xxh3": "9c4e..."}, ...]}],
//    "collectives": [{"node": "all_reduce", "kind": "all_reduce", "axis": "x", ...}],
//    "provenance": {"source": "mlp.pt2", "compiler": "spmdc 0.1.0"},
//    "exported_program": { <the graph in torch.export's schema, see serialize/ToExportJson.h> }}
//
// schemas/program.schema.json documents every field. Writing streams the
// text (JsonWriter) and is deterministic (fixed key order); reading checks
// every field's type.
#pragma once

#include <string>
#include <string_view>

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::program {

/// The JSON text of `program`, compact (format_version is always this
/// build's). Error when the graph cannot be serialized, a spec does not fit
/// the mesh, the boundary lists do not match the signature, or a
/// provenance key repeats.
Expected<std::string> programToJsonText(const Program& program);

/// Parses the JSON part of a .spmd file. Errors name the offending field
/// ("weights[2]: field 'fqn' is missing or not a string"); a mesh over
/// kMaxRanks ranks is refused before anything multiplies its sizes. The
/// format version in the JSON is read but not judged here (readProgram
/// compares it with the header's); verifyProgram checks the rest.
Expected<Program> programFromJson(std::string_view json);

}  // namespace spmd::program
