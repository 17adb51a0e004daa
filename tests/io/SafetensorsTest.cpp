// Tests of io::SafetensorsFile and io::writeSafetensors: round trips, the
// repository's real input files, every refused input, atomic writes.
//
//   writeSafetensors(p, {{"a", ScalarType::Float, {}, &one, 4}})
//   // p == "\x38\0\0\0\0\0\0\0" R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})" "  " + 4 bytes
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>
#include "../TestCatch.h"

#include "../TestUtil.h"
#include "io/Safetensors.h"

namespace spmd::io {
namespace {

using ir::ScalarType;
using spmd::testing::readBytes;
using spmd::testing::TempDir;
using spmd::testing::writeBytes;

/// A safetensors file from a raw header text and data section.
std::string rawFile(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

/// Writes `bytes` into dir/name and opens it; returns the error message ("" when it opened).
std::string openError(const TempDir& dir, const std::string& bytes) {
  writeBytes(dir.file("t.safetensors"), bytes);
  auto f = SafetensorsFile::open(dir.file("t.safetensors"));
  return f ? std::string() : f.status().message();
}

template <typename T>
TensorView view(const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                const std::vector<T>& values) {
  return {name, dtype, std::move(shape), values.data(), values.size() * sizeof(T)};
}

TEST_CASE("Safetensors round-trips several dtypes, 0-d and empty tensors", "[io][safetensors]") {
  TempDir dir;
  std::vector<float> w = {1.5f, -2, 3, 4, 5, 6.25f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x0000, 0x7f80};
  std::vector<uint8_t> mask = {1, 0, 1};
  std::vector<int64_t> ids = {0, -1, int64_t(1) << 40, 7};
  std::vector<double> scalar = {3.25};
  std::vector<float> empty;
  std::vector<TensorView> tensors = {
      view("w", ScalarType::Float, {2, 3}, w),        view("b16", ScalarType::BFloat16, {4}, bf16),
      view("mask", ScalarType::Bool, {3}, mask),      view("ids", ScalarType::Long, {2, 2}, ids),
      view("scalar", ScalarType::Double, {}, scalar), view("empty", ScalarType::Float, {0, 5}, empty)};
  const std::string path = dir.file("rt.safetensors");
  REQUIRE(writeSafetensors(path, tensors, {{"format", "pt"}, {"note", "x"}}).isOk());

  auto f = SafetensorsFile::open(path);
  REQUIRE(f);
  CHECK(f->names() == std::vector<std::string>{"b16", "empty", "ids", "mask", "scalar", "w"});
  CHECK(f->metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"note", "x"}});
  for (const TensorView& t : tensors) {
    const SafetensorsEntry* e = f->find(t.name);
    REQUIRE(e != nullptr);
    CHECK(e->name == t.name);
    CHECK(e->dtype == t.dtype);
    CHECK(e->shape == t.shape);
    REQUIRE(e->bytes == t.bytes);
    if (t.bytes > 0) CHECK(std::memcmp(e->data, t.data, t.bytes) == 0);
  }
  CHECK(f->find("nope") == nullptr);
  CHECK(f->find("") == nullptr);
}

TEST_CASE("Safetensors lays entries out in name order with a padded header", "[io][safetensors]") {
  TempDir dir;
  std::vector<int64_t> b = {1, 2};
  std::vector<float> a = {1.0f};
  const std::string path = dir.file("order.safetensors");
  REQUIRE(writeSafetensors(path, {view("b", ScalarType::Long, {2}, b), view("a", ScalarType::Float, {}, a)})
              .isOk());
  const std::string header = R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"I64","shape":[2],"data_offsets":[4,20]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string data(reinterpret_cast<const char*>(a.data()), 4);
  data.append(reinterpret_cast<const char*>(b.data()), 16);
  CHECK(readBytes(path) == rawFile(padded, data));
  CHECK(padded.size() % 8 == 0);
}

TEST_CASE("Safetensors puts metadata first and omits it when empty", "[io][safetensors]") {
  TempDir dir;
  std::vector<uint8_t> x = {9};
  REQUIRE(
      writeSafetensors(dir.file("m.safetensors"), {view("x", ScalarType::Byte, {1}, x)}, {{"format", "pt"}})
          .isOk());
  CHECK(readBytes(dir.file("m.safetensors")).substr(8, 32) == R"({"__metadata__":{"format":"pt"},)");
  REQUIRE(writeSafetensors(dir.file("n.safetensors"), {view("x", ScalarType::Byte, {1}, x)}).isOk());
  CHECK(readBytes(dir.file("n.safetensors")).find("__metadata__") == std::string::npos);
  auto f = SafetensorsFile::open(dir.file("n.safetensors"));
  REQUIRE(f);
  CHECK(f->metadata().empty());
}

TEST_CASE("Safetensors writes and reads a file with no tensors", "[io][safetensors]") {
  TempDir dir;
  REQUIRE(writeSafetensors(dir.file("none.safetensors"), {}).isOk());
  auto f = SafetensorsFile::open(dir.file("none.safetensors"));
  REQUIRE(f);
  CHECK(f->names().empty());
  CHECK(f->entries().empty());
}

TEST_CASE("Safetensors overwrites an existing file", "[io][safetensors]") {
  TempDir dir;
  writeBytes(dir.file("o.safetensors"), "old contents");
  std::vector<int32_t> v = {5, 6};
  REQUIRE(writeSafetensors(dir.file("o.safetensors"), {view("v", ScalarType::Int, {2}, v)}).isOk());
  auto f = SafetensorsFile::open(dir.file("o.safetensors"));
  REQUIRE(f);
  REQUIRE(f->find("v") != nullptr);
  CHECK(static_cast<const int32_t*>(f->find("v")->data)[1] == 6);
  CHECK(dir.list() == std::vector<std::string>{"o.safetensors"});
}

TEST_CASE("Safetensors reads testdata mlp inputs", "[io][safetensors]") {
  auto f = SafetensorsFile::open(std::string(SPMD_TESTDATA_DIR) + "/pt2/mlp/inputs.safetensors");
  REQUIRE(f);
  CHECK(f->names() == std::vector<std::string>{"input.0"});
  const SafetensorsEntry* e = f->find("input.0");
  REQUIRE(e != nullptr);
  CHECK(e->dtype == ScalarType::Float);
  CHECK(e->shape == std::vector<int64_t>{32, 64});
  CHECK(e->bytes == 32 * 64 * 4);
}

TEST_CASE("Safetensors reads testdata llama inputs", "[io][safetensors]") {
  auto f = SafetensorsFile::open(std::string(SPMD_TESTDATA_DIR) + "/pt2/llama/inputs.safetensors");
  REQUIRE(f);
  const SafetensorsEntry* e = f->find("input.0");
  REQUIRE(e != nullptr);
  CHECK(e->dtype == ScalarType::Long);
  CHECK(e->shape == std::vector<int64_t>{2, 16});
  REQUIRE(e->bytes == 2 * 16 * 8);
  std::vector<int64_t> tokens(32);
  std::memcpy(tokens.data(), e->data, e->bytes);
  for (int64_t t : tokens) CHECK(t >= 0);
}

// ---------------------------------------------------------------------------
// Refused files: one case each.

TEST_CASE("Safetensors refuses a file shorter than 8 bytes", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, "abc") ==
        dir.file("t.safetensors") + ": file has 3 bytes, too short for the 8-byte header length");
}

TEST_CASE("Safetensors refuses a missing file", "[io][safetensors][bad]") {
  TempDir dir;
  auto f = SafetensorsFile::open(dir.file("missing.safetensors"));
  REQUIRE_FALSE(f);
  CHECK(f.status().message() == dir.file("missing.safetensors") + ": cannot open: No such file or directory");
}

TEST_CASE("Safetensors refuses a header length beyond the file", "[io][safetensors][bad]") {
  TempDir dir;
  std::string bytes = rawFile("{}");
  bytes[0] = 100;
  CHECK(openError(dir, bytes) ==
        dir.file("t.safetensors") + ": header length 100 exceeds the file (2 bytes follow the length)");
}

TEST_CASE("Safetensors refuses a huge header length", "[io][safetensors][bad]") {
  TempDir dir;
  std::string bytes = rawFile("{}");
  for (int i = 0; i < 8; ++i) bytes[i] = '\xff';
  CHECK(openError(dir, bytes).find("header length 18446744073709551615 exceeds the file") !=
        std::string::npos);
}

TEST_CASE("Safetensors refuses a header that is not JSON", "[io][safetensors][bad]") {
  TempDir dir;
  std::string msg = openError(dir, rawFile(R"({"x": {"dtype": )"));
  CHECK(msg.rfind(dir.file("t.safetensors") + ": header is not valid JSON: ", 0) == 0);
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("Safetensors refuses a header that is not an object", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile("[1, 2]")) == dir.file("t.safetensors") + ": header is not a JSON object");
}

TEST_CASE("Safetensors refuses a non-object entry", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": [0, 4]})", "abcd")) ==
        dir.file("t.safetensors") + ": tensor w: entry is not a JSON object");
}

TEST_CASE("Safetensors refuses an unknown dtype", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})", "abcd")) ==
        dir.file("t.safetensors") + ": tensor w: unknown dtype \"F99\"");
}

TEST_CASE("Safetensors refuses a missing dtype", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", "abcd")) ==
        dir.file("t.safetensors") + ": tensor w: missing or non-string \"dtype\"");
}

TEST_CASE("Safetensors refuses a negative shape", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(
      openError(dir, rawFile(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd")) ==
      dir.file("t.safetensors") + ": tensor w: \"shape\" must hold non-negative integers");
}

TEST_CASE("Safetensors refuses malformed data_offsets", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})",
                               "abcdabcd")) ==
        dir.file("t.safetensors") + ": tensor w: \"data_offsets\" must be two non-negative integers");
}

TEST_CASE("Safetensors refuses data_offsets past the data section", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "abcd")) ==
        dir.file("t.safetensors") +
            ": tensor w: data_offsets [0, 8] out of range (data section has 4 bytes)");
}

TEST_CASE("Safetensors refuses reversed data_offsets", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})", "abcd")) ==
        dir.file("t.safetensors") +
            ": tensor w: data_offsets [4, 0] out of range (data section has 4 bytes)");
}

TEST_CASE("Safetensors refuses data_offsets that do not match the shape", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 8]}})",
                               "abcdabcd")) ==
        dir.file("t.safetensors") + ": tensor w: data_offsets [0, 8] hold 8 bytes, but F32 [2, 3] needs 24");
}

TEST_CASE("Safetensors refuses a shape whose size overflows", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296],)"
                               R"( "data_offsets": [0, 0]}})")) ==
        dir.file("t.safetensors") +
            ": tensor w: data_offsets [0, 0] hold 0 bytes, but F64 [4294967296, 4294967296] needs too many");
}

TEST_CASE("Safetensors refuses overlapping data_offsets", "[io][safetensors][bad][limits]") {
  TempDir dir;
  const std::string data(16, 'x');
  CHECK(openError(dir, rawFile(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},)"
                               R"( "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})",
                               data)) == dir.file("t.safetensors") +
                                             ": tensors a and b overlap (data_offsets [0, 8] and [4, 12]); "
                                             "every tensor needs bytes of its own");
  CHECK(openError(dir, rawFile(R"({"a": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]},)"
                               R"( "b": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]}})",
                               data))
            .find(": tensors ") != std::string::npos);
}

TEST_CASE("Safetensors accepts adjacent and empty tensors at any offset", "[io][safetensors][limits]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},)"
                               R"( "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]},)"
                               R"( "e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},)"
                               R"( "f": {"dtype": "F32", "shape": [0, 3], "data_offsets": [2, 2]}})",
                               "abcdefgh")) == "");
}

TEST_CASE("Safetensors refuses a header above 100,000,000 bytes", "[io][safetensors][bad][limits]") {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  std::string bytes = rawFile("{}");
  const uint64_t length = 100'000'001;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  writeBytes(path, bytes);
  std::filesystem::resize_file(path, length + 16);  // sparse: no 100 MB written
  auto f = SafetensorsFile::open(path);
  REQUIRE_FALSE(f);
  CHECK(f.status().message() == path +
                                    ": header length 100000001 is more than 100000000 bytes; the file is "
                                    "damaged or not safetensors");
}

TEST_CASE("Safetensors refuses non-string metadata", "[io][safetensors][bad]") {
  TempDir dir;
  CHECK(openError(dir, rawFile(R"({"__metadata__": {"format": 1}})")) ==
        dir.file("t.safetensors") + ": \"__metadata__\" value of \"format\" is not a string");
}

// ---------------------------------------------------------------------------
// Refused writes leave nothing behind.

TEST_CASE("writeSafetensors refuses bytes that do not match the shape", "[io][safetensors][bad]") {
  TempDir dir;
  std::vector<float> v = {1, 2, 3};
  Status s = writeSafetensors(dir.file("w.safetensors"), {view("v", ScalarType::Float, {2, 2}, v)});
  CHECK(s.message() == dir.file("w.safetensors") + ": tensor v: has 12 bytes, but F32 [2, 2] needs 16");
  CHECK(dir.list().empty());
}

TEST_CASE("writeSafetensors refuses duplicate names", "[io][safetensors][bad]") {
  TempDir dir;
  std::vector<float> v = {1};
  Status s = writeSafetensors(dir.file("w.safetensors"),
                              {view("v", ScalarType::Float, {1}, v), view("v", ScalarType::Float, {}, v)});
  CHECK(s.message() == dir.file("w.safetensors") + ": tensor v appears more than once");
  CHECK(dir.list().empty());
}

TEST_CASE("writeSafetensors refuses the reserved name __metadata__", "[io][safetensors][bad]") {
  TempDir dir;
  std::vector<float> v = {1};
  Status s = writeSafetensors(dir.file("w.safetensors"), {view("__metadata__", ScalarType::Float, {1}, v)});
  CHECK(s.message() == dir.file("w.safetensors") + ": tensor __metadata__: the name is reserved");
  CHECK(dir.list().empty());
}

TEST_CASE("writeSafetensors refuses a dtype safetensors lacks", "[io][safetensors][bad]") {
  TempDir dir;
  std::vector<double> v = {1, 2};
  Status s = writeSafetensors(dir.file("w.safetensors"), {view("c", ScalarType::ComplexDouble, {1}, v)});
  CHECK(s.message() == dir.file("w.safetensors") + ": tensor c: dtype c128 has no safetensors equivalent");
  CHECK(dir.list().empty());
}

TEST_CASE("writeSafetensors into a missing directory fails and leaves no file", "[io][safetensors][bad]") {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/out.safetensors");
  std::vector<float> v = {1};
  Status s = writeSafetensors(path, {view("v", ScalarType::Float, {1}, v)});
  REQUIRE_FALSE(s.isOk());
  CHECK(s.message().rfind(path + ": cannot create a temporary file beside it: ", 0) == 0);
  CHECK(s.message().find("No such file or directory") != std::string::npos);
  CHECK(dir.list().empty());
}

TEST_CASE("writeSafetensors removes its temporary file when the rename fails", "[io][safetensors][bad]") {
  TempDir dir;
  const std::string path = dir.file("out.safetensors");
  std::filesystem::create_directories(path + "/occupied");  // a non-empty folder: rename must fail
  std::vector<float> v = {1};
  Status s = writeSafetensors(path, {view("v", ScalarType::Float, {1}, v)});
  REQUIRE_FALSE(s.isOk());
  CHECK(s.message().find(": cannot rename ") != std::string::npos);
  CHECK(dir.list() == std::vector<std::string>{"out.safetensors"});
  CHECK(std::filesystem::is_directory(path));
}

}  // namespace
}  // namespace spmd::io
