// What the IR text's printer (ToText.cpp) and parser (FromText.cpp) must
// agree on: how strings, devices and enums are spelled, the default
// strides a type leaves out, and the argument kind a payload implies
// ("[1, %sym_size]" is a SymInts, "[%a, none]" an OptionalTensors):
//
//   impliedKind(Argument::symInt(nullptr, 3)) == Argument::Kind::Int
//     -> printed with its kind: sym_int(3)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Graph.h"

namespace spmd::serialize {

/// `s` in double quotes; `"`, `\` and control bytes escaped (\n, \t, \r,
/// \xNN); every other byte as it is, so unquote() gives back `s` exactly.
std::string quoted(std::string_view s);

/// "cpu", "cuda:0".
std::string deviceText(const ir::Device& d);
/// Parses deviceText's form; nullopt when malformed.
std::optional<ir::Device> deviceFromText(std::string_view text);

/// "contiguous_format", ..., or "memory_format(N)" for unknown codes.
std::string memoryFormatText(int64_t code);
/// The code of a memory format name; nullopt for other words.
std::optional<int64_t> memoryFormatFromText(std::string_view name);
/// "strided", or "layout(N)".
std::string layoutText(int64_t code);

/// Row-major strides of `sizes`, as torch computes them (a size-0 or size-1
/// dim counts as 1 in the products); symbolic sizes give products written
/// constant first.
std::vector<ir::Dim> contiguousStrides(const std::vector<ir::Dim>& sizes);

/// Trace-time hint of every symbol that some size, stride or SymInt value
/// of `g` is alone, sorted by name.
std::map<std::string, int64_t> symbolHints(const ir::Graph& g);

/// What one list item of the text is, for kind inference.
enum class ItemClass : uint8_t { Tensor, None, Int, Float, Bool, String, SymInt, SymFloat, SymBool, List };

/// The class of a reference to `v` (a tensor, token or object is a Tensor).
ItemClass refClass(const ir::Value& v);

/// The kind of an argument that is a reference to `v`: SymInt, SymFloat
/// or SymBool for symbolic values, Tensor for the rest (tokens, objects).
ir::Argument::Kind refKind(const ir::Value& v);

/// The argument kind a list of items of these classes implies; nullopt
/// when the items mix in a way no kind holds.
std::optional<ir::Argument::Kind> listKind(const std::vector<ItemClass>& items);

/// The kind the parser infers from `a`'s payload as printed; the printer
/// spells the kind only where it differs from a.kind.
ir::Argument::Kind impliedKind(const ir::Argument& a);

/// The same for a node output, printed as declarations ("%a: f32[2]",
/// "[%a: f32[2], %b: f32[2]]", "none").
ir::Argument::Kind definedKind(const ir::Argument& a);

}  // namespace spmd::serialize
