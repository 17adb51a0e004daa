// spmdc compile: flags -> library calls (see Compile.h). --schema auto asks
// autoshard::autoShard for the schema, then compiles it like any other.
#include "Compile.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "autoshard/AutoShard.h"
#include "autoshard/PipelineSearch.h"
#include "ir/Graph.h"
#include "passes/Report.h"
#include "program/Dump.h"
#include "program/WeightSource.h"
#include "program/Writer.h"
#include "schema/Resolve.h"
#include "serialize/ToText.h"
#include "sharding/DeviceProfile.h"
#include "support/File.h"
#include "support/Strings.h"

namespace spmdc {
namespace {

constexpr int kExitBadInput = 2;

spmd::Expected<spmd::passes::CompileOptions> baseOptions(const CompileArgs& a) {
  spmd::passes::CompileOptions opts;
  if (!a.mesh.empty()) {
    auto shape = spmd::sharding::Mesh::parseShape(a.mesh);
    if (!shape) return shape.status().withContext("--mesh " + a.mesh);
    opts.mesh = *shape;
  }
  opts.replicateUnknown = a.replicateUnknown;
  opts.async = !a.noAsync;
  opts.bucketBytes = static_cast<int64_t>(a.bucketMb * 1024 * 1024);
  opts.printAfter = a.printAfter;
  opts.embedWeights = a.embedWeights;
  opts.optimizer = a.optimizer;
  if (!a.recomputeCollectives.empty())
    opts.recomputeCollectives = a.recomputeCollectives == "reissue"
                                    ? spmd::passes::RecomputeCollectives::Reissue
                                    : spmd::passes::RecomputeCollectives::Save;
  if (a.betas.size() == 2) {
    opts.optimizer.beta1 = a.betas[0];
    opts.optimizer.beta2 = a.betas[1];
  }
  if (!a.reduceDtype.empty() && a.mixedPrecision.empty())
    return spmd::Status::error("--reduce-dtype " + a.reduceDtype + " needs --mixed-precision (e.g. bf16)");
  if (!a.mixedPrecision.empty()) {
    spmd::schema::MixedPrecisionRequest mp;
    mp.paramDtype = spmd::schema::mixedPrecisionDtype(a.mixedPrecision).value_or("");
    if (!a.reduceDtype.empty())
      mp.reduceDtype = spmd::schema::mixedPrecisionDtype(a.reduceDtype).value_or("");
    opts.mixedPrecision = mp;
  }
  opts.onPrintAfter = [](const std::string& pass, const spmd::program::Program& p) {
    std::cout << "// after " << pass << "\n" << spmd::program::dumpProgram(p);
  };
  opts.onPrintGraphAfter = [](const std::string& pass, const spmd::ir::ExportedProgram& p) {
    std::cout << "// after " << pass << "\n" << spmd::serialize::printProgram(p);
  };
  return opts;
}

spmd::Expected<spmd::sharding::Mesh> autoMesh(const CompileArgs& a) {
  if (a.mesh.empty()) return spmd::Status::error("--schema auto needs --mesh (e.g. --mesh 2x4 --axes dp,tp)");
  return meshFromFlags(a.mesh, a.axes);
}

// The auto-sharding run behind --schema auto.
spmd::Expected<spmd::autoshard::AutoResult> chooseLayout(const CompileArgs& a,
                                                         const spmd::sharding::DeviceProfile* profile,
                                                         const std::optional<int64_t>& budget) {
  spmd::autoshard::AutoOptions o;
  SPMD_ASSIGN_OR_RETURN(o.mesh, autoMesh(a));
  SPMD_ASSIGN_OR_RETURN(o.compile, baseOptions(a));
  o.profile = profile;
  o.memoryBudget = budget;
  std::optional<spmd::schema::PlacementSchema> pins;
  if (!a.pin.empty()) {
    SPMD_ASSIGN_OR_RETURN(pins, spmd::schema::loadPlacementSchema(a.pin));
    o.pins = &*pins;
  }
  return spmd::autoshard::autoShard(a.model, o);
}

spmd::Status checkAutoFlags(const CompileArgs& a) {
  if (a.schema == "auto") return spmd::Status::ok();
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--axes", &a.axes},
                                    {"--pin", &a.pin},
                                    {"--write-schema", &a.writeSchema}})
    if (!value->empty())
      return spmd::Status::error(std::string(flag) + " " + *value + ": applies to --schema auto only");
  return spmd::Status::ok();
}

spmd::Expected<spmd::passes::CompileResult> compileSchema(
    const CompileArgs& a, const spmd::schema::PlacementSchema& schema,
    const spmd::sharding::DeviceProfile* profile, std::optional<spmd::pt2::Archive>& archive,
    const spmd::autoshard::Evaluated* chosen = nullptr) {
  SPMD_ASSIGN_OR_RETURN(spmd::passes::CompileOptions opts, baseOptions(a));
  if (chosen) {  // --schema auto chose the recomputation with the layout: no second search
    opts.recomputePlan = chosen->recomputePlan;
    opts.recomputeChoice = chosen->recomputeChoice;
  }
  if (!a.memoryBudget.empty()) {
    bool autoRecompute = spmd::schema::hasAutoRecompute(schema.recompute);
    bool autoRotate = schema.contextParallel && schema.contextParallel->rotate == "auto";
    if (a.schema != "auto" && !autoRecompute && !autoRotate)
      return spmd::Status::error("--memory-budget " + a.memoryBudget +
                                 ": applies to --schema auto, or to a schema with a \"recompute\" entry "
                                 "\"auto\" or \"context_parallel\" \"rotate\": \"auto\"");
    if (autoRecompute || autoRotate) {
      SPMD_ASSIGN_OR_RETURN(opts.memoryBudget, spmd::parseByteSize("--memory-budget", a.memoryBudget));
    }
  }
  if (profile) {
    SPMD_ASSIGN_OR_RETURN(auto mesh, spmd::schema::resolveMesh(schema, opts.mesh));
    opts.cost = spmd::sharding::costModelFor(*profile, mesh);
    opts.profile = profile;
  }
  SPMD_ASSIGN_OR_RETURN(archive, spmd::pt2::readModel(a.model));
  return spmd::passes::compile(*archive, schema, opts);
}

}  // namespace

spmd::Expected<spmd::sharding::Mesh> meshFromFlags(const std::string& meshFlag, const std::string& axesFlag) {
  auto shape = spmd::sharding::Mesh::parseShape(meshFlag);
  if (!shape) return shape.status().withContext("--mesh " + meshFlag);
  std::vector<std::string> axes;
  for (size_t start = 0; !axesFlag.empty() && start <= axesFlag.size();) {
    size_t end = axesFlag.find(',', start);
    if (end == std::string::npos) end = axesFlag.size();
    axes.push_back(axesFlag.substr(start, end - start));
    start = end + 1;
  }
  auto mesh = spmd::sharding::Mesh::create(*shape, axes);
  if (!mesh) return mesh.status().withContext("--mesh " + meshFlag + " --axes " + axesFlag);
  return mesh;
}

int fail(const spmd::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return kExitBadInput;
}

spmd::Expected<spmd::passes::CompileResult> compileModel(const CompileArgs& a,
                                                         std::optional<spmd::pt2::Archive>& archive) {
  SPMD_ASSIGN_OR_RETURN(auto schema, spmd::schema::loadSchemaOrPreset(a.schema));
  return compileSchema(a, schema, nullptr, archive);
}

int runOpt(const CompileArgs& a, bool debugInfo) {
  if (a.schema.empty()) {
    auto archive = spmd::pt2::readModel(a.model, {.loadWeights = false});
    if (!archive) return fail(archive.status());
    std::cout << spmd::serialize::printProgram(archive->program, {.debugInfo = debugInfo});
    return 0;
  }
  std::optional<spmd::pt2::Archive> archive;
  auto result = compileModel(a, archive);
  if (!result) return fail(result.status());
  if (a.printAfter.empty()) std::cout << spmd::program::dumpProgram(result->program);
  return 0;
}

namespace {

// A pipelined program's cost is its pipeline ranks' (autoshard::pipelinedCost:
// m + p - 1 microbatch slots on the slowest rank, the bubble included), not
// modelLayout's of the whole graph on one rank; the summary adds the bubble
// and the bytes sent between stages.
void addPipelineCost(const spmd::program::Program& p, spmd::passes::ReportExtras& extras) {
  spmd::autoshard::PipelinedCost c = spmd::autoshard::pipelinedCost(p, spmd::passes::profileOf(extras));
  extras.cost = c.cost;
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.1f%%", 100 * c.bubble);
  extras.summaryLines.insert(extras.summaryLines.begin(), "pipeline " + p.pipeline->schedule + ": bubble " +
                                                              bubble + ", " + spmd::withCommas(c.p2pBytes) +
                                                              " B sent between stages per step");
  extras.sections.emplace_back("pipeline", nlohmann::ordered_json({{"schedule", p.pipeline->schedule},
                                                                   {"bubble", c.bubble},
                                                                   {"p2p_bytes_per_step", c.p2pBytes}})
                                               .dump());
}

}  // namespace

int runCompile(const CompileArgs& a) {
  if (a.model.ends_with(".ir"))
    return fail(
        spmd::Status::error(a.model +
                            ": IR text holds no weights, so no program can be written from it; compile "
                            "the .pt2 it came from, or print the passes with spmdc opt"));
  if (auto st = checkAutoFlags(a); !st.isOk()) return fail(st);
  std::optional<spmd::sharding::DeviceProfile> profile;
  if (!a.deviceProfile.empty()) {
    auto p = spmd::sharding::loadDeviceProfile(a.deviceProfile);
    if (!p) return fail(p.status().withContext("--device-profile"));
    profile = std::move(*p);
  }
  const spmd::sharding::DeviceProfile* prof = profile ? &*profile : nullptr;
  std::optional<int64_t> budget;
  if (!a.memoryBudget.empty()) {
    auto b = spmd::parseByteSize("--memory-budget", a.memoryBudget);
    if (!b) return fail(b.status());
    budget = *b;
  }
  spmd::passes::ReportExtras extras;
  extras.profile = prof;
  std::optional<spmd::schema::PlacementSchema> schema;
  std::optional<spmd::autoshard::Evaluated> autoChosen;
  if (a.schema == "auto") {
    auto chosen = chooseLayout(a, prof, budget);
    if (!chosen) return fail(chosen.status().withContext(a.model));
    schema = chosen->chosen.schema;
    autoChosen = chosen->chosen;
    extras.sections.emplace_back("auto", spmd::autoshard::autoReportJson(*chosen, budget));
    extras.summaryLines = spmd::autoshard::autoSummaryLines(*chosen, budget);
  } else {
    auto s = spmd::schema::loadSchemaOrPreset(a.schema, {"auto"});
    if (!s) return fail(s.status());
    schema = std::move(*s);
  }
  std::optional<spmd::pt2::Archive> archive;
  auto result = compileSchema(a, *schema, prof, archive, autoChosen ? &*autoChosen : nullptr);
  if (!result) return fail(result.status());
  spmd::program::ArchiveWeightSource archiveWeights(*archive);
  spmd::passes::OptimizerWeightSource weights(archiveWeights, result->program);
  if (auto st = spmd::program::writeProgram(a.output, result->program, weights); !st.isOk()) return fail(st);
  if (!a.writeSchema.empty()) {
    std::string text = spmd::autoshard::schemaJson(
        *schema, "chosen by spmdc compile --schema auto for " + a.model + " on mesh " + a.mesh);
    if (auto st = spmd::writeFileAtomic(a.writeSchema, text); !st.isOk()) return fail(st);
  }
  if (result->program.pipeline) addPipelineCost(result->program, extras);
  if (!a.report.empty())
    if (auto st = spmd::writeFileAtomic(a.report, spmd::passes::reportJson(*result, extras)); !st.isOk())
      return fail(st);
  if (!a.quiet) std::cout << spmd::passes::summaryText(*result, a.model, a.output, extras);
  return 0;
}

void addCompileOptions(CLI::App* cmd, CompileArgs& c) {
  cmd->add_option("--mesh", c.mesh, "mesh shape, e.g. 8 or 2x4 (overrides the schema's)");
  cmd->add_flag("--replicate-unknown", c.replicateUnknown, "run ops without a sharding rule replicated");
  cmd->add_flag("--no-async", c.noAsync, "keep collectives synchronous");
  cmd->add_option(
      "--bucket-mb", c.bucketMb,
      "fuse all-reduces, and fsdp's all-gathers and reduce-scatters, into buckets of this many MiB (0: off)");
  cmd->add_option("--optimizer", c.optimizer.kind, "append an optimizer update (train steps): sgd or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}));
  cmd->add_option("--lr", c.optimizer.lr, "learning rate");
  cmd->add_option("--momentum", c.optimizer.momentum, "sgd momentum");
  cmd->add_option("--betas", c.betas, "adamw betas, e.g. --betas 0.9 0.999")->expected(2);
  cmd->add_option("--eps", c.optimizer.eps, "adamw epsilon");
  cmd->add_option("--weight-decay", c.optimizer.weightDecay, "weight decay (adamw: decoupled)");
  cmd->add_option("--mixed-precision", c.mixedPrecision,
                  "train steps: FSDP2's MixedPrecisionPolicy param_dtype (bf16 or fp16); the step must be "
                  "exported with it (spmdc_export --train --mixed-precision)")
      ->check(CLI::IsMember({"bf16", "bfloat16", "fp16", "float16"}));
  cmd->add_option("--reduce-dtype", c.reduceDtype,
                  "with --mixed-precision: the gradients' reduction dtype (default float32)")
      ->check(CLI::IsMember({"fp32", "float32", "bf16", "bfloat16", "fp16", "float16"}));
}

void addAutoOptions(CLI::App* cmd, CompileArgs& c) {
  cmd->add_option(
      "--device-profile", c.deviceProfile,
      "device profile JSON (profiles/*.json, spmd-run --calibrate) for the cost model; default: a "
      "built-in CPU-loopback profile");
  cmd->add_option("--axes", c.axes, "--schema auto: mesh axis names, e.g. dp,tp");
  cmd->add_option(
      "--memory-budget", c.memoryBudget,
      "per-rank peak memory, e.g. 40GiB: for --schema auto, and for a schema's \"recompute\": \"auto\" "
      "or \"context_parallel\" \"rotate\": \"auto\"");
  cmd->add_option(
         "--recompute-collectives", c.recomputeCollectives,
         "a recomputed module's collectives of activations (tensor-parallel all-reduces): save their "
         "results, or reissue them in the backward; default: save, and under \"auto\" the faster "
         "plan that fits --memory-budget (docs/RECOMPUTE.md)")
      ->check(CLI::IsMember({"save", "reissue"}));
  cmd->add_option("--pin", c.pin, "--schema auto: a placement schema whose rules pin what they match");
  cmd->add_option("--write-schema", c.writeSchema,
                  "--schema auto: write the chosen layout as a placement schema");
  cmd->add_flag("--embed-weights", c.embedWeights,
                "a model exported by reference (spmdc_export --hf DIR): copy its weights into the program "
                "instead of pointing at the checkpoint's files");
}

}  // namespace spmdc
