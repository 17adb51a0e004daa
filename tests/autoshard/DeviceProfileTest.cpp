// Device profiles: the agreed JSON format, its errors, and the link each
// mesh axis gets.
#include "../TestCatch.h"
#include "sharding/DeviceProfile.h"

using namespace spmd;
using namespace spmd::sharding;

namespace {

const char* kProfile = R"({
  "name": "cpu-loopback",
  "source": "measured on the CI machine",
  "compute": {"flops_per_second": {"float32": 5.0e10, "bfloat16": 7.0e10, "default": 4.0e10},
              "memory_bytes_per_second": 1.0e10},
  "links": {"intra_node": {"alpha_seconds": 2.0e-5, "bytes_per_second": 1.0e9},
            "inter_node": {"alpha_seconds": 5.0e-5, "bytes_per_second": 2.0e8, "source": "ib"}},
  "ranks_per_node": 4,
  "axes": {"tp": {"alpha_seconds": 1.9e-5, "bytes_per_second": 1.2e9}}
})";

}  // namespace

TEST_CASE("a device profile in the agreed format parses") {
  auto p = parseDeviceProfile(kProfile, "p.json");
  REQUIRE(p.hasValue());
  CHECK(p->name == "cpu-loopback");
  CHECK(p->flopsFor(ir::ScalarType::Float) == 5e10);
  CHECK(p->flopsFor(ir::ScalarType::BFloat16) == 7e10);
  CHECK(p->flopsFor(ir::ScalarType::Half) == 4e10);  // default
  CHECK(p->memoryBytesPerSecond == 1e10);
  CHECK(p->ranksPerNode == 4);
  CHECK(p->axes.at("tp").bytesPerSecond == 1.2e9);
}

TEST_CASE("each mesh axis gets its measured, intra-node or inter-node link") {
  auto p = parseDeviceProfile(kProfile, "p.json");
  REQUIRE(p.hasValue());
  // 4x2 (dp, tp) with 4 ranks per node: tp measured; 2x2 (pp, dp): dp's
  // groups are 2 adjacent ranks (in a node), pp's span 4 ranks (in a node).
  auto m1 = Mesh::create({4, 2}, {"dp", "tp"});
  REQUIRE(m1.hasValue());
  CHECK(axisLinkFor(*p, *m1, 1).bytesPerSecond == 1.2e9);  // axes.tp
  CHECK(axisLinkFor(*p, *m1, 0).bytesPerSecond == 2e8);    // stride 2 * 4 > 4: inter-node
  auto m2 = Mesh::create({2, 2}, {"pp", "dp"});
  REQUIRE(m2.hasValue());
  CHECK(axisLinkFor(*p, *m2, 0).bytesPerSecond == 1e9);
  CHECK(axisLinkFor(*p, *m2, 1).bytesPerSecond == 1e9);
  CostModel cm = costModelFor(*p, *m1);
  CHECK(cm.axisLink(0).alphaSeconds == 5e-5);
  CHECK(cm.axisLink(1).alphaSeconds == 1.9e-5);
}

TEST_CASE("profile errors name the file and the key") {
  auto bad = [](const std::string& text) {
    auto p = parseDeviceProfile(text, "h100.json");
    REQUIRE_FALSE(p.hasValue());
    return p.status().message();
  };
  std::string base = kProfile;
  CHECK(bad("{").find("h100.json: not a JSON device profile") == 0);
  std::string unknown = base;
  unknown.replace(unknown.find("\"ranks_per_node\""), 16, "\"ranks_per_nod\"");
  CHECK(bad(unknown).find("h100.json: key 'ranks_per_nod': unknown key; expected name, compute, links") == 0);
  std::string nested = base;
  nested.replace(nested.find("\"memory_bytes_per_second\""), 25, "\"memory_bandwidth\"");
  CHECK(bad(nested).find("h100.json: key 'compute.memory_bandwidth': unknown key") == 0);
  std::string zero = base;
  zero.replace(zero.find("1.2e9"), 5, "0");
  CHECK(bad(zero) == "h100.json: key 'axes.tp.bytes_per_second': expected a number > 0");
  CHECK(bad(R"({"compute": {"flops_per_second": {"default": 1}, "memory_bytes_per_second": 1}})") ==
        "h100.json: key 'links': missing");
}

TEST_CASE("a missing profile file is an error naming it") {
  auto p = loadDeviceProfile("/nonexistent/p.json");
  REQUIRE_FALSE(p.hasValue());
  CHECK(p.status().message().find("/nonexistent/p.json") != std::string::npos);
}

TEST_CASE("the built-in profile is a CPU-loopback-like machine") {
  const DeviceProfile& d = defaultDeviceProfile();
  CHECK(d.name == "builtin-cpu-loopback");
  CHECK(d.flopsFor(ir::ScalarType::Float) == 5e10);
  CHECK(d.intraNode.alphaSeconds == 2e-5);
}
