// simdjson accessors with error messages (see JsonUtil.h).
#include "serialize/JsonUtil.h"

#include <cmath>
#include <limits>

namespace spmd::serialize {

using simdjson::SUCCESS;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

Expected<object> getObject(object obj, std::string_view key) {
  object out;
  if (obj[key].get_object().get(out) != SUCCESS)
    return Status::error("field '" + std::string(key) + "' is missing or not an object");
  return out;
}

namespace {
object emptyObject() {
  static const simdjson::padded_string kEmpty = simdjson::padded_string(std::string_view("{}"));
  static simdjson::dom::parser emptyParser;
  static const object kEmptyObject = emptyParser.parse(kEmpty).get_object().value_unsafe();
  return kEmptyObject;
}

template <typename Json>
object optObjectImpl(Json obj, std::string_view key) {
  object out;
  if (obj[key].get_object().get(out) != SUCCESS) return emptyObject();
  return out;
}

template <typename Json>
Expected<array> getArrayImpl(Json e, std::string_view key) {
  array out;
  if (e[key].get_array().get(out) != SUCCESS)
    return Status::error("field '" + std::string(key) + "' is missing or not a list");
  return out;
}
}  // namespace

object optObject(element obj, std::string_view key) { return optObjectImpl(obj, key); }
object optObject(object obj, std::string_view key) { return optObjectImpl(obj, key); }
Expected<array> getArray(element e, std::string_view key) { return getArrayImpl(e, key); }
Expected<array> getArray(object obj, std::string_view key) { return getArrayImpl(obj, key); }

Expected<array> asArray(element e, const std::string& where) {
  array out;
  if (e.get_array().get(out) != SUCCESS) return Status::error(where + ": expected a list");
  return out;
}

Expected<std::string_view> getString(element e, std::string_view key) {
  std::string_view out;
  if (e[key].get_string().get(out) != SUCCESS)
    return Status::error("field '" + std::string(key) + "' is missing or not a string");
  return out;
}

Expected<int64_t> getInt(object obj, std::string_view key) {
  element e;
  if (obj[key].get(e) != SUCCESS) return Status::error("field '" + std::string(key) + "' is missing");
  if (int64_t i = 0; e.get_int64().get(i) == SUCCESS) return i;  // no error context to build
  return toInt(e, "field '" + std::string(key) + "'");
}

int64_t clampedInt(simdjson::simdjson_result<element> r, int64_t fallback) {
  element e;
  if (r.get(e) != SUCCESS || e.is_null()) return fallback;
  int64_t i = 0;
  if (e.get_int64().get(i) == SUCCESS) return i;
  uint64_t u = 0;
  if (e.get_uint64().get(u) == SUCCESS) return std::numeric_limits<int64_t>::max();
  double d = 0;
  if (e.get_double().get(d) == SUCCESS) {
    if (d >= 9.2e18) return std::numeric_limits<int64_t>::max();
    if (d <= -9.2e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(d);
  }
  return fallback;
}

Expected<int64_t> toInt(element e, const std::string& where) {
  int64_t i = 0;
  if (e.get_int64().get(i) == SUCCESS) return i;
  uint64_t u = 0;
  if (e.get_uint64().get(u) == SUCCESS) return std::numeric_limits<int64_t>::max();
  bool b = false;
  if (e.get_bool().get(b) == SUCCESS) return b ? 1 : 0;
  return Status::error(where + ": expected an integer");
}

Expected<double> toDouble(element e, const std::string& where) {
  double d = 0;
  if (e.get_double().get(d) == SUCCESS) return d;
  int64_t i = 0;
  if (e.get_int64().get(i) == SUCCESS) return static_cast<double>(i);
  uint64_t u = 0;
  if (e.get_uint64().get(u) == SUCCESS) return static_cast<double>(u);
  std::string_view s;
  if (e.get_string().get(s) == SUCCESS) {
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  return Status::error(where + ": expected a number");
}

Expected<std::pair<std::string_view, element>> singleField(element e, const std::string& where) {
  object obj;
  if (e.get_object().get(obj) != SUCCESS) return Status::error(where + ": expected an argument object");
  for (auto field : obj) return std::make_pair(field.key, field.value);
  return Status::error(where + ": empty argument object");
}

namespace {
// {"as_int": n} with n an int64, the common case, without building the
// error context; false for anything else (parseSymInt then reports it).
bool plainSymInt(element e, int64_t& out) {
  object obj;
  if (e.get_object().get(obj) != SUCCESS) return false;
  for (auto field : obj) return field.key == "as_int" && field.value.get_int64().get(out) == SUCCESS;
  return false;
}

// The dims of one tensor's sizes or strides, into `out`.
Status parseDims(array dims, std::string_view name, std::vector<ir::Dim>& out) {
  out.reserve(dims.size());
  for (element s : dims) {
    int64_t i = 0;
    if (plainSymInt(s, i)) {
      out.emplace_back(i);
      continue;
    }
    SPMD_ASSIGN_OR_RETURN(ir::Dim d, parseSymInt(s, "tensor '" + std::string(name) + "'"));
    out.push_back(std::move(d));
  }
  return Status::ok();
}
}  // namespace

Expected<ir::Dim> parseSymInt(element e, std::string_view where) {
  if (int64_t i = 0; plainSymInt(e, i)) return ir::Dim(i);
  SPMD_ASSIGN_OR_RETURN(auto kv, singleField(e, std::string(where)));
  auto [key, val] = kv;
  if (key == "as_int") {
    SPMD_ASSIGN_OR_RETURN(int64_t i, toInt(val, std::string(where)));
    return ir::Dim(i);
  }
  if (key == "as_expr") {
    SPMD_ASSIGN_OR_RETURN(std::string_view text, getString(val, "expr_str"));
    int64_t hint = clampedInt(val["hint"]["as_int"], 0);
    auto d = ir::parseSymExpr(text, hint);
    if (!d) return d.status().withContext(std::string(where));
    return d;
  }
  return Status::error(std::string(where) + ": unknown SymInt kind '" + std::string(key) + "'");
}

Expected<ir::Device> parseDevice(element e) {
  ir::Device d;
  std::string_view type;
  if (e["type"].get_string().get(type) == SUCCESS) d.type = std::string(type);
  d.index = clampedInt(e["index"], -1);
  return d;
}

Expected<ir::TensorType> parseTensorMeta(object meta, std::string_view where) {
  ir::TensorType t;
  SPMD_ASSIGN_OR_RETURN(int64_t dtype, getInt(meta, "dtype"));
  auto st = ir::scalarTypeFromSchema(dtype);
  if (!st)
    return Status::error("tensor '" + std::string(where) + "': unknown dtype " + std::to_string(dtype));
  t.dtype = *st;
  SPMD_ASSIGN_OR_RETURN(array sizes, getArray(meta, "sizes"));
  SPMD_RETURN_IF_ERROR(parseDims(sizes, where, t.sizes));
  array strides;
  if (meta["strides"].get_array().get(strides) == SUCCESS)
    SPMD_RETURN_IF_ERROR(parseDims(strides, where, t.strides));
  element dev;
  if (meta["device"].get(dev) == SUCCESS) {
    SPMD_ASSIGN_OR_RETURN(t.device, parseDevice(dev));
  }
  bool rg = false;
  if (meta["requires_grad"].get_bool().get(rg) == SUCCESS) t.requiresGrad = rg;
  return t;
}

}  // namespace spmd::serialize
