// Export JSON -> IR: reads torch.export's serialized ExportedProgram (the
// models/<m>.json of a .pt2, export schema 8.x) into the IR.
//
//   SPMD_ASSIGN_OR_RETURN(ir::ExportedProgram p, serialize::parseExportedProgram(json, "mlp"));
//   p.graph.nodes().size();   // 5
//
// parseExportedProgram parses and verifies in one call; a reader that
// parses the document itself (the .pt2 reader, which times the two steps,
// or the program reader, whose graph sits inside a larger document) calls
// buildProgram and verifyProgram.
#pragma once

#include <simdjson.h>

#include <map>
#include <string>
#include <string_view>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::serialize {

/// Storage offsets (elements) of graph tensor values by name, as the model
/// JSON's tensor_values give them (values absent: offset 0).
using StorageOffsets = std::map<std::string, int64_t, std::less<>>;

/// Builds the program from a parsed model JSON document (not yet verified);
/// records non-zero storage offsets of tensor values in `offsets` when given.
Expected<ir::ExportedProgram> buildProgram(const simdjson::dom::element& root, std::string name,
                                           StorageOffsets* offsets = nullptr);
/// Runs ir::verifyProgram with the storage offsets the model JSON gave.
Status verifyProgram(const ir::ExportedProgram& program, const StorageOffsets& offsets);

/// Builds and verifies the IR from the model JSON text alone. Errors name
/// the node, value or field at fault.
Expected<ir::ExportedProgram> parseExportedProgram(std::string_view json, std::string name = "model");

}  // namespace spmd::serialize
