// Weights by reference: a program whose weights stay in a safetensors
// checkpoint. Each rank reads exactly its region; the integrity record
// catches a truncated, renamed, re-saved or rewritten file; one line each.
//
//   ckpt/model.safetensors: "w" f32[8, 6] (iota), "u" i64[5, 2], "big" f32[64, 1024]
//   program on mesh 2x2: w [S(0), S(1)] by reference, u [R, S(0)] by
//   reference, m zeros -> rank 3 reads rows 4..8, columns 3..6 of "w".
#include "../TestCatch.h"

#include <filesystem>
#include <fstream>

#include "ProgramTestUtil.h"
#include "io/Safetensors.h"
#include "program/Dump.h"
#include "program/ExternalWeights.h"
#include "program/Reader.h"
#include "program/Writer.h"

namespace spmd::program {
namespace {

using testing::ProgramBuilder;
using testing::TempDir;

struct Checkpoint {
  std::vector<std::byte> w = testing::iotaBytes<float>(48);
  std::vector<std::byte> u = testing::iotaBytes<int64_t>(10);
  std::vector<std::byte> big = testing::iotaBytes<float>(64 * 1024);

  Status write(const std::string& path) const {
    return io::writeSafetensors(path, {{"big", ir::ScalarType::Float, {64, 1024}, big.data(), big.size()},
                                       {"model.u", ir::ScalarType::Long, {5, 2}, u.data(), u.size()},
                                       {"model.w", ir::ScalarType::Float, {8, 6}, w.data(), w.size()}});
  }
};

// A program over `root` whose weights are all by reference.
Program byReference(const std::string& root) {
  ProgramBuilder b("refs", {2, 2}, {"dp", "tp"});
  ir::Value* x = b.input(ir::InputKind::UserInput, "x", {4, 6}, {8, 6}, {"S(0)", "R"});
  b.output(x, {"S(0)", "R"}, {8, 6});
  b.weight("w", {8, 6}, {"S(0)", "S(1)"});
  b.weight("u", {5, 2}, {"R", "S(0)"}, ir::ScalarType::Long);
  b.weight("big", {64, 1024}, {"S(1)", "R"});
  b.weight("optim.w.exp_avg", {8, 6}, {"S(0)", "S(1)"});
  Program p = b.take();
  p.weightsRoot = root;
  p.weights[0].source = WeightSourceRef{.file = "model.safetensors", .tensor = "model.w"};
  p.weights[1].source = WeightSourceRef{.file = "model.safetensors", .tensor = "model.u"};
  p.weights[2].source = WeightSourceRef{.file = "model.safetensors", .tensor = "big"};
  p.weights[3].source = WeightSourceRef{.zeros = true};
  return p;
}

// Compiles the by-reference program under `dir` and returns its path.
std::string compileIn(TempDir& dir) {
  REQUIRE(Checkpoint().write(dir.file("model.safetensors")).isOk());
  Program p = byReference(dir.path().string());
  Status st = recordSources(p);
  INFO(st.message());
  REQUIRE(st.isOk());
  std::string path = dir.file("refs.spmd");
  st = writeProgram(path, p, MemoryWeightSource());
  INFO(st.message());
  REQUIRE(st.isOk());
  return path;
}

std::vector<std::byte> shardOf(const LoadedProgram& lp, const std::string& fqn, int64_t rank, size_t bytes) {
  std::vector<std::byte> out(bytes);
  Status st = lp.readShard(*lp.weight(fqn), rank, out);
  INFO(st.message());
  REQUIRE(st.isOk());
  return out;
}

std::string verifyError(const std::string& path, const std::string& root = "") {
  auto lp = readProgram(path);
  REQUIRE(lp.hasValue());
  if (!root.empty()) lp->setWeightsRoot(root);
  Status st = lp->verifyWeights();
  REQUIRE_FALSE(st.isOk());
  return st.message();
}

TEST_CASE("a program by reference holds no weight bytes and each rank reads its region",
          "[program][weights-ref]") {
  TempDir dir;
  std::string path = compileIn(dir);
  CHECK(std::filesystem::file_size(path) < 16 * 1024);
  auto lp = readProgram(path);
  INFO(lp.status().message());
  REQUIRE(lp.hasValue());
  CHECK(lp->program().formatMinor == kFormatMinorByReference);
  CHECK(lp->verifyWeights().isOk());
  sharding::Mesh mesh = lp->program().mesh;
  Checkpoint ck;
  for (int64_t rank = 0; rank < 4; ++rank) {
    auto coords = mesh.coords(rank);
    const WeightEntry& w = *lp->weight("w");
    auto chunks = sharding::localChunks(w.globalShape, w.spec, mesh, coords);
    std::vector<std::byte> expected(4 * 3 * 4);
    sliceRowMajor(ck.w, {8, 6}, 4, chunks, expected.data());
    CHECK(shardOf(*lp, "w", rank, expected.size()) == expected);
    const WeightEntry& u = *lp->weight("u");  // uneven: rows 0..3 and 3..5
    auto uChunks = sharding::localChunks(u.globalShape, u.spec, mesh, coords);
    std::vector<std::byte> uExpected(static_cast<size_t>(uChunks[0].size) * 2 * 8);
    sliceRowMajor(ck.u, {5, 2}, 8, uChunks, uExpected.data());
    CHECK(shardOf(*lp, "u", rank, uExpected.size()) == uExpected);
    CHECK(shardOf(*lp, "optim.w.exp_avg", rank, 48) == std::vector<std::byte>(48));
  }
  std::string text = dumpProgram(lp->program());
  CHECK(text.find(
            "weight w  [S(0), S(1)] f32[8, 6] -> [4, 3]  from model.safetensors:model.w  bytes/rank 48") !=
        std::string::npos);
  CHECK(text.find("weight optim.w.exp_avg  [S(0), S(1)] f32[8, 6] -> [4, 3]  zeros") != std::string::npos);
}

TEST_CASE("a changed checkpoint is refused in one line naming file, tensor and weight",
          "[program][weights-ref]") {
  TempDir dir;
  std::string path = compileIn(dir);
  std::string file = dir.file("model.safetensors");
  const std::string redo = ": the checkpoint changed since compile; recompile the program against it";

  SECTION("rewritten bytes the samples cover") {
    Checkpoint ck;
    ck.big[100] = std::byte{0x7f};
    REQUIRE(ck.write(file).isOk());
    CHECK(verifyError(path) ==
          path + ": " + file + ": the bytes of tensor 'big' (weight 'big') differ from compile time" + redo);
  }
  SECTION("truncated") {
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 4096);
    CHECK(verifyError(path).find(file + " has ") != std::string::npos);
    CHECK(verifyError(path).find("at compile time (it holds tensor 'model.w' (weight 'w'))" + redo) !=
          std::string::npos);
  }
  SECTION("re-saved with another layout: the header differs") {
    Checkpoint ck;
    REQUIRE(
        io::writeSafetensors(file, {{"big", ir::ScalarType::Float, {1024, 64}, ck.big.data(), ck.big.size()},
                                    {"model.u", ir::ScalarType::Long, {5, 2}, ck.u.data(), ck.u.size()},
                                    {"model.w", ir::ScalarType::Float, {8, 6}, ck.w.data(), ck.w.size()}})
            .isOk());
    CHECK(verifyError(path) ==
          path + ": " + file +
              ": its header (names, dtypes, shapes, offsets) differs from compile time (it "
              "holds tensor 'model.w' (weight 'w'))" +
              redo);
  }
  SECTION("renamed, and found again with --weights-root") {
    TempDir moved;
    std::filesystem::rename(file, moved.file("model.safetensors"));
    std::string message = verifyError(path);
    CHECK(message.rfind(path + ": " + file + ": cannot open", 0) == 0);
    CHECK(message.find("(it holds tensor 'model.w' (weight 'w')); pass spmd-run --weights-root DIR") !=
          std::string::npos);
    auto lp = readProgram(path);
    lp->setWeightsRoot(moved.path().string());
    CHECK(lp->verifyWeights().isOk());
  }
}

TEST_CASE("recordSources refuses a missing tensor, a wrong shape, a dtype that does not convert",
          "[program][weights-ref]") {
  TempDir dir;
  REQUIRE(Checkpoint().write(dir.file("model.safetensors")).isOk());
  std::string file = dir.file("model.safetensors");
  Program p = byReference(dir.path().string());
  SECTION("missing tensor") {
    p.weights[0].source->tensor = "model.nope";
    CHECK(recordSources(p).message() == file +
                                            " has no tensor 'model.nope' (it should hold weight 'w'); export "
                                            "again from the checkpoint you compile against");
  }
  SECTION("shape") {
    p.weights[0].source->tensor = "model.u";
    CHECK(
        recordSources(p).message() ==
        file +
            ": tensor 'model.u' is i64[5, 2] but weight 'w' is f32[8, 6]; export again from this checkpoint");
  }
  SECTION("a float weight may come from a bf16 file; an integer one may not come from a float one") {
    p.weights[1].source->tensor = "model.w";
    p.weights[1].globalShape = {8, 6};
    CHECK(
        recordSources(p).message() ==
        file +
            ": tensor 'model.w' is f32[8, 6] but weight 'u' is i64[8, 6]; export again from this checkpoint");
  }
}

TEST_CASE("sampleChecksum covers small tensors whole and big ones by 16 blocks", "[program][weights-ref]") {
  std::vector<std::byte> small = testing::iotaBytes<float>(100);
  CHECK(sampleChecksum(small) == checksum(small));
  std::vector<std::byte> big = testing::iotaBytes<float>(1 << 16);
  uint64_t before = sampleChecksum(big);
  big.back() = std::byte{1};  // the last block is sampled
  CHECK(sampleChecksum(big) != before);
}

}  // namespace
}  // namespace spmd::program
