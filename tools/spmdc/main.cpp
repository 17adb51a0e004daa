// spmdc: the compiler's command-line driver. Only flag parsing lives here;
// every subcommand calls a library.
//
//   spmdc inspect model.pt2 [--format text|json] [--ir]
//   spmdc compile model.pt2 --mesh 8 --schema s.json -o model.spmd [--report r.json]
//   spmdc dump model.spmd
//   spmdc diff a.spmd b.spmd
//   spmdc explain model.spmd -o report.html     (or model.pt2 --schema s.json ...; a.spmd b.spmd: compare)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "Allocator.h"
#include "Compile.h"
#include "Layouts.h"
#include "explain/Explain.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "program/Diff.h"
#include "program/Dump.h"
#include "program/Reader.h"
#include "pt2/Archive.h"
#include "pt2/Inspect.h"
#include "schema/FromHf.h"
#include "schema/PlacementSchema.h"
#include "serialize/ToText.h"
#include "sharding/RuleRegistry.h"
#include "sharding/RuleText.h"
#include "support/File.h"
#include "support/Log.h"
#include "support/Version.h"

namespace {

constexpr int kExitBadInput = 2;
using spmdc::CompileArgs;
using spmdc::compileModel;
using spmdc::fail;

int runInspect(const std::string& path, const std::string& format, bool ir) {
  auto archive = spmd::pt2::readArchive(path, {.loadWeights = false});
  if (!archive) return fail(archive.status());
  if (ir)
    std::cout << spmd::serialize::printProgram(archive->program);
  else
    std::cout << (format == "json" ? spmd::pt2::inspectJson(*archive) : spmd::pt2::inspectText(*archive));
  return 0;
}

// Each node's rule: the built-in ones, and a schema's own op rules (custom
// ops) on top when --schema names one.
int runRules(const std::string& path, const std::string& schemaArg) {
  auto archive = spmd::pt2::readModel(path, {.loadWeights = false});
  if (!archive) return fail(archive.status());
  spmd::sharding::RuleRegistry registry = spmd::sharding::defaultRuleRegistry();
  if (!schemaArg.empty()) {
    auto schema = spmd::schema::loadSchemaOrPreset(schemaArg);
    if (!schema) return fail(schema.status());
    for (const auto& [target, rule] : schema->opRules)
      registry.set(target, spmd::sharding::ruleFromTemplate(rule));
  }
  std::cout << spmd::sharding::printNodeRules(archive->program.graph, registry);
  return 0;
}

struct ExplainArgs {
  std::vector<std::string> inputs;
  std::string output;
  CompileArgs compile;                // for .pt2 inputs
  std::vector<std::string> profiles;  // spmd-run --profile files of one run
};

// One HTML page of one or two programs: a .spmd is read, a .pt2 compiled.
int runExplain(ExplainArgs& a) {
  std::string pt2;  // the first .pt2 input, compiled before it is explained
  for (const auto& in : a.inputs)
    if (pt2.empty() && in.ends_with(".pt2")) pt2 = in;
  if (!pt2.empty() && a.compile.schema.empty())
    return fail(spmd::Status::error(pt2 + ": a .pt2 is compiled before it is explained: give --schema (and "
                                          "--mesh, --optimizer as for spmdc compile)"));
  if (pt2.empty() && !a.compile.schema.empty())
    return fail(spmd::Status::error("--schema " + a.compile.schema +
                                    ": applies to .pt2 inputs only; these are compiled programs"));
  if (!a.profiles.empty() && a.inputs.size() != 1)
    return fail(spmd::Status::error("--profile " + a.profiles.front() +
                                    ": a profile belongs to one program; explain one program with it"));
  std::vector<std::optional<spmd::program::LoadedProgram>> loaded(a.inputs.size());
  std::optional<spmd::explain::Profile> profile;
  std::vector<std::optional<spmd::passes::CompileResult>> compiled(a.inputs.size());
  std::vector<spmd::explain::ExplainInput> inputs;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const std::string& path = a.inputs[i];
    const spmd::program::Program* p = nullptr;
    if (path.ends_with(".pt2")) {
      a.compile.model = path;
      std::optional<spmd::pt2::Archive> archive;
      auto r = compileModel(a.compile, archive);
      if (!r) return fail(r.status());
      p = &compiled[i].emplace(std::move(*r)).program;
    } else {
      auto r = spmd::program::readProgram(path);
      if (!r) return fail(r.status());
      p = &loaded[i].emplace(std::move(*r)).program();
    }
    // The page names a file, not a path: "llama/model.pt2", "a.spmd".
    std::filesystem::path fs(path);
    std::string dir = fs.parent_path().filename().string();
    std::string label = fs.filename().string();
    if (!a.profiles.empty()) {
      auto r = spmd::explain::readProfile(a.profiles, *p);
      if (!r) return fail(r.status());
      profile.emplace(std::move(*r));
    }
    inputs.push_back({p, path.ends_with(".pt2") && !dir.empty() ? dir + "/" + label : label,
                      profile ? &*profile : nullptr});
  }
  auto json = spmd::explain::explainJson(inputs);
  if (!json) return fail(json.status().withContext(a.output));
  if (auto st = spmd::writeFileAtomic(a.output, spmd::explain::explainHtml(*json)); !st.isOk())
    return fail(st);
  return 0;
}

struct FromHfArgs {
  std::string plan, mesh, axes, tpAxis, model, output;
};

int runFromHf(const FromHfArgs& a) {
  auto plan = spmd::schema::readHfPlan(a.plan);
  if (!plan) return fail(plan.status());
  spmd::schema::SchemaMesh mesh;
  auto shape = spmd::sharding::Mesh::parseShape(a.mesh);
  if (!shape) return fail(shape.status().withContext("--mesh " + a.mesh));
  mesh.shape = *shape;
  for (size_t start = 0; !a.axes.empty() && start <= a.axes.size();) {
    size_t end = a.axes.find(',', start);
    if (end == std::string::npos) end = a.axes.size();
    mesh.axes.push_back(a.axes.substr(start, end - start));
    start = end + 1;
  }
  mesh.tpAxis = a.tpAxis;
  std::optional<spmd::pt2::Archive> archive;
  if (!a.model.empty()) {
    auto read = spmd::pt2::readArchive(a.model, spmd::pt2::ReadOptions{false});
    if (!read) return fail(read.status());
    archive = std::move(*read);
  }
  auto text =
      spmd::schema::explicitSchemaFromPlan(*plan, mesh, archive ? &archive->program : nullptr, a.plan);
  if (!text) return fail(text.status());
  if (auto st = spmd::writeFileAtomic(a.output, *text); !st.isOk()) return fail(st);
  return 0;
}

int runDump(const std::string& path) {
  auto p = spmd::program::readProgram(path);
  if (!p) return fail(p.status());
  std::cout << spmd::program::dumpProgram(p->program());
  return 0;
}

int runDiff(const std::string& a, const std::string& b) {
  auto pa = spmd::program::readProgram(a);
  if (!pa) return fail(pa.status());
  auto pb = spmd::program::readProgram(b);
  if (!pb) return fail(pb.status());
  auto d = spmd::program::diffPrograms(pa->program(), pb->program());
  std::cout << d.text;
  return d.same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spmdc: ahead-of-time SPMD compiler for torch.export programs"};
  app.set_version_flag("--version", [] {
    return "spmdc " + std::string(spmd::kVersion) +
           " (auto-sharding: exhaustive or local search; no ILP solver (CBC) in this build; "
           "allocator: " +
           spmdc::allocatorName() + ")";
  });
  bool listRules = false, listPasses = false;
  app.add_flag("--list-rules", listRules, "list the ops that have a sharding rule");
  app.add_flag("--list-passes", listPasses, "list the passes compile runs, in order");
  std::string logLevel;
  app.add_option("--log-level", logLevel,
                 "trace, debug, info, warn (default), error or off; default from SPMD_LOG_LEVEL");
  app.fallthrough();  // --log-level after a subcommand's own flags too

  std::string inspectPath, format = "text";
  bool printIr = false;
  auto* inspect = app.add_subcommand("inspect", "Summarize a .pt2 archive");
  inspect->add_option("model", inspectPath, "torch.export archive (.pt2)")->required();
  inspect->add_option("--format", format, "text or json")->check(CLI::IsMember({"text", "json"}));
  inspect->add_flag("--ir", printIr, "print the IR, one node per line");

  CompileArgs c;
  auto* compile = app.add_subcommand("compile", "Compile a .pt2 archive into a distributed .spmd program");
  compile->add_option("model", c.model, "torch.export archive (.pt2)")->required();
  compile
      ->add_option("--schema", c.schema,
                   "placement schema (JSON file), a preset: dp (alias ddp), fsdp, hsdp, or auto (chosen by "
                   "the cost model; needs --mesh)")
      ->required();
  compile->add_option("-o,--output", c.output, "output program (.spmd)")->required();
  compile->add_option("--report", c.report, "write a JSON report of the collectives, memory and timings");
  compile->add_option("--print-after", c.printAfter,
                      "print the program after this pass (repeatable); after a pass before propagation, the "
                      "graph");
  compile->add_flag("-q,--quiet", c.quiet, "print nothing on success");
  spmdc::addCompileOptions(compile, c);
  spmdc::addAutoOptions(compile, c);

  CompileArgs o;
  bool debugInfo = false;
  auto* opt = app.add_subcommand(
      "opt", "Print a model (.pt2 or IR text) as IR text, or compile it in memory and print it after passes");
  opt->add_option("model", o.model, "torch.export archive (.pt2) or IR text (.ir)")->required();
  opt->add_option("--schema", o.schema,
                  "placement schema or preset; without it the model is printed as read");
  opt->add_option("--print-after", o.printAfter,
                  "print after this pass (repeatable; see --list-passes); default: the final program");
  opt->add_flag("--debug-info", debugInfo, "print each node's whole metadata (stack trace, module stack)");
  spmdc::addCompileOptions(opt, o);

  std::string rulesPath;
  auto* rules = app.add_subcommand("rules", "Print each node's sharding rule in the factor notation");
  rules->add_option("model", rulesPath, "torch.export archive (.pt2) or IR text (.ir)")->required();
  std::string rulesSchema;
  rules->add_option("--schema", rulesSchema,
                    "placement schema whose \"rules\" (custom ops' rules) join the built-in ones");

  spmdc::PlacementsArgs pl;
  auto* placements = spmdc::addPlacementsCommand(app, pl);
  spmdc::ReshardArgs rs;
  auto* reshard = spmdc::addReshardCommand(app, rs);

  FromHfArgs h;
  auto* schemaCmd = app.add_subcommand("schema", "Write placement schemas");
  auto* fromHf = schemaCmd->add_subcommand(
      "from-hf", "Write the explicit schema of a Hugging Face tensor-parallel plan (base_model_tp_plan)");
  fromHf->add_option("plan", h.plan, "JSON file holding base_model_tp_plan (and tp_plan)")->required();
  fromHf->add_option("--mesh", h.mesh, "mesh shape, e.g. 2 or 2x4")->required();
  fromHf->add_option("--axes", h.axes,
                     "mesh axis names, e.g. dp,tp (default: tp for 1-D, dp,tp for 2-D, dp0,dp1,tp for 3-D)");
  fromHf->add_option("--tp-axis", h.tpAxis, "the axis the plan shards over (default: tp)");
  fromHf->add_option("--model", h.model, "the exported model (.pt2): one exact rule per parameter");
  fromHf->add_option("-o,--output", h.output, "schema file to write")->required();
  schemaCmd->require_subcommand(1);

  std::string dumpPath, diffA, diffB;
  auto* dump = app.add_subcommand("dump", "Print a .spmd program, one op per line");
  dump->add_option("program", dumpPath, ".spmd program")->required();
  auto* diff = app.add_subcommand("diff", "Structural diff of two .spmd programs (exit 1 when they differ)");
  diff->add_option("a", diffA, ".spmd program")->required();
  diff->add_option("b", diffB, ".spmd program")->required();

  ExplainArgs x;
  auto* explain = app.add_subcommand(
      "explain", "Write an HTML page of a program: modules, timeline, memory, communication (two: compared)");
  explain->add_option("programs", x.inputs, ".spmd program(s), or a .pt2 compiled with --schema")
      ->required()
      ->expected(1, 2);
  explain->add_option("-o,--output", x.output, "HTML file to write")->required();
  explain->add_option("--schema", x.compile.schema, "placement schema or preset (for a .pt2 input)");
  explain->add_option("--profile", x.profiles,
                      "show the peak memory measured by spmd-run --profile beside the estimate (one file, or "
                      "one per node)");
  spmdc::addCompileOptions(explain, x.compile);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  if (auto st = spmd::logging::configure(logLevel); !st.isOk()) return fail(st);
  if (listRules) {
    for (const auto& t : spmd::sharding::defaultRuleRegistry().targets()) std::cout << t << "\n";
    return 0;
  }
  if (listPasses) {
    std::cout << spmd::passes::passListing();
    return 0;
  }
  if (*inspect) return runInspect(inspectPath, format, printIr);
  if (*compile) return spmdc::runCompile(c);
  if (*opt) return spmdc::runOpt(o, debugInfo);
  if (*rules) return runRules(rulesPath, rulesSchema);
  if (*placements) return spmdc::runPlacements(pl);
  if (*reshard) return spmdc::runReshard(rs);
  if (*fromHf) return runFromHf(h);
  if (*dump) return runDump(dumpPath);
  if (*diff) return runDiff(diffA, diffB);
  if (*explain) return runExplain(x);
  std::cerr << app.help();
  return kExitBadInput;
}
