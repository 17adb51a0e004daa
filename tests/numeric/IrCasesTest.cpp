// Numeric checks of the rules on the one-op cases of tests/numeric/cases/
// (IR text, one file per rule family): each node's inputs are filled as the
// file's "// value" lines say (randn for floats by default), and every
// strategy its rule offers runs on 2 and 4 simulated ranks and a 2x2 mesh
// against the node run unsharded. "// offers:" lines before a node name the
// strategies it must offer on 2 ranks, so a rule that stops offering them
// fails here.
//
//   // offers: operands [S(1)] -> results [P(sum)]
//   // value %sum_x: uniform(0.5, 1.5)
//   input %sum_x: f32[8, 6] user_input
//   %sum: f32[8] = aten.sum.dim_IntList(self=%sum_x, dim=[1])
#include <ATen/ATen.h>

#include "../TestCatch.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "NumericUtil.h"
#include "runtime/TypeMap.h"
#include "serialize/FromText.h"

using namespace spmd;
using numeric::CheckStats;

namespace {

/// A case file: its program, and the annotations of its comment lines.
struct CaseFile {
  ir::ExportedProgram program;
  std::map<std::string, std::string> values;          ///< input name -> generator
  std::map<size_t, std::vector<std::string>> offers;  ///< node index -> strategies
};

bool isNodeLine(const std::string& l) {
  return !l.empty() && (l[0] == '%' || l[0] == '[' || l.rfind("aten.", 0) == 0 || l.rfind("none", 0) == 0);
}

CaseFile readCases(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto p = serialize::parseProgram(text, path.string());
  INFO(p.status().message());
  REQUIRE(p.hasValue());
  CaseFile f{std::move(*p), {}, {}};
  std::istringstream lines(text);
  size_t node = 0;
  std::vector<std::string> pending;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("// offers: ", 0) == 0) pending.push_back(l.substr(11));
    if (l.rfind("// value %", 0) == 0) {
      size_t colon = l.find(": ");
      REQUIRE(colon != std::string::npos);
      f.values[l.substr(10, colon - 10)] = l.substr(colon + 2);
    }
    if (isNodeLine(l)) f.offers[node++] = std::move(pending), pending.clear();
  }
  INFO(path << ": node lines and parsed nodes must agree");
  REQUIRE(node == f.program.graph.nodes().size());
  return f;
}

/// The numbers inside "name(a, b)" or "[a, b, ...]" ("inf" and "-inf" too).
std::vector<double> numbersOf(const std::string& spec) {
  std::vector<double> out;
  std::string s = spec.substr(spec.find_first_of("([") + 1);
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  for (std::string word; in >> word;) {
    char* end = nullptr;
    double d = std::strtod(word.c_str(), &end);
    if (end == word.c_str()) break;  // the closing ")" or "]"
    out.push_back(d);
  }
  return out;
}

/// A tensor of `v`'s type filled as `spec` says (empty: randn / random bools).
at::Tensor makeValue(const ir::Value& v, const std::string& spec) {
  const ir::TensorType& t = v.type();
  std::vector<int64_t> sizes;
  for (const ir::Dim& d : t.sizes) sizes.push_back(d.value());
  auto dtype = runtime::toC10ScalarType(t.dtype);
  INFO(v.name() << ": " << dtype.status().message());
  REQUIRE(dtype.hasValue());
  auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor x;
  std::vector<double> n = spec.empty() ? std::vector<double>{} : numbersOf(spec);
  if (spec.empty() && at::isFloatingType(*dtype)) {
    x = at::randn(sizes, opts);
  } else if (spec.empty() && *dtype == at::kBool) {
    x = at::randint(2, sizes, opts);
  } else if (spec.empty()) {
    x = at::zeros(sizes, opts);
    INFO(v.name() << ": an integer input needs a '// value' line");
    REQUIRE(x.numel() == 0);
  } else if (spec.rfind("full(", 0) == 0 && n.size() == 1) {
    x = at::full(sizes, n[0], opts);
  } else if (spec.rfind("uniform(", 0) == 0 && n.size() == 2) {
    x = at::rand(sizes, opts) * (n[1] - n[0]) + n[0];
  } else if (spec.rfind("randint(", 0) == 0 && n.size() == 2) {
    x = at::randint(static_cast<int64_t>(n[0]), static_cast<int64_t>(n[1]), sizes, opts);
  } else {
    INFO(v.name() << ": value '" << spec
                  << "' must be full(c), uniform(lo, hi), randint(lo, hi) or [a, ...]");
    REQUIRE(spec.front() == '[');
    x = at::tensor(n, opts);
    REQUIRE(x.numel() == at::zeros(sizes).numel());
    x = x.reshape(sizes);
  }
  return x.to(*dtype);
}

/// Checks every node of `file` on every mesh; returns the counts.
CheckStats checkCases(const std::filesystem::path& file) {
  CaseFile f = readCases(file);
  at::manual_seed(1);
  CheckStats total;
  size_t index = 0;
  for (const auto& node : f.program.graph.nodes()) {
    numeric::TensorMap values;
    for (const ir::Value* v : node->inputValues())
      if (!values.count(v->name())) values[v->name()] = makeValue(*v, f.values[v->name()]);
    CheckStats stats;
    for (const auto& mesh : numeric::allMeshes())
      numeric::checkNode(*node, values, file.filename().string(), stats, mesh);
    for (const std::string& fail : stats.failures) FAIL_CHECK(fail);
    for (const std::string& want : f.offers[index++]) {
      INFO(file.filename().string() << ": %" << node->name() << " " << node->target() << " must offer "
                                    << want);
      CHECK(std::count(stats.checked.begin(), stats.checked.end(), node->target() + ": " + want) == 1);
    }
    INFO(file.filename().string() << ": %" << node->name() << " " << node->target() << " ran no strategy");
    CHECK(stats.pairs > 0);
    total.add(stats);
  }
  std::cout << "numeric " << file.filename().string() << ": " << total.summary() << std::endl;
  return total;
}

std::vector<std::filesystem::path> caseFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(SPMD_SOURCE_DIR) + "/tests/numeric/cases"))
    if (e.path().extension() == ".ir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("rules hold numerically on the one-op cases of tests/numeric/cases") {
  auto files = caseFiles();
  REQUIRE(files.size() >= 10);
  for (const auto& file : files) {
    DYNAMIC_SECTION(file.filename().string()) { checkCases(file); }
  }
}
