// Glob matching of tensor names, and "did you mean" for globs that match
// nothing.
//
//   globMatch("layers.*.wq.weight", "layers.0.wq.weight") == true   // * crosses dots
//   globMatch("layers.?.w[13].weight", "layers.1.w3.weight") == true
//   suggestGlob("layers.*.wq.weigth", {"layers.0.wq.weight", "norm.weight"})
//       == "layers.*.wq.weight"
//
// Matching follows POSIX fnmatch(3) without FNM_PATHNAME or FNM_PERIOD, in
// O(|pattern| * |name|) time (one backtrack point: the last star). A
// suggestion keeps the pattern's wildcards and fixes its literal characters
// with as few edits as possible so that it matches the closest name.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spmd::schema {

/// The longest glob a schema may give (a `match`, a tp_plan key); longer
/// ones are refused when the schema is read.
inline constexpr size_t kMaxGlobLength = 4096;

/// True when `name` matches the glob `pattern`: `*` matches any run of
/// characters (dots included), `?` one character, `[...]` / `[!...]` a class,
/// `\c` the character c. A `[` with no `]` within 256 characters is a literal.
/// Linear in the pattern for a fixed name: safe on any input length.
bool globMatch(std::string_view pattern, std::string_view name);

/// The number of edits (insert, delete, substitute or swap two adjacent
/// literal characters; wildcards are free) that make `pattern` match `name`.
int globDistance(std::string_view pattern, std::string_view name);

/// A corrected `pattern` that matches the name in `names` closest to it,
/// when that name is a few edits away (at most max(2, literals / 4)); the
/// first closest name wins ties. Nullopt when nothing is close, or when
/// `pattern` already matches one of `names`.
std::optional<std::string> suggestGlob(std::string_view pattern, const std::vector<std::string>& names);

/// The entry of `words` with the smallest plain edit distance to `word`
/// when it is at most max(1, size / 3) edits away; nullopt otherwise.
std::optional<std::string> closestWord(std::string_view word, const std::vector<std::string>& words);

}  // namespace spmd::schema
