// Helpers for the spmd_program tests: temporary folders, file bytes, the
// test models, and a builder for small hand-made distributed programs.
//
//   ProgramBuilder b("tiny", {2}, {"x"});
//   ir::Value* w = b.input(ir::InputKind::Parameter, "p_w", {4, 4}, {8, 4}, {"S(0)"}, "w");
//   ir::Value* t = b.node("t", "aten.t.default", {{"self", ir::Argument::tensor(w)}}, {4, 4});
//   b.output(t, {"R"}, {4, 8});
//   Program p = b.take();
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../TestCatch.h"
#include "../TestUtil.h"
#include "program/Format.h"
#include "program/Program.h"
#include "pt2/Archive.h"

namespace spmd::program::testing {

/// The shared fixtures (tests/TestUtil.h).
using ::spmd::testing::readBytes;
using ::spmd::testing::TempDir;
using ::spmd::testing::writeBytes;

/// A .spmd file: the header (magic, `major`.`minor`, JSON length and
/// checksum), `json`, padding, then `data` as the data section. Lets a test
/// edit a file's JSON and still pass the JSON checksum.
inline std::string assembleFile(const std::string& json, const std::string& data, uint32_t major,
                                uint32_t minor) {
  std::string out(kMagic);
  auto put = [&out](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(major, 4);
  put(minor, 4);
  put(json.size(), 8);
  put(checksum(json), 8);
  out += json;
  out.resize(dataSectionOffset(json.size()), '\0');
  return out + data;
}

/// testdata/pt2/<model>/model.pt2 for every test model, sorted.
inline std::vector<std::string> modelPaths() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SPMD_TESTDATA_DIR) + "/pt2"))
    if (std::filesystem::exists(e.path() / "model.pt2")) out.push_back((e.path() / "model.pt2").string());
  std::sort(out.begin(), out.end());
  return out;
}

/// IR text without its `tied` lines: tied names come from an archive's
/// shared payloads, which neither the export JSON nor a .spmd program holds.
inline std::string withoutTies(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line))
    if (!line.starts_with("tied ")) out += line + "\n";
  return out;
}

/// Calls `check(program)` for every test model's program (weights not
/// read), with the model's path in the test's log.
template <typename F>
void forEachModelProgram(F check) {
  auto paths = modelPaths();
  REQUIRE(paths.size() >= 10);
  for (const auto& path : paths) {
    INFO(path);
    auto archive = pt2::readArchive(path, {.loadWeights = false});
    REQUIRE(archive.hasValue());
    check(archive->program);
  }
}

/// A contiguous tensor type of `dtype` and static `sizes`.
inline ir::TensorType tensorType(std::vector<int64_t> sizes, ir::ScalarType dtype = ir::ScalarType::Float) {
  ir::TensorType t;
  t.dtype = dtype;
  int64_t stride = 1;
  t.strides.resize(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    t.strides[i] = ir::Dim(stride);
    stride *= sizes[i];
  }
  for (int64_t s : sizes) t.sizes.emplace_back(s);
  return t;
}

/// Parses one placement string per mesh axis ("S(0)", "R", ...).
inline sharding::ShardingSpec spec(const std::vector<std::string>& placements) {
  sharding::ShardingSpec s;
  for (const auto& p : placements) s.placements.push_back(*sharding::parsePlacement(p));
  return s;
}

/// Builds a Program input by input, node by node.
class ProgramBuilder {
 public:
  ProgramBuilder(std::string name, std::vector<int64_t> mesh, std::vector<std::string> axes) {
    p_.mesh = *sharding::Mesh::create(std::move(mesh), std::move(axes));
    p_.graph.name = std::move(name);
    p_.graph.schemaMajor = 8;
    p_.graph.schemaMinor = 17;
    p_.graph.torchVersion = "2.11.0";
  }
  /// A tensor graph input of local `sizes` and global `global` sizes.
  ir::Value* input(ir::InputKind kind, const std::string& name, std::vector<int64_t> sizes,
                   std::vector<int64_t> global, const std::vector<std::string>& placements,
                   const std::string& target = "") {
    ir::Value* v = *p_.graph.graph.addValue(name, ir::ValueKind::Tensor);
    v->mutableType() = tensorType(std::move(sizes));
    p_.graph.graph.addInput(v);
    ir::InputSpec s;
    s.kind = kind;
    s.value = v;
    s.target = target;
    s.name = name;
    p_.graph.signature.inputs.push_back(std::move(s));
    p_.inputs.push_back({spec(placements), tensorType(std::move(global))});
    return v;
  }
  /// A node with one f32 tensor output named `name` of `sizes`.
  ir::Value* node(const std::string& name, const std::string& target, std::vector<ir::NamedArgument> inputs,
                  std::vector<int64_t> sizes) {
    ir::Value* v = *p_.graph.graph.addValue(name, ir::ValueKind::Tensor);
    v->mutableType() = tensorType(std::move(sizes));
    (void)*p_.graph.graph.addNode(name, target, std::move(inputs), {ir::Argument::tensor(v)});
    return v;
  }
  /// A user output with its placements and global sizes.
  void output(ir::Value* v, const std::vector<std::string>& placements, std::vector<int64_t> global) {
    p_.graph.graph.addOutput(ir::Argument::tensor(v));
    p_.graph.signature.outputs.push_back({ir::OutputKind::UserOutput, ir::Argument::tensor(v), ""});
    p_.outputs.push_back({spec(placements), tensorType(std::move(global))});
  }
  /// A weight entry (shards are filled by the writer).
  void weight(const std::string& fqn, std::vector<int64_t> global, const std::vector<std::string>& placements,
              ir::ScalarType dtype = ir::ScalarType::Float) {
    WeightEntry w;
    w.fqn = fqn;
    w.dtype = dtype;
    w.globalShape = std::move(global);
    w.spec = spec(placements);
    p_.weights.push_back(std::move(w));
  }
  /// The program's mutable state (collectives, provenance, ...).
  Program& program() { return p_; }
  /// The program built so far.
  Program take() { return std::move(p_); }

 private:
  Program p_;
};

/// Named positional argument.
inline ir::NamedArgument arg(const std::string& name, ir::Argument a) { return {name, std::move(a), false}; }

/// A string argument.
inline ir::Argument str(const std::string& s) {
  ir::Argument a;
  a.kind = ir::Argument::Kind::String;
  a.strings = {s};
  return a;
}

/// `bytes` of a row-major tensor whose element i is `i` as T.
template <typename T>
std::vector<std::byte> iotaBytes(int64_t numel) {
  std::vector<std::byte> out(static_cast<size_t>(numel) * sizeof(T));
  for (int64_t i = 0; i < numel; ++i) {
    T v = static_cast<T>(i);
    std::memcpy(out.data() + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
  }
  return out;
}

/// The mlp-like program on a 1-D mesh of 2 used by the dump, diff and
/// schema tests: a row-sharded weight, a matmul, an all_gather.
inline Program tinyProgram() {
  ProgramBuilder b("tiny", {2}, {"x"});
  ir::Value* w = b.input(ir::InputKind::Parameter, "p_w", {4, 4}, {8, 4}, {"S(0)"}, "w");
  ir::Value* x = b.input(ir::InputKind::UserInput, "x", {2, 4}, {2, 4}, {"R"});
  ir::Value* t = b.node("t", "aten.t.default", {arg("self", ir::Argument::tensor(w))}, {4, 4});
  ir::Value* mm =
      b.node("mm", "aten.mm.default",
             {arg("self", ir::Argument::tensor(x)), arg("mat2", ir::Argument::tensor(t))}, {2, 4});
  ir::Value* g = b.node(
      "all_gather", "spmd.all_gather",
      {arg("input", ir::Argument::tensor(mm)), arg("axis", str("x")), arg("dim", ir::Argument::integer(1))},
      {2, 8});
  b.output(g, {"R"}, {2, 8});
  b.weight("w", {8, 4}, {"S(0)"});
  b.program().collectives.push_back(
      {"all_gather", "all_gather", "x", 32, "output all_gather", "mm", "[S(1)]", "[R]", ""});
  b.program().provenance = {
      {"source", "/home/me/models/tiny.pt2"},
      {"time", "2025-01-01T10:00:00"},
      {"command", "spmdc compile /home/me/models/tiny.pt2 --schema=/tmp/s.json --mesh 2"}};
  return b.take();
}

}  // namespace spmd::program::testing

namespace spmd::program {
/// A program exercising every argument kind, symbolic sizes, keyword
/// arguments, metadata, a constant input and every output spec kind
/// (IrToJsonTest.cpp).
ir::ExportedProgram everyKindProgram();
}  // namespace spmd::program
