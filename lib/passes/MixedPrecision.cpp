// Mixed precision of a train step (see MixedPrecision.h).
#include "passes/MixedPrecision.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "passes/Pass.h"
#include "sharding/Placement.h"
#include "sharding/Propagation.h"

namespace spmd::passes {
namespace {

constexpr std::string_view kCast = "aten._to_copy.default";

std::optional<ir::ScalarType> dtypeOf(const std::string& name) {
  if (name == "bfloat16") return ir::ScalarType::BFloat16;
  if (name == "float16") return ir::ScalarType::Half;
  if (name == "float32") return ir::ScalarType::Float;
  return std::nullopt;
}

std::string describe(const schema::MixedPrecisionRequest& p) {
  return "param_dtype " + p.paramDtype + ", reduce_dtype " + p.reduceDtype;
}

// The policy a parameter cast's metadata records, or nullopt.
std::optional<schema::MixedPrecisionRequest> castPolicy(const ir::Node& n) {
  auto it = n.metadata().other.find("custom");
  if (n.target() != kCast || it == n.metadata().other.end()) return std::nullopt;
  auto doc = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains(kMixedPrecisionKey) || !doc[kMixedPrecisionKey].is_object())
    return std::nullopt;
  const auto& p = doc[kMixedPrecisionKey];
  auto param = schema::mixedPrecisionDtype(p.value("param_dtype", ""));
  auto reduce = schema::mixedPrecisionDtype(p.value("reduce_dtype", ""));
  if (!param || !reduce) return std::nullopt;
  return schema::MixedPrecisionRequest{*param, *reduce};
}

// Puts `moved` (in this order) right before `before`.
void moveBefore(ir::Graph& g, const std::vector<ir::Node*>& moved, const ir::Node* before) {
  std::vector<ir::Node*> order;
  for (const auto& n : g.nodes()) {
    if (std::find(moved.begin(), moved.end(), n.get()) != moved.end()) continue;
    if (n.get() == before) order.insert(order.end(), moved.begin(), moved.end());
    order.push_back(n.get());
  }
  g.setNodeOrder(order);
}

const ir::Node* firstReader(const ir::Value* v, const ir::Node* except) {
  const ir::Node* first = nullptr;
  for (const ir::Node* u : v->users())
    if (u != except && (first == nullptr || u->index() < first->index())) first = u;
  return first;
}

// Under fsdp: `anchor = alias(param)` read only by `cast = _to_copy(anchor)`
// becomes `cast = _to_copy(param)`, `anchor = alias(cast)` (param_dtype),
// the anchor right before the cast's first reader, which reads it. The cast
// stays where the step traced it (at its start): bucket-shard-collectives
// issues a gather one bucket ahead, and its input must exist by then.
// Returns the parameter so gathered, or nullptr.
const ir::Value* gatherAfterCast(ir::Graph& g, ir::Node* cast) {
  ir::Value* anchored = cast->inputValues().empty() ? nullptr : cast->inputValues()[0];
  ir::Node* anchor = anchored ? anchored->producer() : nullptr;
  if (anchor == nullptr || anchor->target() != "aten.alias.default" ||
      !anchor->metadata().other.count(std::string(sharding::kLayoutKey)) || anchored->users().size() != 1)
    return nullptr;
  ir::Value* param = anchor->inputValues()[0];
  ir::Value* casted = cast->outputValues()[0];
  const ir::Node* reader = firstReader(casted, nullptr);
  if (reader == nullptr) return nullptr;
  g.replaceUses({{anchored, param}}, [&](const ir::Node& n) { return &n != cast; });
  g.replaceUses({{casted, anchored}}, [&](const ir::Node& n) { return &n == anchor; });
  g.replaceUses({{param, casted}}, [&](const ir::Node& n) { return &n != anchor; });
  anchored->mutableType().dtype = casted->type().dtype;
  moveBefore(g, {anchor}, reader);
  return param;
}

// Reads gradient `grad` of `param` through a layout anchor at the value of
// `reduce` dtype in its chain of casts, so it is reduced in that dtype.
Status reduceIn(ir::Graph& g, ir::Value* grad, const ir::Value* param, ir::ScalarType reduce) {
  ir::Value* v = grad;
  while (v->type().dtype != reduce && v->producer() && v->producer()->target() == kCast &&
         !v->producer()->inputValues().empty())
    v = v->producer()->inputValues()[0];
  if (v == grad || v->type().dtype != reduce) return Status::ok();  // reduced as it is output
  std::string name = freshName(g, v->name() + "_reduced");
  SPMD_ASSIGN_OR_RETURN(ir::Value * a, g.addValue(name, ir::ValueKind::Tensor));
  a->mutableType() = v->type();
  SPMD_ASSIGN_OR_RETURN(ir::Node * n,
                        g.addNode(name, "aten.alias.default", {{"self", ir::Argument::tensor(v), false}},
                                  {ir::Argument::tensor(a)}));
  n->mutableMetadata().other[std::string(sharding::kLayoutAsKey)] = param->name();
  const ir::Node* reader = firstReader(v, n);
  g.replaceUses({{v, a}}, [&](const ir::Node& u) { return &u == n; });
  if (reader != nullptr) moveBefore(g, {n}, reader);
  return Status::ok();
}

// Runs each gradient's casts (to reduce_dtype, then to float32) right after
// the value they read is made. The traced step has them all at its end (the
// parameter casts that produce them come first in the forward, so autograd
// runs their backward last). For a gathered (fsdp) parameter each whole
// param_dtype gradient then lived until the end of the backward, a term no
// sharding shrinks; cast at once, it dies at once, and its reduce-scatter
// (placed after the cast) starts as the layer's backward ends, as FSDP2's
// post-backward hook does. Only those, and only where the whole
// param_dtype gradient is larger than its reduced shard (bf16 over f32: more
// than 2 shards): otherwise the early cast gains nothing and its float32
// copies would meet the backward's activations.
void castGradientsWhenReady(ir::Graph& g, const std::vector<ir::Value*>& grads) {
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> after;  // producer -> its casts, in order
  std::unordered_set<const ir::Node*> moved;
  for (ir::Value* grad : grads) {
    std::vector<ir::Node*> chain;
    for (ir::Value* v = grad;
         v->producer() && v->producer()->target() == kCast && v->producer()->inputValues().size() == 1;
         v = v->producer()->inputValues()[0])
      chain.push_back(v->producer());
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const ir::Node* producer = (*it)->inputValues()[0]->producer();
      if (producer == nullptr || moved.count(*it)) break;  // reads a graph input: stays
      after[producer].push_back(*it);
      moved.insert(*it);
    }
  }
  if (moved.empty()) return;
  std::vector<ir::Node*> order;
  std::function<void(ir::Node*)> emit = [&](ir::Node* n) {
    order.push_back(n);
    auto it = after.find(n);
    if (it == after.end()) return;
    for (ir::Node* cast : it->second) emit(cast);
  };
  for (const auto& n : g.nodes())
    if (!moved.count(n.get())) emit(n.get());
  g.setNodeOrder(order);
}

}  // namespace

std::optional<schema::MixedPrecisionRequest> archivePolicy(const ir::ExportedProgram& program) {
  for (const auto& n : program.graph.nodes())
    if (auto p = castPolicy(*n)) return p;
  return std::nullopt;
}

Expected<std::optional<schema::MixedPrecisionRequest>> requestedPolicy(
    const std::optional<schema::MixedPrecisionRequest>& flag, const schema::PlacementSchema& schema) {
  const auto& field = schema.mixedPrecision;
  if (flag && field && (flag->paramDtype != field->paramDtype || flag->reduceDtype != field->reduceDtype))
    return Status::error("--mixed-precision (" + describe(*flag) +
                         ") differs from the schema's mixed_precision (" + describe(*field) + ") in " +
                         schema.source + ": give one of them");
  return flag ? flag : field;
}

Status MixedPrecision::run(ir::ExportedProgram& program, GraphPassContext& context) {
  SPMD_ASSIGN_OR_RETURN(auto asked, requestedPolicy(context.options.mixedPrecision, context.schema));
  auto exported = archivePolicy(program);
  const std::string reexport = "python -m spmdc_export --train --mixed-precision ";
  if (asked && !exported)
    return Status::error("mixed precision (" + describe(*asked) +
                         ") was asked for, but this step was not exported with it: export it with " +
                         reexport + asked->paramDtype + " --reduce-dtype " + asked->reduceDtype +
                         " (the casts are traced), or leave the policy out");
  if (asked && (asked->paramDtype != exported->paramDtype || asked->reduceDtype != exported->reduceDtype))
    return Status::error("mixed precision (" + describe(*asked) +
                         ") differs from the policy the step was exported with (" + describe(*exported) +
                         "): export it again with " + reexport + asked->paramDtype + " --reduce-dtype " +
                         asked->reduceDtype + ", or ask for the exported policy");
  if (!exported) return Status::ok();
  if (!asked && context.placements)
    context.placements->notes.push_back("mixed precision: " + describe(*exported) +
                                        ", as the step was exported");
  ir::Graph& g = program.graph;
  std::vector<ir::Node*> casts;
  for (const auto& n : g.nodes())
    if (castPolicy(*n)) casts.push_back(n.get());
  std::unordered_set<const ir::Value*> gathered;
  for (ir::Node* cast : casts)
    if (const ir::Value* param = gatherAfterCast(g, cast)) gathered.insert(param);
  std::map<std::string, const ir::Value*> params;
  for (const auto& in : program.signature.inputs)
    if (in.kind == ir::InputKind::Parameter && in.value) params[in.target] = in.value;
  ir::ScalarType reduce = *dtypeOf(exported->reduceDtype);
  std::vector<std::pair<ir::Value*, const ir::Value*>> grads;  // (gradient, its parameter)
  for (const auto& out : program.signature.outputs) {
    auto it = params.find(out.target);
    if (out.kind == ir::OutputKind::GradientToParameter && out.arg.value() && it != params.end())
      grads.emplace_back(out.arg.value(), it->second);
  }
  std::unordered_map<const ir::Value*, int64_t> shards;  // pieces each input is stored in
  for (size_t i = 0; context.placements && i < program.signature.inputs.size(); ++i) {
    const auto& in = program.signature.inputs[i];
    if (in.value == nullptr || i >= context.placements->inputs.size()) continue;
    int64_t n = 1;
    for (size_t d = 0; d < in.value->type().sizes.size(); ++d)
      n *= sharding::shardCount(context.placements->inputs[i], static_cast<int64_t>(d),
                                context.placements->mesh);
    shards[in.value] = n;
  }
  const int64_t paramSize = ir::elementSize(*dtypeOf(exported->paramDtype));
  std::vector<ir::Value*> gradValues;
  for (const auto& [grad, param] : grads)
    if (gathered.count(param) && paramSize * shards[param] > ir::elementSize(reduce))
      gradValues.push_back(grad);
  castGradientsWhenReady(g, gradValues);
  for (const auto& [grad, param] : grads) SPMD_RETURN_IF_ERROR(reduceIn(g, grad, param, reduce));
  return g.verify();
}

}  // namespace spmd::passes
