// spmdc compile --schema auto: --write-schema loads back and compiles to the
// same program; the report says what was chosen and why; flag errors.
#include <nlohmann/json.hpp>

#include "../TestCatch.h"
#include "../pt2/ArchiveFixtures.h"

using spmd::testing::readBytes;
using spmd::testing::runCommand;
using spmd::testing::TempDir;

namespace {

const std::string kSpmdc = SPMDC_PATH;
std::string model(const std::string& m) {
  return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2";
}

}  // namespace

TEST_CASE("--write-schema writes a schema that compiles to the same program") {
  for (const char* mesh : {"2 --axes tp", "2x2 --axes dp,tp"}) {
    INFO(mesh);
    TempDir dir;
    std::string common = kSpmdc + " compile " + model("llama_train") + " --optimizer adamw --mesh " + mesh;
    auto a = runCommand(common + " --schema auto --write-schema " + dir.file("chosen.json") + " -o " +
                        dir.file("a.spmd") + " --report " + dir.file("r.json"));
    INFO(a.stderrText);
    REQUIRE(a.exitCode == 0);
    CHECK(a.stdoutText.find("  auto (") != std::string::npos);
    CHECK(a.stdoutText.find("  dp would cost ") != std::string::npos);
    std::string meshOnly = std::string(mesh).substr(0, std::string(mesh).find(' '));
    auto b =
        runCommand(kSpmdc + " compile " + model("llama_train") + " --optimizer adamw --mesh " + meshOnly +
                   " --schema " + dir.file("chosen.json") + " -o " + dir.file("b.spmd") + " -q");
    INFO(b.stderrText);
    REQUIRE(b.exitCode == 0);
    auto d = runCommand(kSpmdc + " diff " + dir.file("a.spmd") + " " + dir.file("b.spmd"));
    INFO(d.stdoutText);
    CHECK(d.exitCode == 0);
    auto j = nlohmann::json::parse(readBytes(dir.file("r.json")));
    REQUIRE(j.contains("auto"));
    CHECK(j["auto"]["chosen"]["modeled_step_ms"].get<double>() ==
          Approx(j["cost"]["modeled_step_ms"].get<double>()));
    std::vector<std::string> names;
    for (const auto& alt : j["auto"]["alternatives"]) {
      names.push_back(alt["name"]);
      CHECK(alt["ratio"].get<double>() >= 1.0 - 1e-9);
      CHECK(alt["why"].get<std::string>().find(" would cost ") != std::string::npos);
    }
    CHECK(std::find(names.begin(), names.end(), "fsdp") != names.end());
    CHECK(std::find(names.begin(), names.end(), "runner-up") != names.end());
  }
}

TEST_CASE("--schema auto flag errors are one line, exit 2, no output") {
  TempDir dir;
  auto noMesh = runCommand(kSpmdc + " compile " + model("mlp") + " --schema auto -o " + dir.file("o.spmd"));
  CHECK(noMesh.exitCode == 2);
  CHECK(noMesh.stderrText.find("--schema auto needs --mesh") != std::string::npos);
  auto axes = runCommand(kSpmdc + " compile " + model("mlp") + " --schema dp --mesh 2 --axes tp -o " +
                         dir.file("o.spmd"));
  CHECK(axes.exitCode == 2);
  CHECK(axes.stderrText == "error: --axes tp: applies to --schema auto only\n");
  auto budget = runCommand(kSpmdc + " compile " + model("mlp") +
                           " --schema auto --mesh 2 --memory-budget 1KiB -o " + dir.file("o.spmd"));
  CHECK(budget.exitCode == 2);
  CHECK(budget.stderrText.find("no layout fits the memory budget of 1,024 B/rank") != std::string::npos);
  auto profile = runCommand(kSpmdc + " compile " + model("mlp") + " --schema dp --mesh 2 --device-profile " +
                            dir.file("missing.json") + " -o " + dir.file("o.spmd"));
  CHECK(profile.exitCode == 2);
  CHECK(profile.stderrText.find("missing.json") != std::string::npos);
  CHECK(dir.list().empty());
}

TEST_CASE("--device-profile feeds the report's cost") {
  TempDir dir;
  std::ofstream(dir.file("p.json")) << R"({"name": "slow-links",
    "compute": {"flops_per_second": {"default": 5e10}, "memory_bytes_per_second": 1e10},
    "links": {"intra_node": {"alpha_seconds": 1e-3, "bytes_per_second": 1e6},
              "inter_node": {"alpha_seconds": 1e-3, "bytes_per_second": 1e6}}})";
  auto r = runCommand(kSpmdc + " compile " + model("mlp") + " --schema dp --mesh 2 --device-profile " +
                      dir.file("p.json") + " -o " + dir.file("o.spmd") + " --report " + dir.file("r.json"));
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(readBytes(dir.file("r.json")));
  CHECK(j["cost"]["device_profile"] == "slow-links");
  CHECK(j["cost"]["comm_ms"].get<double>() > 1.0);  // alpha 1 ms per collective
}

TEST_CASE("--log-level debug traces the search on stderr; the default, warn, does not") {
  TempDir dir;
  std::string common =
      kSpmdc + " compile " + model("mlp") + " --schema auto --mesh 2 -q -o " + dir.file("o.spmd");
  auto traced = runCommand(common + " --log-level debug");
  INFO(traced.stderrText);
  REQUIRE(traced.exitCode == 0);
  CHECK_THAT(traced.stderrText, Catch::Contains("debug: auto: evaluating "));
  CHECK_THAT(traced.stderrText, Catch::Contains(": compute "));  // "debug: auto: compiled dp: compute ..."
  auto quiet = runCommand(common);
  REQUIRE(quiet.exitCode == 0);
  CHECK(quiet.stderrText.empty());
  // SPMD_LOG_LEVEL sets it too; the flag wins.
  auto env = runCommand("SPMD_LOG_LEVEL=debug " + common);
  CHECK_THAT(env.stderrText, Catch::Contains("debug: auto: evaluating "));
  auto both = runCommand("SPMD_LOG_LEVEL=debug " + common + " --log-level warn");
  CHECK(both.stderrText.empty());
}

TEST_CASE("a bad log level is one line naming the flag or the variable, exit 2") {
  TempDir dir;
  std::string common =
      kSpmdc + " compile " + model("mlp") + " --schema dp --mesh 2 -q -o " + dir.file("o.spmd");
  const std::string levels = ": unknown log level; expected trace, debug, info, warn, error or off\n";
  auto flag = runCommand(common + " --log-level foo");
  CHECK(flag.exitCode == 2);
  CHECK(flag.stderrText == "error: --log-level foo" + levels);
  auto env = runCommand("SPMD_LOG_LEVEL=foo " + common);
  CHECK(env.exitCode == 2);
  CHECK(env.stderrText == "error: environment variable SPMD_LOG_LEVEL=foo" + levels);
  CHECK(dir.list().empty());
}

// A pp axis (PipelineSearch.h): under a budget only a pipeline meets, the
// summary gives one line per candidate, --report's auto.pipeline their
// figures, and --write-schema a "pipeline" entry that compiles to the same
// program. The summary's cost line and --report's "cost" are the pipeline
// model's (the chosen line's 16.930 ms, bubble included), not the whole
// graph's on one rank (modelLayout's 7.2 ms), with per-axis comm adding up.
TEST_CASE("--axes pp,dp: the chosen pipeline is reported and written") {
  TempDir dir;
  std::string pipe = std::string(SPMD_TESTDATA_DIR) + "/pipeline/llama_pipe_train/model.pt2";
  auto a = runCommand(kSpmdc + " compile " + pipe + " --mesh 2x1 --axes pp,dp --memory-budget 2700000" +
                      " --schema auto --write-schema " + dir.file("chosen.json") + " -o " +
                      dir.file("a.spmd") + " --report " + dir.file("r.json"));
  INFO(a.stdoutText << a.stderrText);
  REQUIRE(a.exitCode == 0);
  CHECK(a.stdoutText.find("1f1b pipeline, 8 microbatches (chosen): modeled step") != std::string::npos);
  CHECK(a.stdoutText.find("no pipeline: --schema auto: no layout fits") != std::string::npos);
  auto chosen = nlohmann::json::parse(readBytes(dir.file("chosen.json")));
  CHECK(chosen["pipeline"] ==
        nlohmann::json::parse(R"({"axis": "pp", "stages": 2, "schedule": "1f1b", "microbatches": 8})"));
  auto r = nlohmann::json::parse(readBytes(dir.file("r.json")));
  REQUIRE(r["auto"]["pipeline"].size() == 4);
  CHECK(r["auto"]["pipeline"][0].contains("error"));
  CHECK(r["auto"]["pipeline"][3]["microbatches"] == 8);
  CHECK(r["auto"]["pipeline"][3]["fits"] == true);
  CHECK(r["auto"]["pipeline"][3]["bubble"].get<double>() == Approx(1.0 / 9));
  const auto& cost = r["cost"];
  CHECK(cost["modeled_step_ms"].get<double>() ==
        Approx(r["auto"]["pipeline"][3]["modeled_step_ms"].get<double>()));
  CHECK(cost["peak_bytes_per_rank"] == r["auto"]["pipeline"][3]["peak_bytes_per_rank"]);
  CHECK(cost["comm_ms_per_axis"]["pp"].get<double>() + cost["comm_ms_per_axis"]["dp"].get<double>() ==
        Approx(cost["comm_ms"].get<double>()));
  CHECK(cost["collectives_per_axis"]["pp"] == 8);  // rank 0 sends one value per microbatch
  CHECK(r["pipeline"]["bubble"].get<double>() == Approx(1.0 / 9));
  CHECK(r["pipeline"]["p2p_bytes_per_step"] == r["auto"]["pipeline"][3]["p2p_bytes_per_step"]);
  auto chosenLine = a.stdoutText.find("(chosen): modeled step ");
  REQUIRE(chosenLine != std::string::npos);
  std::string step =
      a.stdoutText.substr(chosenLine + 23, a.stdoutText.find(',', chosenLine) - chosenLine - 23);
  CHECK(a.stdoutText.find("cost (builtin-cpu-loopback): modeled step " + step + " =") != std::string::npos);
  CHECK(a.stdoutText.find("pipeline 1f1b: bubble 11.1%, 131,072 B sent between stages per step") !=
        std::string::npos);
  auto b = runCommand(kSpmdc + " compile " + pipe + " --schema " + dir.file("chosen.json") + " -o " +
                      dir.file("b.spmd") + " -q");
  INFO(b.stderrText);
  REQUIRE(b.exitCode == 0);
  auto d = runCommand(kSpmdc + " diff " + dir.file("a.spmd") + " " + dir.file("b.spmd"));
  INFO(d.stdoutText);
  CHECK(d.exitCode == 0);
}
