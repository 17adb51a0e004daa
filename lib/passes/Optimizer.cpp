// Optimizer updates appended to train-step graphs (see Optimizer.h).
//
// AdamW, as torch.optim.AdamW (decoupled weight decay), op for op as its
// single-tensor and foreach paths compute it, so the bytes match PyTorch's:
//   step += 1;  p *= 1 - lr*wd
//   m = lerp(m, g, 1-b1);  v = addcmul(v*b2, g, g, value=1-b2)
//   bc1 = 1 - b1^step, bc2 = 1 - b2^step       (in float64, as Python floats)
//   p += (-(lr / bc1) * m) / (sqrt(v) / sqrt(bc2) + eps)   (addcdiv's order)
// SGD, as torch.optim.SGD: g += wd*p;  buf = momentum*buf + g;  p -= lr*buf
#include "passes/Optimizer.h"

#include <map>

#include "passes/GraphPass.h"
#include "passes/Pass.h"
#include "sharding/Propagation.h"

namespace spmd::passes {
namespace {

using ir::Argument;

class Builder {
 public:
  explicit Builder(ir::ExportedProgram& p) : p_(p), g_(p.graph) {}

  std::string unique(const std::string& base) { return freshName(g_, base); }

  Expected<ir::Value*> op(const std::string& target, std::vector<ir::NamedArgument> args,
                          const ir::TensorType& type, const std::string& base) {
    std::string name = unique(base);
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, g_.addValue(name, ir::ValueKind::Tensor));
    v->mutableType() = type;
    v->mutableType().requiresGrad = false;
    SPMD_ASSIGN_OR_RETURN(ir::Node * n, g_.addNode(name, target, std::move(args), {Argument::tensor(v)}));
    n->mutableMetadata().other["spmd_optimizer"] = "1";
    return v;
  }
  Expected<ir::Value*> mul(ir::Value* a, double s, const std::string& base) {
    return op("aten.mul.Tensor",
              {{"self", Argument::tensor(a), false}, {"other", Argument::floating(s), false}}, a->type(),
              base);
  }
  Expected<ir::Value*> mulT(ir::Value* a, ir::Value* b, const std::string& base) {
    return op("aten.mul.Tensor",
              {{"self", Argument::tensor(a), false}, {"other", Argument::tensor(b), false}}, a->type(), base);
  }
  Expected<ir::Value*> add(ir::Value* a, ir::Value* b, double alpha, const std::string& base) {
    std::vector<ir::NamedArgument> args = {{"self", Argument::tensor(a), false},
                                           {"other", Argument::tensor(b), false}};
    if (alpha != 1.0) args.push_back({"alpha", Argument::floating(alpha), true});
    return op("aten.add.Tensor", std::move(args), a->type(), base);
  }
  Expected<ir::Value*> addScalar(ir::Value* a, double s, const std::string& base) {
    return op("aten.add.Tensor",
              {{"self", Argument::tensor(a), false}, {"other", Argument::floating(s), false}}, a->type(),
              base);
  }
  Expected<ir::Value*> div(ir::Value* a, ir::Value* b, const std::string& base) {
    return op("aten.div.Tensor",
              {{"self", Argument::tensor(a), false}, {"other", Argument::tensor(b), false}}, a->type(), base);
  }
  Expected<ir::Value*> lerp(ir::Value* a, ir::Value* end, double weight, const std::string& base) {
    return op("aten.lerp.Scalar",
              {{"self", Argument::tensor(a), false},
               {"end", Argument::tensor(end), false},
               {"weight", Argument::floating(weight), false}},
              a->type(), base);
  }
  Expected<ir::Value*> addcmul(ir::Value* a, ir::Value* t1, ir::Value* t2, double value,
                               const std::string& base) {
    return op("aten.addcmul.default",
              {{"self", Argument::tensor(a), false},
               {"tensor1", Argument::tensor(t1), false},
               {"tensor2", Argument::tensor(t2), false},
               {"value", Argument::floating(value), true}},
              a->type(), base);
  }
  // A float64 copy of a scalar tensor.
  Expected<ir::Value*> toDouble(ir::Value* a, const std::string& base) {
    ir::TensorType t = a->type();
    t.dtype = ir::ScalarType::Double;
    return op(
        "aten._to_copy.default",
        {{"self", Argument::tensor(a), false}, {"dtype", Argument::scalarType(ir::ScalarType::Double), true}},
        t, base);
  }
  // `s` / a, as a tensor shaped like a.
  Expected<ir::Value*> scalarDiv(double s, ir::Value* a, const std::string& base) {
    SPMD_ASSIGN_OR_RETURN(ir::Value * full, op("aten.full_like.default",
                                               {{"self", Argument::tensor(a), false},
                                                {"fill_value", Argument::floating(s), false}},
                                               a->type(), base + "_numerator"));
    return div(full, a, base);
  }
  Expected<ir::Value*> sqrt(ir::Value* a, const std::string& base) {
    return op("aten.sqrt.default", {{"self", Argument::tensor(a), false}}, a->type(), base);
  }
  // 1 - base^exponent, as a tensor shaped like `exponent`.
  Expected<ir::Value*> oneMinusPow(double base, ir::Value* exponent, const std::string& name) {
    SPMD_ASSIGN_OR_RETURN(ir::Value * pw, op("aten.pow.Scalar",
                                             {{"self", Argument::floating(base), false},
                                              {"exponent", Argument::tensor(exponent), false}},
                                             exponent->type(), name + "_pow"));
    return op("aten.rsub.Scalar",
              {{"self", Argument::tensor(pw), false}, {"other", Argument::floating(1.0), false}},
              exponent->type(), name);
  }

  // A new zero-initialized state buffer shaped like `like`.
  Expected<ir::Value*> state(const std::string& fqn, const ir::TensorType& like) {
    std::string name = "optim_" + fqn;
    for (char& c : name)
      if (c == '.') c = '_';
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, g_.addValue(unique(name), ir::ValueKind::Tensor));
    v->mutableType() = like;
    v->mutableType().requiresGrad = false;
    g_.addInput(v);
    ir::InputSpec spec;
    spec.kind = ir::InputKind::Buffer;
    spec.value = v;
    spec.target = fqn;
    spec.name = v->name();
    p_.signature.inputs.push_back(spec);
    return v;
  }

  void output(ir::OutputKind kind, ir::Value* v, const std::string& target) {
    g_.addOutput(Argument::tensor(v));
    p_.signature.outputs.push_back({kind, Argument::tensor(v), target});
  }

 private:
  ir::ExportedProgram& p_;
  ir::Graph& g_;
};

std::string baseName(const std::string& fqn) {
  std::string s = fqn;
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

}  // namespace

Status AppendOptimizer::run(ir::ExportedProgram& program, GraphPassContext& context) {
  return appendOptimizer(program, context.options.optimizer);
}

Status appendOptimizer(ir::ExportedProgram& program, const OptimizerOptions& o) {
  if (o.kind.empty()) return Status::ok();
  if (o.kind != "sgd" && o.kind != "adamw")
    return Status::error("--optimizer " + o.kind + ": unknown optimizer (use sgd or adamw)");
  std::map<std::string, ir::Value*> params;
  for (const auto& in : program.signature.inputs)
    if (in.kind == ir::InputKind::Parameter && in.value) params[in.target] = in.value;
  std::vector<std::pair<std::string, ir::Value*>> grads;
  for (const auto& out : program.signature.outputs)
    if (out.kind == ir::OutputKind::GradientToParameter && out.arg.value())
      grads.emplace_back(out.target, out.arg.value());
  if (grads.empty())
    return Status::error(
        "--optimizer needs a train-step graph with gradient outputs (torch.export's "
        "_export_forward_backward); this program has none");
  Builder b(program);
  ir::Value* negStepSize = nullptr;
  ir::Value* bc2sqrt = nullptr;
  if (o.kind == "adamw") {
    // torch.optim keeps the step in a float32 tensor and computes the bias
    // corrections from its value in Python floats (float64).
    ir::TensorType scalar;
    scalar.dtype = ir::ScalarType::Float;
    SPMD_ASSIGN_OR_RETURN(ir::Value * s0, b.state(std::string(kOptimizerPrefix) + "step", scalar));
    SPMD_ASSIGN_OR_RETURN(ir::Value * step, b.addScalar(s0, 1.0, "optim_step_next"));
    b.output(ir::OutputKind::BufferMutation, step, std::string(kOptimizerPrefix) + "step");
    SPMD_ASSIGN_OR_RETURN(ir::Value * step64, b.toDouble(step, "optim_step_f64"));
    SPMD_ASSIGN_OR_RETURN(ir::Value * bc1, b.oneMinusPow(o.beta1, step64, "optim_bias_correction1"));
    SPMD_ASSIGN_OR_RETURN(negStepSize, b.scalarDiv(-o.lr, bc1, "optim_neg_step_size"));
    SPMD_ASSIGN_OR_RETURN(ir::Value * bc2, b.oneMinusPow(o.beta2, step64, "optim_bias_correction2"));
    SPMD_ASSIGN_OR_RETURN(bc2sqrt, b.sqrt(bc2, "optim_bias_correction2_sqrt"));
  }
  // Each update reads its gradient in the parameter's layout, reduced once
  // (all-reduce for a replicated parameter, reduce-scatter for a sharded
  // one), as DDP and FSDP do: a pending sum never flows into the update.
  // All gradients are anchored before the first update, so their
  // reductions can share buckets.
  std::map<std::string, ir::Value*> reduced;
  for (const auto& [fqn, grad] : grads) {
    auto it = params.find(fqn);
    if (it == params.end()) continue;
    SPMD_ASSIGN_OR_RETURN(ir::Value * g, b.op("aten.alias.default", {{"self", Argument::tensor(grad), false}},
                                              grad->type(), baseName(fqn) + "_grad_reduced"));
    g->producer()->mutableMetadata().other[std::string(sharding::kLayoutAsKey)] = it->second->name();
    reduced[fqn] = g;
  }
  for (const auto& [fqn, grad] : grads) {
    auto it = params.find(fqn);
    if (it == params.end()) continue;
    ir::Value* p = it->second;
    ir::Value* g = reduced[fqn];
    std::string base = baseName(fqn);
    std::string prefix = std::string(kOptimizerPrefix) + fqn;
    ir::Value* updated = nullptr;
    if (o.kind == "sgd") {
      ir::Value* d = g;
      if (o.weightDecay != 0.0) {
        SPMD_ASSIGN_OR_RETURN(d, b.add(g, p, o.weightDecay, base + "_decayed_grad"));
      }
      if (o.momentum != 0.0) {
        SPMD_ASSIGN_OR_RETURN(ir::Value * buf, b.state(prefix + ".momentum_buffer", p->type()));
        SPMD_ASSIGN_OR_RETURN(ir::Value * scaled, b.mul(buf, o.momentum, base + "_momentum"));
        SPMD_ASSIGN_OR_RETURN(d, b.add(scaled, d, 1.0, base + "_momentum_buffer"));
        b.output(ir::OutputKind::BufferMutation, d, prefix + ".momentum_buffer");
      }
      SPMD_ASSIGN_OR_RETURN(updated, b.add(p, d, -o.lr, base + "_updated"));
    } else {
      ir::Value* pd = p;
      if (o.weightDecay != 0.0) {
        SPMD_ASSIGN_OR_RETURN(pd, b.mul(p, 1.0 - o.lr * o.weightDecay, base + "_decayed"));
      }
      SPMD_ASSIGN_OR_RETURN(ir::Value * m, b.state(prefix + ".exp_avg", p->type()));
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, b.state(prefix + ".exp_avg_sq", p->type()));
      SPMD_ASSIGN_OR_RETURN(ir::Value * mNew, b.lerp(m, g, 1.0 - o.beta1, base + "_exp_avg"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * v1, b.mul(v, o.beta2, base + "_exp_avg_sq_scaled"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * vNew, b.addcmul(v1, g, g, 1.0 - o.beta2, base + "_exp_avg_sq"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * rv, b.sqrt(vNew, base + "_exp_avg_sq_sqrt"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * rvc, b.div(rv, bc2sqrt, base + "_denom_corrected"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * denom, b.addScalar(rvc, o.eps, base + "_denom"));
      // addcdiv(p, m, denom, value=-step_size) = p + (value * m) / denom
      SPMD_ASSIGN_OR_RETURN(ir::Value * scaled, b.mulT(mNew, negStepSize, base + "_step"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * upd, b.div(scaled, denom, base + "_step_corrected"));
      SPMD_ASSIGN_OR_RETURN(updated, b.add(pd, upd, 1.0, base + "_updated"));
      b.output(ir::OutputKind::BufferMutation, mNew, prefix + ".exp_avg");
      b.output(ir::OutputKind::BufferMutation, vNew, prefix + ".exp_avg_sq");
    }
    b.output(ir::OutputKind::ParameterMutation, updated, fqn);
  }
  return program.graph.verify();
}

OptimizerWeightSource::OptimizerWeightSource(const program::WeightSource& base,
                                             const program::Program& program)
    : base_(base) {
  for (const auto& w : program.weights) {
    if (w.fqn.rfind(kOptimizerPrefix, 0) != 0 || w.source) continue;  // by reference: the runtime's zeros
    int64_t n = ir::elementSize(w.dtype);
    for (int64_t d : w.globalShape) n *= d;
    zeros_.emplace(w.fqn, std::vector<std::byte>(static_cast<size_t>(n)));
  }
}

Expected<std::span<const std::byte>> OptimizerWeightSource::globalBytes(const std::string& fqn) const {
  if (auto it = zeros_.find(fqn); it != zeros_.end()) return std::span<const std::byte>(it->second);
  return base_.globalBytes(fqn);
}

void alignOptimizerStates(const ir::ExportedProgram& program, schema::ResolvedPlacements& placements) {
  const auto& ins = program.signature.inputs;
  std::map<std::string, sharding::ShardingSpec> paramSpec;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].kind == ir::InputKind::Parameter) paramSpec[ins[i].target] = placements.inputs[i];
  auto stateSpec = [&](const std::string& target) -> const sharding::ShardingSpec* {
    if (target.rfind(kOptimizerPrefix, 0) != 0) return nullptr;
    std::string rest = target.substr(std::string(kOptimizerPrefix).size());
    size_t dot = rest.rfind('.');
    if (dot == std::string::npos) return nullptr;
    auto it = paramSpec.find(rest.substr(0, dot));
    return it == paramSpec.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i < ins.size(); ++i)
    if (const auto* s = stateSpec(ins[i].target)) placements.inputs[i] = *s;
  const auto& outs = program.signature.outputs;
  for (size_t i = 0; i < outs.size() && i < placements.outputs.size(); ++i)
    if (outs[i].kind == ir::OutputKind::BufferMutation)
      if (const auto* s = stateSpec(outs[i].target)) placements.outputs[i] = *s;
}

}  // namespace spmd::passes
