// `spmdc dump` text: exact lines for a hand-built program, machine-specific
// provenance left out, identical after a write/read round trip.
#include "../TestCatch.h"

#include "ProgramTestUtil.h"
#include "program/Dump.h"
#include "program/Reader.h"
#include "program/Writer.h"

namespace spmd::program {
namespace {

constexpr const char* kHeaderAndGraph =
    "spmd program tiny (format 2.0)\n"
    "mesh 2 (x=2), 2 ranks\n"
    "graph schema 8.17, torch 2.11.0\n"
    "provenance source: tiny.pt2\n"
    "provenance command: spmdc compile tiny.pt2 --schema=s.json --mesh 2\n"
    "input %p_w: f32[4, 4] parameter w  [S(0)] global f32[8, 4]\n"
    "input %x: f32[2, 4] user_input  [R] global f32[2, 4]\n"
    "%t: f32[4, 4] = aten.t.default(self=%p_w)\n"
    "%mm: f32[2, 4] = aten.mm.default(self=%x, mat2=%t)\n"
    "%all_gather: f32[2, 8] = spmd.all_gather(input=%mm, axis=\"x\", dim=1)\n"
    "output %all_gather user_output  [R] global f32[2, 8]\n";

TEST_CASE("dump prints one line per input, node, output and weight", "[program][dump]") {
  Program p = testing::tinyProgram();
  CHECK(dumpProgram(p) == std::string(kHeaderAndGraph) +
                              "weight w  [S(0)] f32[8, 4] -> []  blobs 0  bytes/rank 0\n"
                              "weights 1  bytes/rank 0\n"
                              "collective all_gather  count 1  bytes/rank 32\n");

  testing::TempDir dir;
  MemoryWeightSource source;
  source.add("w", testing::iotaBytes<float>(32));
  REQUIRE(writeProgram(dir.file("tiny.spmd"), p, source).isOk());
  std::string written = std::string(kHeaderAndGraph) +
                        "weight w  [S(0)] f32[8, 4] -> [4, 4]  blobs 2  bytes/rank 64\n"
                        "weights 1  bytes/rank 64\n"
                        "collective all_gather  count 1  bytes/rank 32\n";
  CHECK(dumpProgram(p) == written);
  auto loaded = readProgram(dir.file("tiny.spmd"));
  REQUIRE(loaded.hasValue());
  CHECK(dumpProgram(loaded->program()) == written);
}

TEST_CASE("dump leaves machine-specific provenance out", "[program][dump]") {
  Program p = testing::tinyProgram();
  p.provenance = {{"source", "C:\\models\\tiny.pt2"},
                  {"host", "gpu-node-7"},
                  {"user", "me"},
                  {"schema", "schemas/examples/tp.json"},
                  {"options", "--out=/tmp/x/tiny.spmd -O2"},
                  {"timestamp", "1735725600"},
                  {"compiler", "spmdc 0.1.0"}};
  std::vector<std::pair<std::string, std::string>> expected = {{"source", "tiny.pt2"},
                                                               {"schema", "schemas/examples/tp.json"},
                                                               {"options", "--out=tiny.spmd -O2"},
                                                               {"compiler", "spmdc 0.1.0"}};
  CHECK(stableProvenance(p) == expected);
}

TEST_CASE("collectives are counted from the graph, bytes from the records", "[program][dump]") {
  Program p = testing::tinyProgram();
  auto summary = summarizeCollectives(p);
  REQUIRE(summary.size() == 1);
  CHECK(summary.at("all_gather").count == 1);
  CHECK(summary.at("all_gather").bytesPerRank == 32);
  p.collectives.clear();  // no record: the node's input is f32[2, 4]
  CHECK(summarizeCollectives(p).at("all_gather").bytesPerRank == 32);
  p.collectives.push_back({"all_gather", "all_gather", "x", 100, "", "", "", "", ""});
  CHECK(summarizeCollectives(p).at("all_gather").bytesPerRank == 100);
}

}  // namespace
}  // namespace spmd::program
