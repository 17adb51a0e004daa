// spmd-run --calibrate: the link fit, the profile's keys, and the tool run
// as a process on 2 CPU workers (quick mode), including its errors.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "../TestCatch.h"
#include "SpmdRunUtil.h"
#include "runtime/Calibrate.h"
#include "sharding/DeviceProfile.h"

using namespace spmd;
using namespace spmd::runtime;
using spmd::testing::readBytes;
using spmd::testing::RunResult;
using spmd::testing::spmdRun;
using spmd::testing::TempDir;

namespace {

/// Seconds of alpha + bytes / bw at each size.
std::vector<std::pair<double, double>> linePoints(double alpha, double bw) {
  std::vector<std::pair<double, double>> p;
  for (double bytes : {4e3, 6.4e4, 1e6, 1.6e7}) p.emplace_back(bytes, alpha + bytes / bw);
  return p;
}

int64_t lineCount(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

void requireLink(const nlohmann::json& link) {
  REQUIRE(link.size() == 2);
  CHECK(link.at("alpha_seconds").get<double>() > 0);
  CHECK(link.at("bytes_per_second").get<double>() > 0);
}

}  // namespace

TEST_CASE("fitLink recovers alpha and bandwidth of exact measurements") {
  Expected<LinkFit> fit = fitLink(linePoints(25e-6, 2e9));
  REQUIRE(fit.hasValue());
  CHECK(fit->alphaSeconds == Approx(25e-6).epsilon(1e-6));
  CHECK(fit->bytesPerSecond == Approx(2e9).epsilon(1e-6));
  CHECK(fit->residual < 1e-9);
  CHECK(fit->note.empty());
}

TEST_CASE("fitLink keeps alpha and bandwidth positive on noisy measurements") {
  // Small messages faster than the line through the large ones: a negative
  // intercept.
  std::vector<std::pair<double, double>> p = {{1e3, 1e-7}, {1e6, 1e-3}, {1e7, 1.2e-2}};
  Expected<LinkFit> fit = fitLink(p);
  REQUIRE(fit.hasValue());
  CHECK(fit->alphaSeconds == Approx(1e-7));
  CHECK(fit->bytesPerSecond > 0);
  CHECK(fit->residual > 0);
  CHECK_FALSE(fit->note.empty());
  // Times that shrink with size: no bandwidth term at all.
  Expected<LinkFit> flat = fitLink({{1e3, 2e-3}, {1e6, 1e-3}});
  REQUIRE(flat.hasValue());
  CHECK(flat->alphaSeconds == Approx(2e-3));
  CHECK(flat->bytesPerSecond == Approx(1e9));
  CHECK(flat->note.find("did not grow") != std::string::npos);
}

TEST_CASE("fitLink refuses too few sizes and non-positive times") {
  CHECK_FALSE(fitLink({{1e3, 1e-3}}).hasValue());
  CHECK_FALSE(fitLink({{1e3, 1e-3}, {1e3, 2e-3}}).hasValue());
  CHECK_FALSE(fitLink({{1e3, 0.0}, {1e6, 1e-3}}).hasValue());
}

TEST_CASE("profileJson writes the agreed keys, intra and inter-node links from the axes") {
  Calibration c;
  c.compute = {5e10, 6e10, 1e10, 128, 8 << 20};
  c.ranks = 4;
  c.ranksPerNode = 2;
  c.backend = "gloo";
  c.device = "cpu";
  c.axes.push_back({"dp", 2, true, {}, {5e-5, 1e9, 0.1, ""}});
  c.axes.push_back({"tp", 2, false, {}, {2e-5, 4e9, 0.05, ""}});
  nlohmann::json j = nlohmann::json::parse(profileJson(c));
  for (const auto& [key, value] : j.items())
    CHECK((key == "name" || key == "source" || key == "compute" || key == "links" ||
           key == "ranks_per_node" || key == "axes"));
  CHECK(j.at("compute").at("flops_per_second").at("float32").get<double>() == 5e10);
  CHECK(j.at("compute").at("flops_per_second").at("bfloat16").get<double>() == 6e10);
  CHECK(j.at("compute").at("flops_per_second").at("default").get<double>() == 5e10);
  CHECK(j.at("compute").at("memory_bytes_per_second").get<double>() == 1e10);
  CHECK(j.at("links").at("intra_node").at("bytes_per_second").get<double>() == 4e9);
  CHECK(j.at("links").at("inter_node").at("bytes_per_second").get<double>() == 1e9);
  CHECK(j.at("ranks_per_node").get<int>() == 2);
  CHECK(j.at("axes").at("dp").at("alpha_seconds").get<double>() == 5e-5);
  // One node: inter_node copies intra_node, and the source says so.
  c.axes[0].crossesNodes = false;
  j = nlohmann::json::parse(profileJson(c));
  CHECK(j.at("links").at("inter_node") == j.at("links").at("intra_node"));
  CHECK(j.at("source").get<std::string>().find("inter_node = intra_node") != std::string::npos);
}

TEST_CASE("spmd-run --calibrate-quick on 2 CPU workers writes a loadable profile") {
  TempDir dir;
  const std::string profile = dir.file("profile.json");
  RunResult r = spmdRun("--calibrate-quick -n 2 --mesh 2 --axes tp --device cpu -o '" + profile + "'");
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  CHECK(r.stdoutText.find("axis tp (2 ranks)") != std::string::npos);
  CHECK(r.stdoutText.find("residual") != std::string::npos);
  nlohmann::json j = nlohmann::json::parse(readBytes(profile));
  CHECK(j.at("name").is_string());
  CHECK(j.at("source").get<std::string>().find("spmd-run --calibrate") != std::string::npos);
  const nlohmann::json& flops = j.at("compute").at("flops_per_second");
  for (const char* dtype : {"float32", "bfloat16", "default"}) CHECK(flops.at(dtype).get<double>() > 0);
  CHECK(j.at("compute").at("memory_bytes_per_second").get<double>() > 0);
  requireLink(j.at("links").at("intra_node"));
  requireLink(j.at("links").at("inter_node"));
  CHECK(j.at("ranks_per_node").get<int>() == 2);
  REQUIRE(j.at("axes").size() == 1);
  requireLink(j.at("axes").at("tp"));
  // spmdc --device-profile reads it: the tp axis takes its measured link.
  Expected<sharding::DeviceProfile> loaded = sharding::loadDeviceProfile(profile);
  INFO(loaded.status().message());
  REQUIRE(loaded.hasValue());
  CHECK(loaded->axes.at("tp").bytesPerSecond == j.at("axes").at("tp").at("bytes_per_second").get<double>());
}

TEST_CASE("shipped profiles load and say where their figures come from") {
  for (const char* name : {"h100-nvlink", "h200-nvlink", "a100-nvlink", "cpu-loopback"}) {
    const std::string path = SPMD_SOURCE_DIR "/profiles/" + std::string(name) + ".json";
    INFO(path);
    Expected<sharding::DeviceProfile> p = sharding::loadDeviceProfile(path);
    INFO(p.status().message());
    REQUIRE(p.hasValue());
    CHECK(p->name == name);
    nlohmann::json j = nlohmann::json::parse(readBytes(path));
    CHECK(j.at("source").get<std::string>().size() > 40);
    CHECK(p->flopsPerSecond.at("float32") > 0);
    CHECK(p->flopsPerSecond.at("bfloat16") > 0);
  }
  // Per direction: NVLink 4's 900 GB/s is 450 each way; one 400 Gb/s NDR port per GPU.
  auto h100 = sharding::loadDeviceProfile(SPMD_SOURCE_DIR "/profiles/h100-nvlink.json");
  auto h200 = sharding::loadDeviceProfile(SPMD_SOURCE_DIR "/profiles/h200-nvlink.json");
  REQUIRE((h100.hasValue() && h200.hasValue()));
  CHECK(h100->intraNode.bytesPerSecond == 450e9);
  CHECK(h100->interNode.bytesPerSecond == 50e9);
  CHECK(h200->memoryBytesPerSecond > h100->memoryBytesPerSecond);
}

TEST_CASE("spmd-run --calibrate refuses a bad -o or mesh in one line, writing nothing") {
  TempDir dir;
  const std::string missing = dir.file("no/such/folder/profile.json");
  RunResult r = spmdRun("--calibrate-quick -n 2 -o '" + missing + "'");
  CHECK(r.exitCode == 2);
  CHECK(lineCount(r.stderrText) == 1);
  CHECK(r.stderrText.rfind("error: " + missing + ": cannot write the profile: the folder", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("no")));

  r = spmdRun("--calibrate-quick -n 2 -o '" + dir.path().string() + "'");
  CHECK(r.exitCode == 2);
  CHECK(lineCount(r.stderrText) == 1);
  CHECK(r.stderrText.find("is a folder") != std::string::npos);

  const std::string profile = dir.file("profile.json");
  r = spmdRun("--calibrate-quick -n 2 --mesh 2x2 -o '" + profile + "'");
  CHECK(r.exitCode == 2);
  CHECK(lineCount(r.stderrText) == 1);
  CHECK(r.stderrText.find("pass -n 4") != std::string::npos);
  r = spmdRun("--calibrate-quick -n 1 -o '" + profile + "'");
  CHECK(r.exitCode == 2);
  CHECK(r.stderrText.find("2 or more workers") != std::string::npos);
  r = spmdRun("--calibrate-quick -n 2 '" + profile + "'");  // no -o
  CHECK(r.exitCode == 2);
  CHECK(r.stderrText.find("-o profile.json") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(profile));
  r = spmdRun("--mesh 2x2 '" + profile + "'");  // --mesh without --calibrate
  CHECK(r.exitCode == 2);
  CHECK(r.stderrText.find("apply to --calibrate") != std::string::npos);
}
