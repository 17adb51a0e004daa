// IR -> torch.export JSON: the inverse of parseExportedProgram (FromExportJson.h).
//
//   %permute: f32[64, 256] = aten.permute.default(%p_w, [1, 0])
//   becomes the node
//   {"target": "torch.ops.aten.permute.default",
//    "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "p_w"}}, "kind": 1},
//               {"name": "dims", "arg": {"as_ints": [1, 0]}, "kind": 1}],
//    "outputs": [{"as_tensor": {"name": "permute"}}], "metadata": {...}, "name": "permute"}
//   and "permute" gets an entry in graph.tensor_values. A symbolic size
//   8*s52 (hint 16) is written {"as_expr": {"expr_str":
//   "Mul(Integer(8), Symbol('s52', positive=True, integer=True))", "hint": {"as_int": 16}}}.
//
// Reading the result back with parseExportedProgram gives a program
// whose printProgram text (ToText.h) is identical. Keys are emitted in a fixed
// order, so identical programs give identical JSON.
//
// The text is streamed by a JsonWriter (the write* functions); the
// Json-returning functions parse that text back into a tree, for tests and
// callers that want to look inside, so both always agree.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ir/Graph.h"
#include "serialize/JsonWriter.h"
#include "support/Status.h"

namespace spmd::serialize {

/// JSON with keys kept in insertion order (deterministic output).
using Json = nlohmann::ordered_json;

/// The sympy srepr of `e`: "Mul(Integer(8), Symbol('s52', positive=True,
/// integer=True))"; FromExportJson.cpp reads it back to the same tree.
std::string symExprSrepr(const ir::SymExpr& e);

/// A SymInt as the export schema writes it: {"as_int": 64}, or
/// {"as_expr": {"expr_str": <srepr>, "hint": {"as_int": <hint>}}}.
Json symIntToJson(const ir::Dim& d);

/// A number as the export schema writes floats: finite doubles as numbers
/// (printed round-trip exact), inf/nan as "Infinity", "-Infinity", "NaN".
Json floatToJson(double v);

/// A TensorMeta: {dtype, sizes, requires_grad, device, strides,
/// storage_offset, layout} (storage offset 0, strided layout).
Json tensorTypeToJson(const ir::TensorType& t);

/// One argument in the export schema's Argument union ({"as_ints": [1, 0]}).
Json argumentToJson(const ir::Argument& a);

/// The whole program in the export schema (the models/<m>.json of a .pt2).
/// Error when the graph inputs do not line up with the signature.
Expected<Json> exportedProgramToJson(const ir::ExportedProgram& program);

/// exportedProgramToJson as compact text (invalid UTF-8 is replaced);
/// streamed, so much faster than printing the tree.
Expected<std::string> exportedProgramToJsonText(const ir::ExportedProgram& program);

/// symIntToJson onto `w`.
void writeSymInt(JsonWriter& w, const ir::Dim& d);

/// floatToJson onto `w`.
void writeExportFloat(JsonWriter& w, double v);

/// tensorTypeToJson onto `w`.
void writeTensorType(JsonWriter& w, const ir::TensorType& t);

/// argumentToJson onto `w`.
void writeArgument(JsonWriter& w, const ir::Argument& a);

/// exportedProgramToJson onto `w`. On error `w` holds a partial document.
Status writeExportedProgram(JsonWriter& w, const ir::ExportedProgram& program);

/// A target as torch.export spells it: "aten.mm.default" ->
/// "torch.ops.aten.mm.default"; "_operator.mul", "spmd.*", "math.*",
/// "builtins.*" and "torch.*" stay as they are.
std::string exportTarget(const std::string& target);

}  // namespace spmd::serialize
