// Parsing and validation of placement schema files.
//
//   {"version": 1, "params": [{"mathc": "fc1.*", "placements": {"x": "S(0)"}}]}
//   -> "s.json: /params/0: unknown key 'mathc' (did you mean 'match'?; allowed:
//       match, placements, optional, comment)"
//
// Order of checks: size and nesting depth (a linear scan), JSON syntax
// (line:column), then the embedded JSON Schema (valijson; the most specific
// error wins), then placement strings (a hand parser: the schema's regex is
// dropped, std::regex recurses once per character), glob lengths and the mesh.
// nlohmann and valijson exceptions stop at this file's boundary; messages
// quote at most ~80 characters of any value.
#include "schema/PlacementSchema.h"

#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "schema/Glob.h"
#include "schema/TpPlan.h"
#include "support/Strings.h"

namespace spmd::schema {
namespace {

using nlohmann::json;

constexpr std::string_view kPlacementForms = "expected R, S(d), P, P(sum|avg|max|min)";

/// Limits on what a schema file may hold; a real schema is far below each.
constexpr size_t kMaxSchemaBytes = size_t{64} << 20;
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxPlacementLength = 32;
constexpr size_t kMaxDimDigits = 4;
constexpr size_t kMaxSplitFactorDigits = 6;
constexpr size_t kMaxMeshAxes = 16;
constexpr uint64_t kMaxMeshRanks = uint64_t{1} << 20;

/// `j` as JSON text, cut to ~80 characters for a message.
std::string shortDump(const json& j) { return elided(j.dump(), 80); }

/// Errors when `text` nests arrays/objects deeper than kMaxJsonDepth (counted
/// outside strings). Linear, and runs before anything that recurses.
Status checkJsonDepth(std::string_view text, std::string_view source) {
  int depth = 0;
  bool inString = false, escaped = false;
  size_t line = 1, column = 0;
  for (char c : text) {
    ++column;
    if (c == '\n') {
      ++line, column = 0;
    } else if (inString) {
      inString = escaped || c != '"';
      escaped = !escaped && c == '\\';
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return Status::error(std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column) +
                             ": JSON nested more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep; a placement schema needs at most 4");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::ok();
}

/// Reads an integer of 1 to `maxDigits` digits without a leading zero at s[i].
bool readInteger(std::string_view s, size_t& i, size_t maxDigits) {
  size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  size_t n = i - start;
  return n >= 1 && n <= maxDigits && (n == 1 || s[start] != '0');
}

/// True for R, P, P(sum|avg|max|min), S(d) and S(d,sf=k) / S(d, sf=k) with
/// d an integer of at most 4 digits and k >= 1 of at most 6, no leading zeros.
bool isPlacementText(std::string_view s) {
  if (s == "R" || s == "P") return true;
  if (s.size() > kMaxPlacementLength || s.size() < 4 || s[1] != '(' || s.back() != ')') return false;
  std::string_view arg = s.substr(2, s.size() - 3);
  if (s[0] == 'P') return arg == "sum" || arg == "avg" || arg == "max" || arg == "min";
  if (s[0] != 'S') return false;
  size_t i = arg[0] == '-' ? 1 : 0;
  if (!readInteger(arg, i, kMaxDimDigits)) return false;
  if (i == arg.size()) return true;
  if (arg[i++] != ',') return false;
  if (i < arg.size() && arg[i] == ' ') ++i;
  if (arg.substr(i, 3) != "sf=") return false;
  i += 3;
  if (i >= arg.size() || arg[i] == '0') return false;
  return readInteger(arg, i, kMaxSplitFactorDigits) && i == arg.size();
}

/// The embedded JSON Schema, compiled once.
Expected<const valijson::Schema*> compiledSchema() {
  static const std::pair<std::unique_ptr<valijson::Schema>, std::string> kCompiled = [] {
    try {
      json doc = json::parse(placementJsonSchema());
      // isPlacementText() checks placements instead: std::regex recurses per
      // character, so a long string would overflow the stack.
      doc["definitions"]["placement"].erase("pattern");
      auto schema = std::make_unique<valijson::Schema>();
      valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
      valijson::adapters::NlohmannJsonAdapter adapter(doc);
      parser.populateSchema(adapter, *schema);
      return std::make_pair(std::move(schema), std::string());
    } catch (const std::exception& e) {
      return std::make_pair(std::unique_ptr<valijson::Schema>(), std::string(e.what()));
    }
  }();
  if (!kCompiled.first)
    return Status::error("internal error: the built-in placement.schema.json does not load: " +
                         kCompiled.second);
  return kCompiled.first.get();
}

/// Parses JSON text; errors read "s.json:3:5: invalid JSON: <reason>".
Expected<json> parseJsonText(std::string_view text, std::string_view source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    std::string where = std::string(source) + ":1:" + std::to_string(e.byte);
    size_t at = what.find(" at line ");
    size_t colon = what.find(": ", at == std::string::npos ? 0 : at);
    if (at != std::string::npos && colon != std::string::npos) {
      int line = 0, column = 0;
      if (std::sscanf(what.c_str() + at, " at line %d, column %d", &line, &column) == 2)
        where = std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column);
    }
    std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
    if (size_t last = reason.find("; last read: '"); last != std::string::npos) {
      size_t end = reason.find("'; ", last + 14);  // line:column already say where
      reason.erase(last, end == std::string::npos ? std::string::npos : end + 1 - last);
    }
    return Status::error(where + ": invalid JSON: " + reason);
  } catch (const std::exception& e) {
    return Status::error(std::string(source) + ": invalid JSON: " + e.what());
  }
}

/// "/params/0" from valijson's context ["<root>", "[params]", "[0]"].
std::vector<std::string> contextTokens(const std::vector<std::string>& context) {
  std::vector<std::string> tokens;
  for (const std::string& c : context) {
    if (c.size() >= 2 && c.front() == '[' && c.back() == ']') tokens.push_back(c.substr(1, c.size() - 2));
  }
  return tokens;
}

std::string pointerOf(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& t : tokens) {
    out += '/';
    for (char c : t) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  }
  return out;
}

/// "s.json: /params/0: " (or "s.json: top level: ").
std::string at(std::string_view source, const std::string& pointer) {
  return std::string(source) + ": " + (pointer.empty() ? std::string("top level") : elided(pointer, 200)) +
         ": ";
}

/// The keys an object at `tokens` may have, or empty when unknown.
std::vector<std::string> allowedKeys(const std::vector<std::string>& tokens) {
  if (tokens.empty())
    return {"$schema",
            "comment",
            "version",
            "preset",
            "mesh",
            "tp_plan",
            "tp_axis",
            "rules",
            "sequence_parallel",
            "recompute",
            "mixed_precision",
            "params",
            "inputs",
            "outputs",
            "pipeline",
            "context_parallel",
            "reshard_after_forward"};
  if (tokens.size() == 1 && tokens[0] == "pipeline")
    return {"axis", "stages", "schedule", "microbatches", "virtual_stages", "comment"};
  if (tokens.size() == 1 && tokens[0] == "sequence_parallel") return {"axis", "dim", "comment"};
  if (tokens.size() == 1 && tokens[0] == "context_parallel")
    return {"axis", "rotate", "load_balance", "comment"};
  if (tokens.size() == 1 && tokens[0] == "mixed_precision") return {"param_dtype", "reduce_dtype", "comment"};
  if (tokens.size() == 1 && tokens[0] == "mesh") return {"shape", "axes"};
  if (tokens.size() == 2 && tokens[0] == "recompute") return {"save", "comment"};
  if (tokens.size() == 2 && (tokens[0] == "params" || tokens[0] == "inputs" || tokens[0] == "outputs"))
    return {"match", "placements", "optional", "comment"};
  return {};
}

/// The value at `tokens` in `doc`, or null when the path does not exist.
const json* nodeAt(const json& doc, const std::vector<std::string>& tokens) {
  const json* node = &doc;
  for (const std::string& t : tokens) {
    if (node->is_object() && node->contains(t)) {
      node = &(*node)[t];
    } else if (node->is_array() && !t.empty() && t.size() < 10 &&
               std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               std::stoul(t) < node->size()) {
      node = &(*node)[std::stoul(t)];
    } else {
      return nullptr;
    }
  }
  return node;
}

/// What the value at `tokens` must be, in words; empty when unknown.
std::string expectedAt(const std::vector<std::string>& t) {
  size_t n = t.size();
  bool rules = n >= 1 && (t[0] == "params" || t[0] == "inputs" || t[0] == "outputs");
  if (n == 0) return "an object {\"version\": 1, ...}";
  if (n == 1 && t[0] == "mesh") return "an object {\"shape\": [...], \"axes\": [...]}";
  if (n == 2 && t[0] == "mesh") return t[1] == "shape" ? "a list of mesh sizes" : "a list of axis names";
  if (n == 3 && t[0] == "mesh") return t[1] == "shape" ? "an integer >= 1" : "a string";
  if (n == 1 && t[0] == "outputs") return "\"replicate\", \"any\" or a list of rules";
  if (n == 1 && rules) return "a list of rules";
  if (n == 2 && rules) return "a rule {\"match\": ..., \"placements\": ...}";
  if (n == 3 && rules && t[2] == "match") return "a string (a glob)";
  if (n == 3 && rules && t[2] == "optional") return "true or false";
  if (n == 3 && rules && t[2] == "placements") return "an object {axis: placement} or a list of placements";
  if (n == 4 && rules && t[2] == "placements") return "a placement string (R, S(d), P, P(sum|avg|max|min))";
  if (!t.empty() && (t.back() == "comment" || t.back() == "$schema")) return "a string";
  return "";
}

/// A friendlier text for the common mistakes; empty to keep valijson's.
std::string friendlyReason(const json& doc, const std::vector<std::string>& tokens,
                           const std::string& description) {
  const json* node = nodeAt(doc, tokens);
  if (node == nullptr) return "";
  if (tokens.size() >= 3 && tokens[tokens.size() - 2] == "placements" && node->is_string())
    return shortDump(*node) + " is not a placement (" + std::string(kPlacementForms) + ")";
  if (tokens == std::vector<std::string>{"outputs"} && node->is_string())
    return shortDump(*node) + " is not an output policy (expected \"replicate\", \"any\" or a list of rules)";
  if (tokens.size() == 3 && tokens[0] == "mesh" && tokens[1] == "shape")
    return "expected an integer >= 1, got " + shortDump(*node);
  if (tokens == std::vector<std::string>{"version"})
    return "version " + shortDump(*node) + " is not supported (this spmdc reads version 1)";
  constexpr std::string_view kUnknownKey = "'additionalProperties' constraints: '";
  if (size_t key = description.find(kUnknownKey); key != std::string::npos) {
    size_t begin = key + kUnknownKey.size();
    std::string name = elided(description.substr(begin, description.rfind('\'') - begin));
    std::vector<std::string> allowed = allowedKeys(tokens);
    if (allowed.empty()) return "unknown key '" + name + "'";
    std::optional<std::string> near = closestWord(name, allowed);
    return "unknown key '" + name + "' (" + (near ? "did you mean '" + *near + "'?; " : "") +
           "allowed: " + joined(allowed) + ")";
  }
  if (description.find("'type' constraint") != std::string::npos) {
    std::string expected = expectedAt(tokens);
    if (!expected.empty()) return "expected " + expected + ", got " + node->type_name();
  }
  return "";
}

/// Of valijson's errors, the deepest; at equal depth an unknown key first.
const valijson::ValidationResults::Error* mostSpecific(const valijson::ValidationResults& results) {
  const valijson::ValidationResults::Error* best = nullptr;
  auto unknownKey = [](const valijson::ValidationResults::Error& e) {
    return e.description.find("'additionalProperties'") != std::string::npos;
  };
  for (const auto& err : results) {
    if (best == nullptr || err.context.size() > best->context.size() ||
        (err.context.size() == best->context.size() && unknownKey(err) && !unknownKey(*best)))
      best = &err;
  }
  return best;
}

/// Validates `doc` against the embedded schema; reports the most specific error.
Status validateDocument(const json& doc, std::string_view source) {
  SPMD_ASSIGN_OR_RETURN(const valijson::Schema* schema, compiledSchema());
  valijson::ValidationResults results;
  try {
    valijson::Validator validator;
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    if (validator.validate(*schema, adapter, &results)) return Status::ok();
  } catch (const std::exception& e) {
    return Status::error(std::string(source) + ": schema validation failed: " + e.what());
  }
  const valijson::ValidationResults::Error* best = mostSpecific(results);
  SPMD_CHECK(best != nullptr);
  std::vector<std::string> tokens = contextTokens(best->context);
  std::string reason = friendlyReason(doc, tokens, best->description);
  if (reason.empty()) {
    reason = best->description;
    if (!reason.empty() && reason.back() == '.') reason.pop_back();
    reason = elided(reason, 200);
  }
  return Status::error(at(source, pointerOf(tokens)) + reason);
}

/// Errors for a glob longer than kMaxGlobLength.
Status checkGlobLength(const std::string& glob, std::string_view source, const std::string& pointer) {
  if (glob.size() <= kMaxGlobLength) return Status::ok();
  return Status::error(at(source, pointer) + "the glob " + shortDump(json(glob)) + " has " +
                       withCommas(static_cast<int64_t>(glob.size())) + " characters; at most " +
                       std::to_string(kMaxGlobLength) + " are allowed");
}

Expected<sharding::Placement> placementAt(const json& text, std::string_view source,
                                          const std::string& pointer) {
  std::string s = text.get<std::string>();
  if (!isPlacementText(s))
    return Status::error(at(source, pointer) + shortDump(text) + " is not a placement (" +
                         std::string(kPlacementForms) + ")");
  Expected<sharding::Placement> p = sharding::parsePlacement(s);
  if (!p) return Status::error(at(source, pointer) + p.status().message());
  return p;
}

Expected<PlacementRule> ruleFrom(const json& j, std::string_view source, const std::string& pointer) {
  PlacementRule rule;
  rule.pointer = pointer;
  rule.match = j.at("match").get<std::string>();
  SPMD_RETURN_IF_ERROR(checkGlobLength(rule.match, source, pointer + "/match"));
  rule.optional = j.value("optional", false);
  rule.whereDivisible = j.value("where_divisible", false);
  if (j.contains("gather")) {
    const json& g = j.at("gather");
    rule.gather = g.is_array() || g.get<bool>();
    if (g.is_array()) rule.gatherAxes = g.get<std::vector<std::string>>();
  }
  const json& placements = j.at("placements");
  rule.positional = placements.is_array();
  if (rule.positional) {
    for (size_t i = 0; i < placements.size(); ++i) {
      SPMD_ASSIGN_OR_RETURN(sharding::Placement p,
                            placementAt(placements[i], source, pointer + "/placements/" + std::to_string(i)));
      rule.byPosition.push_back(p);
    }
  } else {
    for (const auto& [axis, text] : placements.items()) {
      SPMD_ASSIGN_OR_RETURN(
          sharding::Placement p,
          placementAt(text, source, pointer + "/placements/" + pointerOf({axis}).substr(1)));
      rule.byAxis.emplace_back(axis, p);
    }
  }
  return rule;
}

Expected<std::vector<PlacementRule>> rulesFrom(const json& doc, const char* key, std::string_view source) {
  std::vector<PlacementRule> rules;
  if (!doc.contains(key) || !doc[key].is_array()) return rules;
  const json& list = doc[key];
  for (size_t i = 0; i < list.size(); ++i) {
    SPMD_ASSIGN_OR_RETURN(PlacementRule r,
                          ruleFrom(list[i], source, "/" + std::string(key) + "/" + std::to_string(i)));
    rules.push_back(std::move(r));
  }
  return rules;
}

/// The mesh of a validated document: at most kMaxMeshAxes axes and
/// kMaxMeshRanks ranks, one name per axis.
Status meshFrom(const json& mesh, std::string_view source, PlacementSchema& s) {
  if (mesh.contains("shape")) {
    const json& shape = mesh["shape"];
    if (shape.size() > kMaxMeshAxes)
      return Status::error(at(source, "/mesh/shape") + "the mesh has " + std::to_string(shape.size()) +
                           " axes; at most " + std::to_string(kMaxMeshAxes) + " are allowed");
    uint64_t ranks = 1;
    for (size_t a = 0; a < shape.size(); ++a) {
      ranks *= shape[a].is_number_unsigned() ? std::min(shape[a].get<uint64_t>(), kMaxMeshRanks + 1) : 0;
      if (ranks == 0 || ranks > kMaxMeshRanks)
        return Status::error(at(source, "/mesh/shape") + "the mesh " + shortDump(shape) + " has more than " +
                             withCommas(static_cast<int64_t>(kMaxMeshRanks)) + " ranks");
      s.meshShape.push_back(static_cast<int64_t>(shape[a].get<uint64_t>()));
    }
  }
  if (mesh.contains("axes")) s.meshAxes = mesh["axes"].get<std::vector<std::string>>();
  if (!s.meshShape.empty() && !s.meshAxes.empty() && s.meshShape.size() != s.meshAxes.size())
    return Status::error(at(source, "/mesh") + "shape has " + std::to_string(s.meshShape.size()) +
                         " axes but axes names " + std::to_string(s.meshAxes.size()) +
                         "; give one name per mesh axis");
  return Status::ok();
}

/// The sequence_parallel request: the key's axis (and dim), else a tp_plan
/// entry with style sequence_parallel on the tp_plan's axis.
std::optional<SequenceParallelRequest> sequenceParallelFrom(const json& doc, const TpPlan& plan) {
  if (doc.contains("sequence_parallel")) {
    const json& sp = doc["sequence_parallel"];
    SequenceParallelRequest r;
    r.pointer = "/sequence_parallel";
    if (sp.is_string()) {
      r.axis = sp.get<std::string>();
    } else {
      r.axis = sp.at("axis").get<std::string>();
      if (sp.contains("dim")) r.dim = sp["dim"].get<int64_t>();
    }
    return r;
  }
  if (std::optional<std::string> glob = sequenceParallelEntry(plan)) {
    SequenceParallelRequest r;
    r.pointer = "/tp_plan/" + *glob;
    return r;
  }
  return std::nullopt;
}

/// Builds the schema from a document that passed validation.
Expected<PlacementSchema> schemaFrom(const json& doc, std::string_view source) {
  PlacementSchema s;
  s.source = std::string(source);
  if (doc.contains("mesh")) SPMD_RETURN_IF_ERROR(meshFrom(doc["mesh"], source, s));
  if (doc.contains("preset")) s.preset = *presetNamed(doc["preset"].get<std::string>());
  if (doc.contains("tp_plan"))
    for (const auto& [glob, style] : doc["tp_plan"].items()) {
      SPMD_RETURN_IF_ERROR(checkGlobLength(glob, source, "/tp_plan"));
      s.tpPlan.emplace_back(glob, style.get<std::string>());
    }
  SPMD_RETURN_IF_ERROR(checkTpPlan(s.tpPlan, std::string(source) + ": /tp_plan"));
  s.tpAxis = doc.value("tp_axis", "");
  s.sequenceParallel = sequenceParallelFrom(doc, s.tpPlan);
  if (doc.contains("context_parallel")) {
    const json& cp = doc["context_parallel"];
    s.contextParallel =
        ContextParallelRequest{cp.is_string() ? cp.get<std::string>() : cp.at("axis").get<std::string>()};
    if (cp.is_object()) s.contextParallel->rotate = cp.value("rotate", "allgather");
    if (cp.is_object() && cp.contains("load_balance"))
      s.contextParallel->loadBalance = cp.at("load_balance").get<bool>();
  }
  if (doc.contains("pipeline")) {
    const json& pp = doc["pipeline"];
    PipelineRequest r;
    r.axis = pp.value("axis", "pp");
    r.schedule = pp.value("schedule", "1f1b");
    r.microbatches = pp.at("microbatches").get<int64_t>();
    r.virtualStages = pp.value("virtual_stages", int64_t{1});
    if (pp.contains("stages") && pp["stages"].is_array())
      r.boundaries = pp["stages"].get<std::vector<std::string>>();
    else if (pp.contains("stages"))
      r.stageCount = pp["stages"].get<int64_t>();
    s.pipeline = std::move(r);
  }
  if (doc.contains("recompute"))
    for (const auto& [glob, how] : doc["recompute"].items()) {
      SPMD_RETURN_IF_ERROR(checkGlobLength(glob, source, "/recompute"));
      RecomputeRule rule{glob, RecomputeMode::Selective, {}};
      if (how.is_string())
        rule.mode = how == "full"   ? RecomputeMode::Full
                    : how == "auto" ? RecomputeMode::Auto
                                    : RecomputeMode::None;
      if (how.is_object()) rule.save = how.at("save").get<std::vector<std::string>>();
      s.recompute.push_back(std::move(rule));
    }
  if (doc.contains("mixed_precision")) {  // names checked by the JSON Schema's enums
    const json& mp = doc["mixed_precision"];
    MixedPrecisionRequest r;
    r.paramDtype = *mixedPrecisionDtype(mp.at("param_dtype").get<std::string>());
    if (mp.contains("reduce_dtype"))
      r.reduceDtype = *mixedPrecisionDtype(mp["reduce_dtype"].get<std::string>());
    s.mixedPrecision = r;
  }
  if (doc.contains("reshard_after_forward")) s.reshardAfterForward = doc["reshard_after_forward"].get<bool>();
  if (doc.contains("rules"))
    for (const auto& [target, text] : doc["rules"].items()) {
      auto rule = sharding::parseRuleText(text.get<std::string>());
      if (!rule) return Status::error(at(source, "/rules/" + target) + rule.status().message());
      s.opRules.emplace_back(target, std::move(*rule));
    }
  SPMD_ASSIGN_OR_RETURN(s.params, rulesFrom(doc, "params", source));
  SPMD_ASSIGN_OR_RETURN(s.inputs, rulesFrom(doc, "inputs", source));
  if (doc.contains("outputs") && doc["outputs"].is_string()) {
    s.outputPolicy = doc["outputs"] == "any" ? OutputPolicy::Any : OutputPolicy::Replicate;
  } else if (doc.contains("outputs")) {
    s.outputPolicy = OutputPolicy::Rules;
    SPMD_ASSIGN_OR_RETURN(s.outputs, rulesFrom(doc, "outputs", source));
  }
  return s;
}

}  // namespace

bool hasAutoRecompute(const std::vector<RecomputeRule>& rules) {
  return std::any_of(rules.begin(), rules.end(),
                     [](const RecomputeRule& r) { return r.mode == RecomputeMode::Auto; });
}

std::optional<std::string> mixedPrecisionDtype(std::string_view name) {
  if (name == "bf16" || name == "bfloat16") return "bfloat16";
  if (name == "fp16" || name == "float16") return "float16";
  if (name == "fp32" || name == "float32") return "float32";
  return std::nullopt;
}

Expected<PlacementSchema> parsePlacementSchema(std::string_view text, std::string_view source) {
  if (text.size() > kMaxSchemaBytes)
    return Status::error(std::string(source) + ": the placement schema has " +
                         withCommas(static_cast<int64_t>(text.size())) + " bytes; at most " +
                         withCommas(static_cast<int64_t>(kMaxSchemaBytes)) + " are allowed");
  SPMD_RETURN_IF_ERROR(checkJsonDepth(text, source));
  SPMD_ASSIGN_OR_RETURN(json doc, parseJsonText(text, source));
  SPMD_RETURN_IF_ERROR(validateDocument(doc, source));
  try {
    return schemaFrom(doc, source);
  } catch (const std::exception& e) {
    return Status::error(std::string(source) + ": " + e.what());
  }
}

Expected<PlacementSchema> loadPlacementSchema(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot read the placement schema: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  if (std::streamoff size = in.tellg(); size > static_cast<std::streamoff>(kMaxSchemaBytes))
    return Status::error(path + ": the placement schema has " + withCommas(size) + " bytes; at most " +
                         withCommas(static_cast<int64_t>(kMaxSchemaBytes)) + " are allowed");
  in.seekg(0, std::ios::beg);
  std::ostringstream text;
  text << in.rdbuf();
  return parsePlacementSchema(text.str(), path);
}

std::vector<std::string_view> presetNames() { return {"dp", "ddp", "fsdp", "hsdp"}; }

std::optional<Preset> presetNamed(std::string_view name) {
  if (name == "dp" || name == "ddp") return Preset::DataParallel;
  if (name == "fsdp") return Preset::Fsdp;
  if (name == "hsdp") return Preset::Hsdp;
  return std::nullopt;
}

namespace {

/// "dp, ddp, fsdp, hsdp" and then `more` ("dp, ddp, fsdp, hsdp, auto").
std::string presetList(const std::vector<std::string_view>& more = {}) {
  std::string list;
  for (const auto& names : {presetNames(), more})
    for (std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  return list;
}

}  // namespace

Expected<PlacementSchema> loadSchemaOrPreset(const std::string& arg,
                                             const std::vector<std::string_view>& toolPresets) {
  bool exists = std::ifstream(arg).good();
  if (presetNamed(arg) && !exists) return presetSchema(arg);
  // A bare word that names no file was meant as a preset ("fsdp2").
  if (!exists && arg.find('/') == std::string::npos && arg.find('.') == std::string::npos)
    return Status::error("--schema " + elided(arg) + ": no such preset or schema file (presets: " +
                         presetList(toolPresets) + "; or give a placement schema file)");
  return loadPlacementSchema(arg);
}

Expected<PlacementSchema> presetSchema(std::string_view name) {
  std::optional<Preset> preset = presetNamed(name);
  if (!preset)
    return Status::error("unknown placement preset '" + std::string(name) + "' (presets: " + presetList() +
                         "; or give a schema file)");
  PlacementSchema s;
  s.source = "preset '" + std::string(name) + "'";
  s.preset = *preset;
  return s;
}

}  // namespace spmd::schema
