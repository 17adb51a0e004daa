// Damaged .spmd files: a program compiled from a test model, mutated at a
// few hundred deterministic positions, must read back either unchanged in
// its weights or as a one-line error; never a crash, an abort or a hang.
//
//   flip bit 3 of byte 70 (inside the JSON)     -> "<path>: the program JSON does not match its checksum:
//   ..." flip a bit inside fc1.weight's blob [1]     -> readProgram ok, shardFor(rank 1) refuses it "offset":
//   4096 -> 1099511627776 (JSON re-summed) -> "<path>: weight ... lie outside the data section ..."
#include "../TestCatch.h"

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "../pt2/ArchiveFixtures.h"
#include "ProgramTestUtil.h"
#include "passes/Pipeline.h"
#include "program/Dump.h"
#include "program/Format.h"
#include "program/Reader.h"
#include "program/Writer.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

namespace spmd::program {
namespace {

using testing::TempDir;

// `model` compiled under preset `schema` on `mesh`, written to `path`.
void compileTo(const std::string& model, const std::string& schema, std::vector<int64_t> mesh,
               const std::string& path) {
  auto archive = pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + model + "/model.pt2");
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::move(mesh);
  auto r = passes::compile(*archive, *s, opts);
  INFO(r.status().message());
  REQUIRE(r.hasValue());
  ArchiveWeightSource source(*archive);
  Status st = writeProgram(path, r->program, source);
  INFO(st.message());
  REQUIRE(st.isOk());
}

// Every rank's bytes of every weight, in order (empty when a blob is refused).
std::vector<std::string> rankBytes(const LoadedProgram& lp, bool& refused) {
  std::vector<std::string> out;
  refused = false;
  for (const WeightEntry& w : lp.program().weights)
    for (int64_t r = 0; r < lp.program().mesh.numRanks(); ++r) {
      auto bytes = lp.shardFor(w, r);
      if (!bytes) {
        CHECK(bytes.status().message().find('\n') == std::string::npos);
        refused = true;
        return {};
      }
      out.emplace_back(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    }
  return out;
}

// The outcome of reading a mutated file: refused (one line, naming the
// file), or read with every rank's weight bytes identical to `original`.
// Returns true when the file was refused.
bool readRefusedOrSame(const std::string& path, const std::vector<std::string>& original) {
  auto r = readProgram(path);
  if (!r) {
    const std::string& m = r.status().message();
    CHECK(m.rfind(path + ": ", 0) == 0);
    CHECK(m.find('\n') == std::string::npos);
    return true;
  }
  (void)dumpProgram(r->program());  // `spmdc dump` must cope with whatever passed the reader
  bool refused = false;
  std::vector<std::string> bytes = rankBytes(*r, refused);
  if (!refused) CHECK(bytes == original);
  return refused;
}

// Half-open byte ranges of the file that a checksum covers: header and
// JSON, and every blob.
std::vector<std::pair<uint64_t, uint64_t>> coveredRanges(const LoadedProgram& lp, uint64_t jsonLength) {
  std::vector<std::pair<uint64_t, uint64_t>> out{{0, kHeaderSize + jsonLength}};
  uint64_t dataStart = dataSectionOffset(jsonLength);
  for (const WeightEntry& w : lp.program().weights)
    for (const ShardBlob& b : w.shards)
      out.emplace_back(dataStart + b.offset, dataStart + b.offset + b.bytes);
  return out;
}

TEST_CASE("the format's checksum is XXH3-64, printed as 16 hex digits", "[program][integrity]") {
  CHECK(checksumHex(checksum(std::string_view())) == "2d06800538d394c2");  // XXH3_64bits("", 0)
  CHECK(checksum(std::string_view("a")) != checksum(std::string_view("b")));
  uint64_t sum = 0;
  CHECK(parseChecksumHex("00000000000000ff", sum));
  CHECK(sum == 255);
  CHECK(checksumHex(sum) == "00000000000000ff");
  for (std::string_view bad : {"", "ff", "00000000000000FF", "0000000000000g00", "000000000000000000"})
    CHECK_FALSE(parseChecksumHex(bad, sum));
}

TEST_CASE("a compiled program with flipped bits is refused or unchanged", "[program][integrity]") {
  TempDir dir;
  std::string good = dir.file("good.spmd");
  std::string bad = dir.file("bad.spmd");
  compileTo("mlp", "fsdp", {2}, good);
  const std::string bytes = testing::readBytes(good);
  auto lp = readProgram(good);
  REQUIRE(lp.hasValue());
  REQUIRE(lp->verifyWeights().isOk());
  bool refused = false;
  const std::vector<std::string> original = rankBytes(*lp, refused);
  REQUIRE_FALSE(refused);
  uint64_t jsonLength = 0;
  std::memcpy(&jsonLength, bytes.data() + 16, 8);
  auto covered = coveredRanges(*lp, jsonLength);

  std::mt19937_64 rng(15);
  auto start = std::chrono::steady_clock::now();
  int detected = 0;
  for (int i = 0; i < 300; ++i) {
    // Every 3rd flip in the header and JSON, the rest anywhere.
    uint64_t span = i % 3 == 0 ? kHeaderSize + jsonLength : bytes.size();
    uint64_t pos = rng() % span;
    std::string mutated = bytes;
    mutated[pos] = static_cast<char>(mutated[pos] ^ (1 << (rng() % 8)));
    testing::writeBytes(bad, mutated);
    INFO("flipped byte " << pos);
    bool wasRefused = readRefusedOrSame(bad, original);
    bool isCovered = std::any_of(covered.begin(), covered.end(),
                                 [&](const auto& r) { return pos >= r.first && pos < r.second; });
    // A flip where a checksum looks is always caught; padding may change freely.
    CHECK(wasRefused == isCovered);
    detected += wasRefused;
  }
  CHECK(detected > 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("a compiled program with edited integers is refused or unchanged", "[program][integrity]") {
  TempDir dir;
  std::string good = dir.file("good.spmd");
  std::string bad = dir.file("bad.spmd");
  compileTo("gpt_block", "fsdp", {2}, good);
  const std::string bytes = testing::readBytes(good);
  auto lp = readProgram(good);
  REQUIRE(lp.hasValue());
  bool refused = false;
  const std::vector<std::string> original = rankBytes(*lp, refused);
  REQUIRE_FALSE(refused);
  uint64_t jsonLength = 0;
  std::memcpy(&jsonLength, bytes.data() + 16, 8);
  const std::string json = bytes.substr(kHeaderSize, jsonLength);
  const std::string data = bytes.substr(dataSectionOffset(jsonLength));

  // Every integer in the JSON (a value, not part of a string: after ':', '[' or ',').
  std::vector<std::pair<size_t, size_t>> ints;
  std::regex number(R"([:\[,](-?[0-9]+)(?=[,\]}]))");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), number); it != std::sregex_iterator(); ++it)
    ints.emplace_back(static_cast<size_t>(it->position(1)), static_cast<size_t>(it->length(1)));
  REQUIRE(ints.size() > 100);
  std::vector<std::string> replacements;
  std::istringstream values(
      "-1 0 1 3 64 -64 2147483648 1099511627776 -9223372036854775808 9223372036854775807 "
      "18446744073709551615 99999999999999999999");
  for (std::string v; values >> v;) replacements.push_back(v);
  std::mt19937_64 rng(15);
  auto start = std::chrono::steady_clock::now();
  int refusedCount = 0;
  for (int i = 0; i < 300; ++i) {
    auto [pos, len] = ints[rng() % ints.size()];
    const std::string& with = replacements[rng() % replacements.size()];
    std::string edited = json;
    edited.replace(pos, len, with);
    testing::writeBytes(bad, testing::assembleFile(edited, data, kFormatVersion, kFormatMinor));
    INFO("integer at " << pos << ": " << json.substr(pos, len) << " -> " << with);
    refusedCount += readRefusedOrSame(bad, original);
  }
  CHECK(refusedCount > 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("spmdc dump refuses a mesh of 2^40 ranks and a flipped byte at once, in one line",
          "[program][integrity][tool]") {
  TempDir dir;
  std::string good = dir.file("good.spmd");
  compileTo("mlp", "dp", {2}, good);
  const std::string bytes = testing::readBytes(good);
  uint64_t jsonLength = 0;
  std::memcpy(&jsonLength, bytes.data() + 16, 8);
  auto j = nlohmann::ordered_json::parse(bytes.substr(kHeaderSize, jsonLength));
  j["mesh"]["shape"] = {int64_t{1} << 40};
  std::string huge = dir.file("huge.spmd");
  testing::writeBytes(huge, testing::assembleFile(j.dump(), bytes.substr(dataSectionOffset(jsonLength)),
                                                  kFormatVersion, kFormatMinor));
  auto start = std::chrono::steady_clock::now();
  auto r = spmd::testing::runCommand(std::string(SPMDC_PATH) + " dump " + huge);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(r.exitCode != 0);
  CHECK(r.stdoutText.empty());
  CHECK(r.stderrText ==
        "error: " + huge +
            ": corrupt program JSON: mesh: shape [1099511627776] has more than 65536 ranks (the "
            "most a program may have)\n");

  std::string flipped = dir.file("flipped.spmd");
  std::string damaged = bytes;
  damaged[kHeaderSize + jsonLength / 2] ^= 0x04;
  testing::writeBytes(flipped, damaged);
  r = spmd::testing::runCommand(std::string(SPMDC_PATH) + " dump " + flipped);
  CHECK(r.exitCode != 0);
  CHECK(r.stderrText ==
        "error: " + flipped +
            ": the program JSON does not match its checksum: the file is damaged: recompile or "
            "copy it again\n");
}

}  // namespace
}  // namespace spmd::program
