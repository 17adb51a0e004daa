// Small simdjson helpers for reading export JSON (FromExportJson.cpp, the
// .pt2 reader's payload configs, the program reader): every accessor returns an
// Expected with a message naming the missing/mistyped field.
//
//   SPMD_ASSIGN_OR_RETURN(object g, getObject(root, "graph"));
//   SPMD_ASSIGN_OR_RETURN(double f, toDouble(e, where));   // "-Infinity" -> -inf
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>
#include <utility>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::serialize {

/// A field `key` of `obj` that must be an object.
Expected<simdjson::dom::object> getObject(simdjson::dom::object obj, std::string_view key);
/// A field that may be absent or null: an empty object then.
simdjson::dom::object optObject(simdjson::dom::element obj, std::string_view key);
/// A field that may be absent or null in an object: an empty object then.
simdjson::dom::object optObject(simdjson::dom::object obj, std::string_view key);
/// A field `key` of `e` that must be an array.
Expected<simdjson::dom::array> getArray(simdjson::dom::element e, std::string_view key);
/// A field `key` of `obj` that must be an array.
Expected<simdjson::dom::array> getArray(simdjson::dom::object obj, std::string_view key);
/// `e` itself as an array.
Expected<simdjson::dom::array> asArray(simdjson::dom::element e, const std::string& where);
/// A field `key` of `e` that must be a string.
Expected<std::string_view> getString(simdjson::dom::element e, std::string_view key);
/// A field `key` of `obj` that must be an integer.
Expected<int64_t> getInt(simdjson::dom::object obj, std::string_view key);
/// An integer clamped to int64 (null or absent gives `fallback`).
int64_t clampedInt(simdjson::simdjson_result<simdjson::dom::element> e, int64_t fallback);
/// `e` as an int64 (integers beyond int64 are clamped).
Expected<int64_t> toInt(simdjson::dom::element e, const std::string& where);
/// `e` as a double; accepts the strings "Infinity", "-Infinity", "NaN".
Expected<double> toDouble(simdjson::dom::element e, const std::string& where);
/// The only field of a union object ({"as_tensor": {...}}).
Expected<std::pair<std::string_view, simdjson::dom::element>> singleField(simdjson::dom::element e,
                                                                          const std::string& where);
/// A SymInt ({"as_int": 3} or {"as_expr": {"expr_str", "hint"}}).
Expected<ir::Dim> parseSymInt(simdjson::dom::element e, std::string_view where);
/// A TensorMeta (dtype, sizes, strides, device, requires_grad).
Expected<ir::TensorType> parseTensorMeta(simdjson::dom::object meta, std::string_view where);
/// A Device ({"type": "cpu", "index": null}).
Expected<ir::Device> parseDevice(simdjson::dom::element e);

}  // namespace spmd::serialize
