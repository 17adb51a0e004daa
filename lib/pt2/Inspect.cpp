// `spmdc inspect`: one summary, two renderings (text and JSON) built from
// the same Summary struct so they cannot disagree.
#include "pt2/Inspect.h"
#include "serialize/ToText.h"
#include "support/Strings.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace spmd::pt2 {
namespace {

struct Entry {
  std::string name;    // FQN or value name
  std::string value;   // graph value name
  std::string type;    // "f32[256, 64]"
  std::string detail;  // target of an output, "non_persistent", ...
};

struct Summary {
  std::string file, schema, torch;
  // By kind, in the signature's kind order (parameters, buffers, ..., user inputs).
  std::vector<std::pair<std::string, std::vector<Entry>>> inputs;
  std::vector<std::pair<std::string, std::vector<Entry>>> outputs;
  std::map<std::string, int64_t> ops;
  int64_t nodes = 0;
  int64_t paramCount = 0, paramBytes = 0, bufferBytes = 0;
  std::map<std::string, std::string> ranges;
};

std::string valueType(const ir::Value* v) {
  if (!v) return "";
  if (v->kind() == ir::ValueKind::SymInt) return "sym(" + v->symValue().str() + ")";
  return v->type().str();
}

using Groups = std::vector<std::pair<std::string, std::vector<Entry>>>;

std::vector<Entry>& group(Groups& groups, std::string_view kind) {
  for (auto& [k, entries] : groups)
    if (k == kind) return entries;
  return groups.emplace_back(std::string(kind), std::vector<Entry>{}).second;
}

// Kinds in the order users read them: weights first, then user data.
int kindRank(const std::string& kind) {
  static const char* kOrder[] = {"parameter",
                                 "buffer",
                                 "tensor_constant",
                                 "custom_obj",
                                 "constant_input",
                                 "user_input",
                                 "token",
                                 "user_output",
                                 "loss_output",
                                 "gradient_to_parameter",
                                 "gradient_to_user_input",
                                 "buffer_mutation",
                                 "parameter_mutation",
                                 "user_input_mutation"};
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i)
    if (kind == kOrder[i]) return i;
  return 100;
}

void sortGroups(Groups& groups) {
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return kindRank(a.first) < kindRank(b.first); });
}

Summary summarize(const Archive& a) {
  Summary s;
  s.file = a.path;
  s.schema = std::to_string(a.program.schemaMajor) + "." + std::to_string(a.program.schemaMinor);
  s.torch = a.program.torchVersion;
  for (const auto& in : a.program.signature.inputs) {
    Entry e{in.target.empty() ? in.name : in.target, in.name, valueType(in.value), ""};
    if (in.kind == ir::InputKind::Buffer && !in.persistent) e.detail = "non_persistent";
    group(s.inputs, ir::inputKindName(in.kind)).push_back(e);
    if (in.value && (in.kind == ir::InputKind::Parameter || in.kind == ir::InputKind::Buffer)) {
      int64_t n = in.value->type().numel().value_or(0);
      int64_t bytes = n * ir::elementSize(in.value->type().dtype);
      if (in.kind == ir::InputKind::Parameter) {
        s.paramCount += n;
        s.paramBytes += bytes;
      } else {
        s.bufferBytes += bytes;
      }
    }
  }
  for (const auto& out : a.program.signature.outputs) {
    const ir::Value* v = out.arg.value();
    Entry e{v ? v->name() : serialize::printArgument(out.arg), v ? v->name() : "", valueType(v), out.target};
    group(s.outputs, ir::outputKindName(out.kind)).push_back(e);
  }
  sortGroups(s.inputs);
  sortGroups(s.outputs);
  for (const auto& n : a.program.graph.nodes()) ++s.ops[n->target()];
  s.nodes = static_cast<int64_t>(a.program.graph.nodes().size());
  for (const auto& [sym, r] : a.program.ranges)
    s.ranges[sym] = "[" + std::to_string(r.min) + ", " +
                    (r.max == std::numeric_limits<int64_t>::max() ? "inf" : std::to_string(r.max)) + "]";
  return s;
}

}  // namespace

std::string inspectText(const Archive& a) {
  Summary s = summarize(a);
  std::string o = s.file + ": export schema " + s.schema + ", torch " + s.torch + "\n";
  o += "parameters: " + withCommas(s.paramCount) + " elements, " + withCommas(s.paramBytes) +
       " bytes; buffers: " + withCommas(s.bufferBytes) + " bytes\n";
  for (const auto& [sym, r] : s.ranges) o += "symbol " + sym + " in " + r + "\n";
  auto section = [&](const std::string& title, const Groups& groups) {
    for (const auto& [kind, entries] : groups) {
      o += title + " " + kind + " (" + std::to_string(entries.size()) + "):\n";
      for (const auto& e : entries) {
        o += "  " + e.name + "  " + e.type;
        if (!e.detail.empty()) o += "  -> " + e.detail;
        o += "\n";
      }
    }
  };
  section("inputs", s.inputs);
  section("outputs", s.outputs);
  o += "ops (" + std::to_string(s.ops.size()) + " kinds, " + std::to_string(s.nodes) + " nodes):\n";
  for (const auto& [op, n] : s.ops) o += "  " + op + "  " + std::to_string(n) + "\n";
  return o;
}

std::string inspectJson(const Archive& a) {
  Summary s = summarize(a);
  nlohmann::ordered_json j;
  j["file"] = s.file;
  j["schema_version"] = s.schema;
  j["torch_version"] = s.torch;
  j["parameter_count"] = s.paramCount;
  j["parameter_bytes"] = s.paramBytes;
  j["buffer_bytes"] = s.bufferBytes;
  j["num_nodes"] = s.nodes;
  j["ranges"] = s.ranges;
  auto entries = [](const Groups& groups) {
    nlohmann::ordered_json g = nlohmann::ordered_json::object();
    for (const auto& [kind, list] : groups) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& e : list) {
        nlohmann::ordered_json x;
        x["name"] = e.name;
        x["value"] = e.value;
        x["type"] = e.type;
        if (!e.detail.empty()) x["target"] = e.detail;
        arr.push_back(x);
      }
      g[kind] = arr;
    }
    return g;
  };
  j["inputs"] = entries(s.inputs);
  j["outputs"] = entries(s.outputs);
  j["ops"] = s.ops;
  return j.dump(1) + "\n";
}

}  // namespace spmd::pt2
