// Hugging Face tensor-parallel plans (see TpPlan.h). Which weight dim each
// style shards follows transformers' partition_tensor: colwise shards the
// output features (nn.Linear weight [out, in]: dim 0, bias dim 0; nn.Embedding:
// its embedding dim 1), rowwise the input features (Linear dim 1, bias
// replicated; Embedding dim 0, the vocabulary). GPT-2's Conv1D stores the
// weight transposed ([in, out]): colwise shards dim 1, rowwise dim 0.
// Packed styles (fused gate/up) shard each of the two halves: S(d, sf=2);
// "packed_colwise:3" (our extension) each third of a fused QKV. transformers
// 5's unit styles shard whole heads over a head-sized sub-mesh of the TP group:
// on the one TP axis here they are colwise/rowwise, and the compiler keeps the
// heads' semantics (it redistributes where a head would be cut).
#include "schema/TpPlan.h"

#include <algorithm>
#include <cctype>

#include "schema/Glob.h"

namespace spmd::schema {
namespace {

using sharding::Placement;

enum class Kind { Colwise, Rowwise, Replicated, Experts };

struct Style {
  const char* name;
  Kind kind;
  int64_t splitFactor;
};

// sequence_parallel and the router/identity styles place no parameter
// shard: their parameters stay replicated (sequence_parallel turns on the
// sequence-parallel pass instead, sequenceParallelEntry()). local_params
// (the module's forward sees its parameters' local shards, which their own
// entries place) and mla_kv_a_proj (a replicated projection whose rope part
// all-reduces its gradient) place none either.
constexpr Style kStyles[] = {
    {"colwise", Kind::Colwise, 1},
    {"colwise_rep", Kind::Colwise, 1},
    {"colwise_gather_output", Kind::Colwise, 1},
    {"local_colwise", Kind::Colwise, 1},
    {"unit_colwise", Kind::Colwise, 1},
    {"embedding_colwise", Kind::Colwise, 1},
    {"packed_colwise", Kind::Colwise, 2},
    {"rowwise", Kind::Rowwise, 1},
    {"rowwise_rep", Kind::Rowwise, 1},
    {"rowwise_split_input", Kind::Rowwise, 1},
    {"local_rowwise", Kind::Rowwise, 1},
    {"unit_rowwise", Kind::Rowwise, 1},
    {"embedding_rowwise", Kind::Rowwise, 1},
    {"packed_rowwise", Kind::Rowwise, 2},
    {"local_packed_rowwise", Kind::Rowwise, 2},
    {"grouped_gemm", Kind::Experts, 1},
    {"moe_tp_experts", Kind::Experts, 1},
    {"megamoe_experts", Kind::Experts, 1},
    {"replicate", Kind::Replicated, 1},
    {"replicated_with_grad_allreduce", Kind::Replicated, 1},
    {"local", Kind::Replicated, 1},
    {"local_params", Kind::Replicated, 1},
    {"mla_kv_a_proj", Kind::Replicated, 1},
    {"gather", Kind::Replicated, 1},
    {"all_reduce", Kind::Replicated, 1},
    {"sequence_parallel", Kind::Replicated, 1},
    {"ep_router", Kind::Replicated, 1},
    {"megamoe_router", Kind::Replicated, 1},
    {"moe_identity_expert", Kind::Replicated, 1},
};

// "packed_colwise:3": a packed style with its number of packed parts (a
// fused [q; k; v] projection: 3); transformers' default is 2.
std::optional<Style> findStyle(const std::string& name) {
  std::string base = name;
  int64_t parts = 0;
  if (size_t colon = name.find(':'); colon != std::string::npos) {
    base = name.substr(0, colon);
    std::string digits = name.substr(colon + 1);
    if (digits.empty() || digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
      return std::nullopt;
    parts = std::stoll(digits);
  }
  for (const Style& s : kStyles) {
    if (base != s.name) continue;
    if (parts == 0) return s;
    if (s.splitFactor == 1 || parts < 2) return std::nullopt;  // only packed styles take a count
    return Style{s.name, s.kind, parts};
  }
  return std::nullopt;
}

bool endsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Placement shard(int64_t dim, int64_t sf) {
  return sf == 1 ? Placement::shard(dim) : Placement::stridedShard(dim, sf);
}

}  // namespace

Status checkTpPlan(const TpPlan& plan, const std::string& where) {
  for (const auto& [glob, style] : plan) {
    if (findStyle(style)) continue;
    std::string known;
    for (const Style& s : kStyles) known += (known.empty() ? "" : ", ") + std::string(s.name);
    known += "; packed styles take a part count, e.g. packed_colwise:3";
    return Status::error(where + "/" + glob + ": unknown tensor-parallel style '" + style +
                         "' (styles: " + known + ")");
  }
  return Status::ok();
}

std::optional<std::string> sequenceParallelEntry(const TpPlan& plan) {
  for (const auto& [glob, style] : plan)
    if (style == "sequence_parallel") return glob;
  return std::nullopt;
}

namespace {

// The layout a weight's readers imply, for graphs without nn_module_stack
// (joint train steps): the table of an embedding, or an mm's right operand
// read as it is ([in, out], GPT-2's Conv1D); empty otherwise (nn.Linear
// transposes its [out, in] weight first).
std::string inferredType(const ir::Value& weight) {
  for (const ir::Node* u : weight.users()) {
    const ir::Argument* self = u->input("weight");
    if (u->target() == "aten.embedding.default" && self && self->value() == &weight) return "Embedding";
    const ir::Argument* mat2 = u->input("mat2");
    if ((u->target() == "aten.mm.default" || u->target() == "aten.addmm.default") && mat2 &&
        mat2->value() == &weight)
      return "Conv1D";
  }
  return "";
}

}  // namespace

std::map<std::string, std::string> moduleTypes(const ir::ExportedProgram& p) {
  std::map<std::string, std::string> out;
  for (const auto& n : p.graph.nodes())
    for (auto& [path, type] : ir::moduleFrames(n->metadata().nnModuleStack)) out.emplace(path, type);
  for (const ir::InputSpec& in : p.signature.inputs) {
    size_t dot = in.target.rfind('.');
    if (in.kind != ir::InputKind::Parameter || in.value == nullptr || dot == std::string::npos ||
        in.target.substr(dot + 1) != "weight" || out.count(in.target.substr(0, dot)))
      continue;
    std::string type = inferredType(*in.value);
    if (!type.empty()) out.emplace(in.target.substr(0, dot), type);
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> tpPlanEntry(const TpPlan& plan, const std::string& path) {
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& entry : plan) {
    bool hit = globMatch(entry.first, path) || globMatch("*." + entry.first, path);
    if (hit && (best == nullptr || entry.first.size() > best->first.size())) best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

Placement tpPlacement(const std::string& style, const std::string& moduleType, const std::string& leaf,
                      int64_t rank) {
  std::optional<Style> s = findStyle(style);
  if (!s || rank == 0 || s->kind == Kind::Replicated) return Placement::replicate();
  bool conv1d = endsWith(moduleType, ".Conv1D") || moduleType == "Conv1D";
  bool embedding = endsWith(moduleType, ".Embedding") || moduleType == "Embedding";
  bool bias = leaf == "bias" || rank == 1;
  if (s->kind == Kind::Experts) return Placement::shard(0);
  if (s->kind == Kind::Colwise) {
    if (bias) return shard(0, s->splitFactor);
    if (embedding) return Placement::shard(1);
    return shard(conv1d ? rank - 1 : rank - 2, s->splitFactor);
  }
  // Rowwise: the bias is added after the reduction, replicated.
  if (bias) return Placement::replicate();
  if (embedding) return Placement::shard(0);
  return shard(conv1d ? rank - 2 : rank - 1, s->splitFactor);
}

}  // namespace spmd::schema
