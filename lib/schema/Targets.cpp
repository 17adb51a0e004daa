// The targets of placement rules (see Targets.h).
#include "schema/Targets.h"

#include "schema/Glob.h"
#include "schema/Resolve.h"

namespace spmd::schema::detail {
namespace {

bool isInputTarget(const ir::ExportedProgram& p, const std::string& fqn) {
  for (const ir::InputSpec& in : p.signature.inputs)
    if (in.kind != ir::InputKind::UserInput && in.target == fqn) return true;
  return false;
}

std::vector<Target> paramTargets(const ir::ExportedProgram& p) {
  std::vector<Target> out;
  for (size_t i = 0; i < p.signature.inputs.size(); ++i) {
    const ir::InputSpec& in = p.signature.inputs[i];
    const char* noun = in.kind == ir::InputKind::Parameter        ? "parameter"
                       : in.kind == ir::InputKind::Buffer         ? "buffer"
                       : in.kind == ir::InputKind::TensorConstant ? "constant"
                                                                  : nullptr;
    if (noun == nullptr || in.value == nullptr) continue;
    Target t{i, {in.target}, std::string(noun) + " '" + in.target + "'", in.value};
    // Tied names that are no graph input match this input too.
    if (auto it = p.tiedNames.find(in.target); it != p.tiedNames.end())
      for (const std::string& other : it->second)
        if (!isInputTarget(p, other)) t.names.push_back(other);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Target> userInputTargets(const ir::ExportedProgram& p) {
  std::vector<Target> out;
  size_t k = 0;
  for (size_t i = 0; i < p.signature.inputs.size(); ++i) {
    const ir::InputSpec& in = p.signature.inputs[i];
    if (in.kind != ir::InputKind::UserInput) continue;
    std::string name = in.value != nullptr ? in.value->name() : in.name;
    out.push_back({i, {name, "input." + std::to_string(k++)}, "input '" + name + "'", in.value});
  }
  return out;
}

std::vector<Target> outputTargets(const ir::ExportedProgram& p) {
  std::vector<std::string> names = outputNames(p);
  std::vector<Target> out;
  for (size_t i = 0; i < names.size(); ++i) {
    const ir::Argument& arg = p.signature.outputs[i].arg;
    out.push_back(
        {i, {names[i]}, "output '" + names[i] + "'", arg.values.size() == 1 ? arg.values[0] : nullptr});
  }
  return out;
}

}  // namespace

const std::vector<Target>& Targets::of(TargetKind k) {
  auto& list = lists_[static_cast<size_t>(k)];
  if (!list)
    list = k == TargetKind::Params   ? paramTargets(p_)
           : k == TargetKind::Inputs ? userInputTargets(p_)
                                     : outputTargets(p_);
  return *list;
}

const std::vector<uint8_t>& Targets::matches(TargetKind k, const std::string& pattern) {
  auto [it, fresh] = hits_[static_cast<size_t>(k)].try_emplace(pattern);
  if (fresh) {
    const std::vector<Target>& targets = of(k);
    it->second.resize(targets.size(), 0);
    for (size_t t = 0; t < targets.size(); ++t) {
      const auto& names = targets[t].names;
      bool first = globMatch(pattern, names.front()), any = first;
      for (size_t n = 1; n < names.size() && !any; ++n) any = globMatch(pattern, names[n]);
      it->second[t] = static_cast<uint8_t>((any ? 1 : 0) | (first ? 2 : 0));
    }
  }
  return it->second;
}

}  // namespace spmd::schema::detail
