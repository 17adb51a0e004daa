// foldLayers (autoshard/Fold.h): a stack of repeated layers cut to its
// first layers is the program of the same model with fewer layers, and
// anything that does not repeat is refused with the program left as it was.
#include "../TestCatch.h"
#include "AutoTestUtil.h"
#include "autoshard/Fold.h"
#include "ir/Verify.h"
#include "serialize/ToText.h"

using namespace spmd;
using spmd::testing::modelPath;

namespace {

ir::ExportedProgram readProgram(const std::string& m) {
  auto a = pt2::readArchive(modelPath(m), {.loadWeights = false});
  REQUIRE(a.hasValue());
  return std::move(a->program);
}

// Stored inputs and gradient outputs whose FQN names layer k of the stack.
int countLayer(const ir::ExportedProgram& p, const std::string& prefix, int k) {
  int n = 0;
  const std::string part = prefix + "." + std::to_string(k) + ".";
  for (const auto& in : p.signature.inputs) n += in.target.starts_with(part);
  for (const auto& out : p.signature.outputs) n += out.target.starts_with(part);
  return n;
}

}  // namespace

TEST_CASE("foldLayers keeps the first layers of a stack and rewires the chain around the rest") {
  for (const std::string m : {"llama_deep_train", "llama_deep"}) {
    INFO(m);
    ir::ExportedProgram whole = readProgram(m), two = readProgram(m), three = readProgram(m);
    auto f2 = autoshard::foldLayers(two, 2);
    auto f3 = autoshard::foldLayers(three, 3);
    REQUIRE(f2.hasValue());
    REQUIRE(f3.hasValue());
    CHECK((f2->prefix == "layers" || f2->prefix == "model.layers"));
    CHECK(f3->prefix == f2->prefix);
    CHECK(f2->layers == 32);
    CHECK(f2->kept == 2);
    CHECK(f3->kept == 3);
    for (const auto* p : {&two, &three}) {
      Status st = ir::verifyProgram(*p);
      INFO(st.message());
      CHECK(st.isOk());
    }
    // Layers 0..kept-1 whole (parameters and, in the train step, their
    // gradients), none of the others.
    for (int k = 0; k < 32; ++k) {
      INFO("layer " << k);
      int all = countLayer(whole, f2->prefix, k);
      CHECK(all > 0);
      CHECK(countLayer(two, f2->prefix, k) == (k < 2 ? all : 0));
      CHECK(countLayer(three, f2->prefix, k) == (k < 3 ? all : 0));
    }
    // Every layer has as many nodes: the whole program is the cut plus
    // 30 more layers of what the third layer added.
    const auto n = [](const ir::ExportedProgram& p) { return static_cast<int64_t>(p.graph.nodes().size()); };
    CHECK(n(three) > n(two));
    CHECK(n(whole) == n(two) + 30 * (n(three) - n(two)));
    const auto outs = [](const ir::ExportedProgram& p) {
      return static_cast<int64_t>(p.signature.outputs.size());
    };
    CHECK(outs(whole) == outs(two) + 30 * (outs(three) - outs(two)));
  }
}

TEST_CASE("foldLayers refuses what does not repeat, and leaves the program as it was") {
  struct Case {
    std::string model;
    int keep;
    std::string says;
  };
  for (const Case& c : {Case{"mlp", 2, "no stored inputs repeat"}, Case{"llama", 2, "too few"},
                        Case{"llama_deep", 31, "too few"}, Case{"llama_deep", 0, "too few"}}) {
    INFO(c.model << " keep " << c.keep);
    ir::ExportedProgram p = readProgram(c.model);
    const std::string before = serialize::printProgram(p);
    auto f = autoshard::foldLayers(p, c.keep);
    REQUIRE_FALSE(f.hasValue());
    CHECK(f.status().message().find(c.says) != std::string::npos);
    CHECK(serialize::printProgram(p) == before);
  }
  // One layer of 32 differs (a constant argument of one of its nodes): the
  // stack does not fold, and nothing changed; layer 0 may differ (it is
  // then kept with the rest, and layers 1..31 fold).
  for (const std::string layer : {"5", "31", "0"}) {
    INFO("layer " << layer);
    ir::ExportedProgram p = readProgram("llama_deep_train");
    const ir::Value* w = nullptr;
    for (const auto& in : p.signature.inputs)
      if (in.target == "model.layers." + layer + ".wq.weight") w = in.value;
    REQUIRE(w != nullptr);
    REQUIRE_FALSE(w->users().empty());
    ir::Node* user = w->users().front();
    bool mutated = false;
    std::vector<ir::NamedArgument> args = user->inputs();
    for (auto& a : args)
      if (a.arg.kind == ir::Argument::Kind::Ints && !a.arg.ints.empty()) {
        std::reverse(a.arg.ints.begin(), a.arg.ints.end());
        mutated = a.arg.ints.size() > 1;
      }
    REQUIRE(mutated);
    const std::string name = user->name();
    user->setInputs(std::move(args));
    const std::string before = serialize::printProgram(p);
    auto f = autoshard::foldLayers(p, 2);
    if (layer == "0") {
      REQUIRE(f.hasValue());
      CHECK(ir::verifyProgram(p).isOk());
      CHECK(countLayer(p, "model.layers", 1) > 0);
      CHECK(countLayer(p, "model.layers", 2) == 0);
      bool kept = false;
      for (const auto& n : p.graph.nodes()) kept = kept || n->name() == name;
      CHECK(kept);
      continue;
    }
    REQUIRE_FALSE(f.hasValue());
    CHECK(f.status().message().find("do not fold") != std::string::npos);
    CHECK(serialize::printProgram(p) == before);
  }
}
