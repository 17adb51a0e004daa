// The .spmd container: shard planning and slicing, write/read round trips,
// per-rank bytes, determinism, atomicity, and one test per bad file.
//
//   mesh 2x2, w f32[8, 6] [S(0), S(1)] -> 4 blobs of [4, 3]; rank 3 reads
//   rows 4..8, columns 3..6 of the global tensor.
#include "../TestCatch.h"

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ProgramTestUtil.h"
#include "passes/Pipeline.h"
#include "program/Dump.h"
#include "program/Format.h"
#include "program/Reader.h"
#include "program/Writer.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"
#include "serialize/ToText.h"

namespace spmd::program {
namespace {

using testing::ProgramBuilder;
using testing::TempDir;

// The element at `index` of a global iota tensor of `shape` is its row-major position.
int64_t flatIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

// Checks that `bytes` hold exactly the block `chunks` of an iota tensor.
template <typename T>
void checkBlock(std::span<const std::byte> bytes, const std::vector<int64_t>& shape,
                const std::vector<sharding::Chunk>& chunks) {
  int64_t numel = 1;
  for (const auto& c : chunks) numel *= c.size;
  REQUIRE(bytes.size() == static_cast<size_t>(numel) * sizeof(T));
  std::vector<int64_t> local(shape.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    std::vector<int64_t> global(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) global[d] = chunks[d].offset + local[d];
    T v;
    std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    REQUIRE(static_cast<int64_t>(v) == flatIndex(shape, global));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++local[d] < chunks[d].size) break;
      local[d] = 0;
    }
  }
}

// Four weights over a 2x2 mesh: 2-D sharded, replicated, uneven, nested.
Program meshProgram(MemoryWeightSource& source) {
  ProgramBuilder b("meshy", {2, 2}, {"dp", "tp"});
  ir::Value* x = b.input(ir::InputKind::UserInput, "x", {4, 6}, {8, 6}, {"S(0)", "R"});
  b.output(x, {"S(0)", "R"}, {8, 6});
  b.weight("w", {8, 6}, {"S(0)", "S(1)"});
  b.weight("b", {6}, {"R", "R"});
  b.weight("u", {5, 2}, {"R", "S(0)"}, ir::ScalarType::Long);
  b.weight("n", {8}, {"S(0)", "S(0)"});
  b.weight("scalar", {}, {"R", "R"});
  source.add("w", testing::iotaBytes<float>(48));
  source.add("b", testing::iotaBytes<float>(6));
  source.add("u", testing::iotaBytes<int64_t>(10));
  source.add("n", testing::iotaBytes<float>(8));
  source.add("scalar", testing::iotaBytes<float>(1));
  return b.take();
}

std::string firstError(const std::string& path) {
  auto r = readProgram(path);
  REQUIRE_FALSE(r.hasValue());
  return r.status().message();
}

TEST_CASE("planShards gives one plan per distinct shard", "[program][writer]") {
  sharding::Mesh mesh = *sharding::Mesh::create({2, 2}, {"dp", "tp"});
  auto replicated = planShards({8, 6}, testing::spec({"R", "R"}), mesh);
  REQUIRE(replicated->size() == 1);
  CHECK(replicated->at(0).index == std::vector<int64_t>{-1, -1});
  CHECK(replicated->at(0).chunks == std::vector<sharding::Chunk>{{0, 8}, {0, 6}});
  auto tp = planShards({8, 6}, testing::spec({"R", "S(-1)"}), mesh);
  REQUIRE(tp->size() == 2);
  CHECK(tp->at(1).index == std::vector<int64_t>{-1, 1});
  CHECK(tp->at(1).chunks == std::vector<sharding::Chunk>{{0, 8}, {3, 3}});
  auto nested = planShards({8}, testing::spec({"S(0)", "S(0)"}), mesh);
  REQUIRE(nested->size() == 4);
  CHECK(nested->at(2).index == std::vector<int64_t>{1, 0});
  CHECK(nested->at(2).chunks == std::vector<sharding::Chunk>{{4, 2}});
  auto partial = planShards({8}, testing::spec({"P(sum)", "R"}), mesh);
  REQUIRE_FALSE(partial.hasValue());
  CHECK(partial.status().message() ==
        "spec [P(sum), R] has a Partial placement on mesh axis 'dp' (a stored weight must be whole)");
}

TEST_CASE("sliceRowMajor copies an N-D block", "[program][writer]") {
  std::vector<int64_t> shape = {3, 4, 5};
  auto global = testing::iotaBytes<int32_t>(60);
  for (auto chunks : {std::vector<sharding::Chunk>{{1, 2}, {1, 2}, {2, 3}},
                      std::vector<sharding::Chunk>{{0, 3}, {2, 2}, {0, 5}},
                      std::vector<sharding::Chunk>{{2, 1}, {0, 4}, {0, 5}},
                      std::vector<sharding::Chunk>{{0, 3}, {0, 4}, {0, 5}},
                      std::vector<sharding::Chunk>{{0, 3}, {0, 4}, {4, 1}}}) {
    int64_t numel = chunks[0].size * chunks[1].size * chunks[2].size;
    std::vector<std::byte> out(static_cast<size_t>(numel) * 4);
    sliceRowMajor(global, shape, 4, chunks, out.data());
    checkBlock<int32_t>(out, shape, chunks);
  }
}

TEST_CASE("each rank reads exactly its shard of each weight", "[program][writer][reader]") {
  TempDir dir;
  MemoryWeightSource source;
  Program p = meshProgram(source);
  std::string path = dir.file("meshy.spmd");
  Status s = writeProgram(path, p, source);
  INFO(s.message());
  REQUIRE(s.isOk());
  CHECK(p.weights[0].localShape == std::vector<int64_t>{4, 3});
  CHECK(p.weights[2].localShape == std::vector<int64_t>{3, 2});
  CHECK(p.weights[0].shards.size() == 4);
  CHECK(p.weights[1].shards.size() == 1);
  CHECK(p.weights[2].shards.size() == 2);
  CHECK(p.weights[2].shards[1].bytes == 2 * 2 * 8);

  auto loaded = readProgram(path);
  INFO(loaded.status().message());
  REQUIRE(loaded.hasValue());
  const Program& q = loaded->program();
  CHECK(dumpProgram(q) == dumpProgram(p));
  CHECK(q.mesh == p.mesh);
  std::string bytes = testing::readBytes(path);
  uint64_t jsonLength = 0;
  std::memcpy(&jsonLength, bytes.data() + 16, 8);
  uint64_t dataStart = dataSectionOffset(jsonLength);
  for (const WeightEntry& w : q.weights) {
    INFO(w.fqn);
    for (const ShardBlob& b : w.shards) CHECK((dataStart + b.offset) % kAlignment == 0);
    const std::byte* shared = nullptr;
    for (int64_t rank = 0; rank < 4; ++rank) {
      auto span = loaded->shardFor(w, rank);
      REQUIRE(span.hasValue());
      auto chunks = sharding::localChunks(w.globalShape, w.spec, q.mesh, q.mesh.coords(rank));
      if (w.dtype == ir::ScalarType::Long)
        checkBlock<int64_t>(*span, w.globalShape, chunks);
      else
        checkBlock<float>(*span, w.globalShape, chunks);
      if (w.fqn == "b") {  // replicated: one blob for all ranks
        if (shared) CHECK(span->data() == shared);
        shared = span->data();
      }
    }
  }
  auto outside = loaded->shardFor(q.weights[0], 4);
  REQUIRE_FALSE(outside.hasValue());
  CHECK(outside.status().message() == path + ": rank 4 is outside mesh 2x2 (dp, tp)");
  CHECK(loaded->weight("u") == &q.weights[2]);
  CHECK(loaded->weight("nope") == nullptr);
}

TEST_CASE("writing is deterministic and atomic", "[program][writer]") {
  TempDir dir;
  MemoryWeightSource source;
  Program a = meshProgram(source);
  Program b = meshProgram(source);
  REQUIRE(writeProgram(dir.file("a.spmd"), a, source).isOk());
  REQUIRE(writeProgram(dir.file("b.spmd"), b, source).isOk());
  std::string first = testing::readBytes(dir.file("a.spmd"));
  CHECK(first == testing::readBytes(dir.file("b.spmd")));
  CHECK(first.substr(0, 8) == "SPMDPROG");
  // Rewriting the same program over an existing file gives the same bytes.
  REQUIRE(writeProgram(dir.file("a.spmd"), a, source).isOk());
  CHECK(testing::readBytes(dir.file("a.spmd")) == first);
  CHECK(dir.list() == std::vector<std::string>{"a.spmd", "b.spmd"});

  // A failing write leaves nothing behind, not even its temporary.
  MemoryWeightSource partial;
  partial.add("w", testing::iotaBytes<float>(48));
  Program c = meshProgram(source);
  Status s = writeProgram(dir.file("c.spmd"), c, partial);
  CHECK(s.message() == dir.file("c.spmd") + ": weight 'b' has no bytes in the weight source");
  CHECK(dir.list() == std::vector<std::string>{"a.spmd", "b.spmd"});
  // ... and a failing rewrite keeps the old file.
  Status again = writeProgram(dir.file("a.spmd"), c, partial);
  CHECK_FALSE(again.isOk());
  CHECK(testing::readBytes(dir.file("a.spmd")) == first);
  Status noDir = writeProgram(dir.file("missing/x.spmd"), a, source);
  CHECK(noDir.message().rfind(dir.file("missing/x.spmd") + ": cannot create a temporary file beside it: ",
                              0) == 0);
}

TEST_CASE("the writer refuses inconsistent weights", "[program][writer]") {
  TempDir dir;
  MemoryWeightSource source;
  std::string path = dir.file("bad.spmd");
  Program p = meshProgram(source);
  p.weights[0].localShape = {8, 3};
  CHECK(writeProgram(path, p, source).message() ==
        path + ": weight 'w': local shape [8, 3] is not rank 0's shard [4, 3] of [8, 6] under [S(0), S(1)]");
  Program q = meshProgram(source);
  source.add("b", testing::iotaBytes<float>(5));
  CHECK(writeProgram(path, q, source).message() ==
        path + ": weight 'b': the source holds 20 bytes but f32[6] needs 24");
  Program r = meshProgram(source);
  r.weights[1].spec = testing::spec({"R"});
  CHECK_FALSE(writeProgram(path, r, source).isOk());
  Program twice = meshProgram(source);
  twice.weights.push_back(twice.weights[0]);
  CHECK(writeProgram(path, twice, source).message() == path + ": weight 'w' appears twice");
  Program partial = meshProgram(source);
  partial.weights[0].spec = testing::spec({"R", "P(sum)"});
  CHECK(writeProgram(path, partial, source).message() ==
        path +
            ": weight 'w': spec [R, P(sum)] has a Partial placement on mesh axis 'tp' (a stored weight must "
            "be whole)");
  ProgramBuilder huge("huge", {1 << 17}, {"x"});
  huge.weight("b", {6}, {"R"});
  Program h = huge.take();
  CHECK(writeProgram(path, h, source).message() ==
        path + ": mesh [131072]: every axis needs size >= 1 and the mesh at most 65536 ranks");
  CHECK(dir.list().empty());
}

// A good file's bytes, and a path for broken variants of it.
struct BadFile {
  TempDir dir;
  std::string bytes;
  uint64_t jsonLength = 0;
  std::string bad = dir.file("bad.spmd");

  BadFile() {
    MemoryWeightSource source;
    Program p = meshProgram(source);
    REQUIRE(writeProgram(dir.file("good.spmd"), p, source).isOk());
    bytes = testing::readBytes(dir.file("good.spmd"));
    std::memcpy(&jsonLength, bytes.data() + 16, 8);
  }
  std::string json() const { return bytes.substr(kHeaderSize, jsonLength); }
  std::string data() const { return bytes.substr(dataSectionOffset(jsonLength)); }
  // Writes the file with JSON `text` (its checksum recomputed), keeping the data section.
  void writeJson(const std::string& text, uint32_t major = kFormatVersion, uint32_t minor = kFormatMinor) {
    testing::writeBytes(bad, testing::assembleFile(text, data(), major, minor));
  }
  // Writes the file with its JSON part edited by `edit`.
  template <typename Edit>
  void rewriteJson(Edit edit) {
    auto j = nlohmann::ordered_json::parse(json());
    edit(j);
    writeJson(j.dump());
  }
  // The file offset of the data section.
  size_t dataStart() const { return static_cast<size_t>(dataSectionOffset(jsonLength)); }
};

TEST_CASE_METHOD(BadFile, "the reader refuses bad headers, one message each", "[program][reader]") {
  SECTION("not an spmd program") {
    testing::writeBytes(bad, "PK\x03\x04 this is a zip file, not a program");
    CHECK(firstError(bad) ==
          bad + ": not an spmd program (bad magic; expected a file written by spmdc compile)");
  }
  SECTION("missing file") {
    CHECK(firstError(dir.file("none.spmd")).find("cannot open") != std::string::npos);
  }
  SECTION("unknown header: magic that is not quite ours") {
    bytes[7] = 'X';
    testing::writeBytes(bad, bytes);
    CHECK(firstError(bad) ==
          bad + ": not an spmd program (bad magic; expected a file written by spmdc compile)");
  }
  SECTION("truncated header") {
    testing::writeBytes(bad, bytes.substr(0, 20));
    CHECK(firstError(bad) == bad + ": truncated file: 20 bytes, shorter than the 32-byte header");
  }
  SECTION("truncated JSON") {
    testing::writeBytes(bad, bytes.substr(0, 100));
    CHECK(firstError(bad) == bad + ": truncated file: the header announces " + std::to_string(jsonLength) +
                                 " bytes of JSON but only 68 follow");
  }
  SECTION("unknown major version") {
    bytes[8] = 3;
    testing::writeBytes(bad, bytes);
    CHECK(firstError(bad) == bad +
                                 ": format version 3.0 is not supported (this build reads 2.x); "
                                 "recompile the program with this spmdc");
  }
  SECTION("format version 0.0") {
    std::memset(bytes.data() + 8, 0, 8);
    testing::writeBytes(bad, bytes);
    CHECK(firstError(bad) == bad +
                                 ": format version 0.0 is not supported (this build reads 2.x); "
                                 "recompile the program with this spmdc");
  }
  SECTION("a format 1.0 file (no checksums) is refused by version") {
    bytes[8] = 1;
    testing::writeBytes(bad, bytes.substr(0, 24));
    CHECK(firstError(bad) == bad +
                                 ": format version 1.0 is not supported (this build reads 2.x); "
                                 "recompile the program with this spmdc");
  }
  SECTION("JSON format_version 0.0 under a good header") {
    rewriteJson([](nlohmann::ordered_json& j) { j["format_version"] = {{"major", 0}, {"minor", 0}}; });
    CHECK(firstError(bad) == bad +
                                 ": the program JSON says format 0.0 but the header says 2.0; recompile "
                                 "the program with this spmdc");
  }
  SECTION("newer minor version is accepted") {
    auto j = nlohmann::ordered_json::parse(json());
    j["format_version"]["minor"] = 7;
    writeJson(j.dump(), kFormatVersion, 7);
    auto r = readProgram(bad);
    INFO(r.status().message());
    REQUIRE(r.hasValue());
    CHECK(r->program().formatMinor == 7);
    CHECK(r->program().formatVersion == kFormatVersion);
  }
}

TEST_CASE_METHOD(BadFile, "the reader refuses bad JSON and blobs, one message each", "[program][reader]") {
  SECTION("corrupt JSON") {
    std::string text = json();
    text[0] = '#';
    writeJson(text);
    CHECK(firstError(bad).rfind(bad + ": corrupt program JSON: program JSON does not parse: ", 0) == 0);
  }
  SECTION("JSON missing a field") {
    std::string text = json();
    text.replace(text.find("\"fqn\""), 5, "\"fqm\"");
    writeJson(text);
    CHECK(firstError(bad) ==
          bad + ": corrupt program JSON: weights[0]: field 'fqn' is missing or not a string");
  }
  SECTION("blob beyond the end of the file") {
    testing::writeBytes(bad, bytes.substr(0, bytes.size() - 4));
    CHECK(firstError(bad).find(": weight 'scalar' blob [-1, -1]: bytes [") != std::string::npos);
    CHECK(firstError(bad).find(") lie outside the data section (") != std::string::npos);
  }
  SECTION("blob whose size does not match its shard") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][0]["shards"][1]["bytes"] = 4; });
    CHECK(firstError(bad) == bad + ": weight 'w' blob [0, 1]: 4 bytes, the shard needs 48");
  }
  SECTION("negative global shape") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][1]["global_shape"][0] = -6; });
    CHECK(firstError(bad) == bad + ": weight 'b': global shape [-6] is negative or too large");
  }
  SECTION("spec that does not fit the mesh") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][1]["spec"] = {"R"}; });
    CHECK(firstError(bad) ==
          bad +
              ": corrupt program JSON: weights[1]: spec [R] does not have one placement per "
              "mesh axis (2)");
  }
  SECTION("blob offset edited out of range") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][1]["shards"][0]["offset"] = 1 << 20; });
    CHECK(firstError(bad) ==
          bad + ": weight 'b' blob [-1, -1]: bytes [1048576, 1048600) lie outside the data section (" +
              std::to_string(bytes.size() - dataSectionOffset(jsonLength)) + " bytes)");
  }
}

TEST_CASE_METHOD(BadFile, "damaged bytes are refused, naming the weight", "[program][reader][integrity]") {
  const std::string damaged = "the file is damaged: recompile or copy it again";
  SECTION("a flipped byte in a weight blob") {
    bytes[dataStart() + 64 + 5] ^= 0x01;  // w's blob [0, 1], rank 1's
    testing::writeBytes(bad, bytes);
    auto r = readProgram(bad);
    REQUIRE(r.hasValue());
    const WeightEntry* w = r->weight("w");
    CHECK(r->shardFor(*w, 0).hasValue());
    std::string expected = bad + ": weight 'w' blob [0, 1] does not match its checksum: " + damaged;
    CHECK(r->shardFor(*w, 1).status().message() == expected);
    CHECK(r->verifyWeights().message() == expected);
  }
  SECTION("a flipped byte in the JSON") {
    bytes[kHeaderSize + 10] ^= 0x01;
    testing::writeBytes(bad, bytes);
    CHECK(firstError(bad) == bad + ": the program JSON does not match its checksum: " + damaged);
  }
  SECTION("a flipped byte in the JSON checksum") {
    bytes[24] ^= 0x80;
    testing::writeBytes(bad, bytes);
    CHECK(firstError(bad) == bad + ": the program JSON does not match its checksum: " + damaged);
  }
  SECTION("a good file passes every check") {
    testing::writeBytes(bad, bytes);
    auto r = readProgram(bad);
    REQUIRE(r.hasValue());
    CHECK(r->verifyWeights().isOk());
  }
}

TEST_CASE_METHOD(BadFile, "the verifier refuses inconsistent tables and shapes",
                 "[program][reader][verifier]") {
  SECTION("overlapping weight offsets") {
    rewriteJson([](nlohmann::ordered_json& j) {
      j["weights"][1]["shards"][0]["offset"] = j["weights"][0]["shards"][1]["offset"];
    });
    CHECK(firstError(bad) ==
          bad +
              ": weight 'w' blob [0, 1]: bytes [64, 112) overlap weight 'b' blob [-1, -1]: "
              "bytes [64, 88)");
  }
  SECTION("a weight's blobs overlapping each other") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][0]["shards"][1]["offset"] = 0; });
    CHECK(firstError(bad) ==
          bad + ": weight 'w' blob [0, 0]: bytes [0, 48) overlap weight 'w' blob [0, 1]: bytes [0, 48)");
  }
  SECTION("a mesh of 2^40 ranks, refused at once") {
    auto start = std::chrono::steady_clock::now();
    rewriteJson([](nlohmann::ordered_json& j) { j["mesh"]["shape"] = {int64_t{1} << 40, 2}; });
    CHECK(firstError(bad) == bad +
                                 ": corrupt program JSON: mesh: shape [1099511627776, 2] has more than 65536 "
                                 "ranks (the most a program may have)");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  }
  SECTION("mesh axes whose product overflows") {
    rewriteJson([](nlohmann::ordered_json& j) { j["mesh"]["shape"] = {int64_t{1} << 62, int64_t{1} << 62}; });
    CHECK(firstError(bad).find("has more than 65536 ranks") != std::string::npos);
  }
  SECTION("a mesh axis of size 0") {
    rewriteJson([](nlohmann::ordered_json& j) { j["mesh"]["shape"] = {0, 2}; });
    CHECK(firstError(bad) ==
          bad +
              ": corrupt program JSON: mesh: mesh axis 0 has size 0: every mesh axis needs "
              "size >= 1");
  }
  SECTION("a negative local shape") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][0]["local_shape"] = {-4, 3}; });
    CHECK(firstError(bad) ==
          bad +
              ": weight 'w': local shape [-4, 3] is not rank 0's shard [4, 3] of [8, 6] under [S(0), S(1)]");
  }
  SECTION("a global shape whose bytes overflow") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][1]["global_shape"] = {int64_t{1} << 62}; });
    CHECK(firstError(bad) ==
          bad + ": weight 'b': global shape [4611686018427387904] is negative or too large");
  }
  SECTION("a negative size in the graph") {
    rewriteJson([](nlohmann::ordered_json& j) {
      j["exported_program"]["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0]["as_int"] = -4;
    });
    CHECK(firstError(bad) == bad + ": value %x: size -4 in f32[-4, 6] is negative");
  }
  SECTION("graph sizes whose bytes overflow") {
    rewriteJson([](nlohmann::ordered_json& j) {
      auto& sizes = j["exported_program"]["graph_module"]["graph"]["tensor_values"]["x"]["sizes"];
      sizes[0]["as_int"] = sizes[1]["as_int"] = int64_t{1} << 40;
    });
    CHECK(firstError(bad) ==
          bad + ": value %x: f32[1099511627776, 1099511627776] has more bytes than fit in 64 bits");
  }
  SECTION("a checksum that is not 16 hex digits") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][0]["shards"][0]["xxh3"] = "12345"; });
    CHECK(firstError(bad) == bad +
                                 ": corrupt program JSON: weights[0].shards[0]: field 'xxh3' is missing or "
                                 "not 16 lowercase hex digits");
  }
  SECTION("a weight listed twice") {
    rewriteJson([](nlohmann::ordered_json& j) { j["weights"][1]["fqn"] = "w"; });
    CHECK(firstError(bad) == bad + ": weight 'w' appears twice");
  }
}

TEST_CASE("a weight must have the shape of the graph input reading it", "[program][writer][verifier]") {
  TempDir dir;
  std::string path = dir.file("p.spmd");
  ProgramBuilder b("param", {2}, {"x"});
  ir::Value* w = b.input(ir::InputKind::Parameter, "p_w", {4, 5}, {8, 6}, {"S(0)"}, "w");
  b.output(w, {"S(0)"}, {8, 6});
  b.weight("w", {8, 6}, {"S(0)"});
  MemoryWeightSource source;
  source.add("w", testing::iotaBytes<float>(48));
  Program p = b.take();
  CHECK(writeProgram(path, p, source).message() ==
        path + ": weight 'w': f32[4, 6] per rank, but graph input %p_w reading it is f32[4, 5]");
  CHECK(dir.list().empty());
}

TEST_CASE("an archive's weights are written sharded and read back", "[program][writer][reader]") {
  auto archive = pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/mlp/model.pt2");
  REQUIRE(archive.hasValue());
  // fsdp on 2 ranks: fc1.weight's rows split in two, the graph reads the local half.
  auto schema = schema::loadSchemaOrPreset("fsdp");
  REQUIRE(schema.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  auto compiled = passes::compile(*archive, *schema, opts);
  INFO((compiled ? std::string() : compiled.status().message()));
  REQUIRE(compiled.hasValue());
  Program& p = compiled->program;
  TempDir dir;
  ArchiveWeightSource source(*archive);
  REQUIRE(writeProgram(dir.file("mlp.spmd"), p, source).isOk());
  auto loaded = readProgram(dir.file("mlp.spmd"));
  REQUIRE(loaded.hasValue());
  CHECK(serialize::printProgram(loaded->program().graph) ==
        testing::withoutTies(serialize::printProgram(p.graph)));
  CHECK(dumpProgram(loaded->program()) == dumpProgram(p));
  const WeightEntry* w = loaded->weight("fc1.weight");
  REQUIRE(w);
  CHECK(w->localShape == std::vector<int64_t>{128, 64});
  auto global = *source.globalBytes("fc1.weight");
  auto rank1 = *loaded->shardFor(*w, 1);
  REQUIRE(rank1.size() == global.size() / 2);
  CHECK(std::memcmp(rank1.data(), global.data() + global.size() / 2, rank1.size()) == 0);
}

TEST_CASE("every test model survives a write and a read", "[program][writer][reader]") {
  TempDir dir;
  for (const auto& path : testing::modelPaths()) {
    INFO(path);
    auto archive = pt2::readArchive(path);
    REQUIRE(archive.hasValue());
    Program p;
    p.mesh = *sharding::Mesh::create({2}, {"dp"});
    p.graph = std::move(archive->program);
    for (const auto& in : p.graph.signature.inputs)
      p.inputs.push_back({testing::spec({"R"}), in.value ? in.value->type() : ir::TensorType{}});
    for (const auto& out : p.graph.signature.outputs) {
      const ir::Value* v = out.arg.value();
      p.outputs.push_back({testing::spec({"R"}), v && v->isTensor() ? v->type() : ir::TensorType{}});
    }
    for (const auto& [fqn, payload] : archive->weights) {
      WeightEntry w;
      w.fqn = fqn;
      w.dtype = payload.dtype;
      w.globalShape = payload.sizes;
      p.weights.push_back(std::move(w));
    }
    ArchiveWeightSource source(*archive);
    std::string out = dir.file("model.spmd");
    Status s = writeProgram(out, p, source);
    INFO(s.message());
    REQUIRE(s.isOk());
    auto loaded = readProgram(out);
    INFO(loaded.status().message());
    REQUIRE(loaded.hasValue());
    CHECK(serialize::printProgram(loaded->program().graph) ==
          testing::withoutTies(serialize::printProgram(p.graph)));
    CHECK(dumpProgram(loaded->program()) == dumpProgram(p));
  }
}

}  // namespace
}  // namespace spmd::program
