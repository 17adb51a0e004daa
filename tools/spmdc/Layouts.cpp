// `spmdc placements` and `spmdc reshard` (see Layouts.h).
#include "Layouts.h"

#include <iostream>

#include "Compile.h"
#include "pt2/Archive.h"
#include "schema/Resolve.h"
#include "sharding/Reshard.h"

namespace spmdc {
namespace {

// The name a schema rule matches for input `in`: a stored tensor's FQN, a
// user input's name.
std::string inputName(const spmd::ir::InputSpec& in) {
  return spmd::ir::isStored(in.kind) && !in.target.empty() ? in.target : in.name;
}

std::string placementsText(const spmd::ir::ExportedProgram& p, const spmd::schema::ResolvedPlacements& r) {
  std::string s = "mesh " + r.mesh.str() + "\n";
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    s += "input " + inputName(p.signature.inputs[i]) + ": " + r.inputs[i].str();
    if (i < r.gathered.size() && r.gathered[i]) s += " gathered " + r.gathered[i]->str();
    s += "\n";
  }
  std::vector<std::string> names = spmd::schema::outputNames(p);
  for (size_t i = 0; i < r.outputs.size(); ++i)
    s += "output " + names[i] + ": " + (r.outputs[i] ? r.outputs[i]->str() : "any") + "\n";
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  for (const auto& w : r.warnings) s += "warning: " + w + "\n";
  return s;
}

spmd::Expected<std::string> reshardText(const ReshardArgs& a) {
  auto shape = spmd::sharding::Mesh::parseShape(a.shape);
  if (!shape) return spmd::Status::error("--shape " + a.shape + ": give the tensor's sizes, e.g. 64x32");
  SPMD_ASSIGN_OR_RETURN(spmd::sharding::Mesh mesh, meshFromFlags(a.mesh, a.axes));
  auto from = spmd::sharding::ShardingSpec::parse(a.from);
  if (!from) return from.status().withContext("--from");
  auto to = spmd::sharding::ShardingSpec::parse(a.to);
  if (!to) return to.status().withContext("--to");
  auto plan = spmd::sharding::planReshard(*shape, a.elementBytes, *from, *to, mesh);
  if (!plan) return plan.status();  // names the specs and the shape
  if (plan->empty()) return std::string("no steps\n");
  return plan->str() + "\n" + std::to_string(plan->steps.size()) + " steps\n";
}

}  // namespace

CLI::App* addPlacementsCommand(CLI::App& app, PlacementsArgs& a) {
  auto* cmd =
      app.add_subcommand("placements", "Print the placement of every graph input and output a schema gives");
  cmd->add_option("model", a.model, "torch.export archive (.pt2) or IR text (.ir)")->required();
  cmd->add_option("--schema", a.schema, "placement schema (JSON file) or preset: dp (alias ddp), fsdp, hsdp")
      ->required();
  cmd->add_option("--mesh", a.mesh, "mesh shape, e.g. 8 or 2x4 (overrides the schema's)");
  return cmd;
}

CLI::App* addReshardCommand(CLI::App& app, ReshardArgs& a) {
  auto* cmd =
      app.add_subcommand("reshard", "Print the collectives that turn one layout of a tensor into another");
  cmd->add_option("--shape", a.shape, "global tensor shape, e.g. 64x32")->required();
  cmd->add_option("--mesh", a.mesh, "mesh shape, e.g. 4 or 2x4")->required();
  cmd->add_option("--axes", a.axes, "mesh axis names, e.g. dp,tp");
  cmd->add_option("--from", a.from, "layout before, e.g. \"[P(sum), S(0)]\"")->required();
  cmd->add_option("--to", a.to, "layout after, e.g. \"[S(1), R]\"")->required();
  cmd->add_option("--element-bytes", a.elementBytes, "bytes per element (default 4)");
  return cmd;
}

int runPlacements(const PlacementsArgs& a) {
  auto archive = spmd::pt2::readModel(a.model, {.loadWeights = false});
  if (!archive) return fail(archive.status());
  auto schema = spmd::schema::loadSchemaOrPreset(a.schema);
  if (!schema) return fail(schema.status());
  std::optional<std::vector<int64_t>> mesh;
  if (!a.mesh.empty()) {
    auto shape = spmd::sharding::Mesh::parseShape(a.mesh);
    if (!shape) return fail(shape.status().withContext("--mesh " + a.mesh));
    mesh = *shape;
  }
  auto r = spmd::schema::resolvePlacements(*schema, archive->program, mesh);
  if (!r) return fail(r.status());
  std::cout << placementsText(archive->program, *r);
  return 0;
}

int runReshard(const ReshardArgs& a) {
  auto text = reshardText(a);
  if (!text) return fail(text.status());
  std::cout << *text;
  return 0;
}

}  // namespace spmdc
