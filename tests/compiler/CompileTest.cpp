// spmdc compile end to end on real models (no execution): collective
// counts against PyTorch DTensor, determinism, local shapes, reports and
// the refusal of bad input.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include "../TestCatch.h"

#include "../pt2/ArchiveFixtures.h"
#include "ir/Collectives.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "program/Dump.h"
#include "schema/PlacementSchema.h"
#include "support/Version.h"

using namespace spmd;
using spmd::testing::readBytes;
using spmd::testing::runCommand;
using spmd::testing::TempDir;

namespace {

std::string model(const std::string& m) {
  return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2";
}
std::string example(const std::string& e) { return std::string(SPMD_SOURCE_DIR) + "/schemas/examples/" + e; }
const std::string kSpmdc = SPMDC_PATH;

passes::CompileResult compileOrFail(const std::string& m, const std::string& schema,
                                    std::optional<std::vector<int64_t>> mesh = std::nullopt,
                                    passes::OptimizerOptions optimizer = {}) {
  auto archive = pt2::readArchive(model(m));
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = mesh;
  opts.optimizer = std::move(optimizer);
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

std::map<std::string, int> countCollectives(const program::Program& p) {
  std::map<std::string, int> out;
  for (const auto& n : p.graph.graph.nodes())
    if (ir::isCommunicating(n->target())) ++out[n->target()];
  return out;
}

}  // namespace

TEST_CASE("spmdc's malloc is mimalloc's wherever the build links it") {
  // cmake/SpmdDeps.cmake links mimalloc into spmdc (not into this test);
  // --version checks a live allocation against mimalloc's heap, so a link
  // order or --as-needed that left glibc's malloc in charge fails here.
  auto r = runCommand(kSpmdc + " --version");
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.stdoutText, Catch::StartsWith("spmdc " + std::string(kVersion) + " ("));
  if (SPMDC_LINKS_MIMALLOC)
    CHECK_THAT(r.stdoutText, Catch::Contains("allocator: mimalloc "));
  else
    CHECK_THAT(r.stdoutText, Catch::Contains("allocator: glibc malloc)"));
}

TEST_CASE("a --print-after name that is no pass is an error listing the passes") {
  auto archive = pt2::readArchive(model("mlp"));
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset("dp");
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  opts.printAfter = {"bucket-colectives"};
  auto r = passes::compile(*archive, *s, opts);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.status().message(),
             Catch::StartsWith("--print-after bucket-colectives: no such pass; the passes are "));
  opts.printAfter = {"dead-code-elimination"};
  auto again = passes::compile(*archive, *s, opts);
  CHECK(again.hasValue());
}

TEST_CASE("--list-passes lists every pass in pipeline order, the graph passes marked") {
  auto r = runCommand(kSpmdc + " --list-passes");
  REQUIRE(r.exitCode == 0);
  std::vector<std::string> lines;
  std::istringstream in(r.stdoutText);
  for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.find(':')));
  CHECK(lines == std::vector<std::string>{
                     "append-optimizer (before propagation)", "gather-params (before propagation)",
                     "mixed-precision (before propagation)", "sequence-parallel (before propagation)",
                     "context-parallel (before propagation)", "cp-load-balance", "dedup-collectives",
                     "dead-code-elimination", "recompute", "reshard-after-forward", "bucket-collectives",
                     "bucket-shard-collectives", "async-collectives"});
}

TEST_CASE("--print-after a graph pass prints the graph after it, before propagation") {
  TempDir dir;
  const std::string out = " -q -o " + dir.file("o.spmd");
  auto train = runCommand(kSpmdc + " compile " + model("mlp_train") +
                          " --schema fsdp --mesh 2 --optimizer adamw --print-after gather-params "
                          "--print-after append-optimizer" +
                          out);
  INFO(train.stderrText);
  REQUIRE(train.exitCode == 0);
  // In pipeline order, whatever the order of the flags: the optimizer's
  // states appear first, the gather anchors only after gather-params.
  size_t optimizer = train.stdoutText.find("// after append-optimizer\n");
  size_t gathers = train.stdoutText.find("// after gather-params\n");
  REQUIRE(optimizer == 0);
  REQUIRE(gathers != std::string::npos);
  std::string afterOptimizer = train.stdoutText.substr(0, gathers);
  std::string afterGathers = train.stdoutText.substr(gathers);
  CHECK_THAT(afterOptimizer, Catch::Contains("optim."));
  CHECK(afterOptimizer.find("_gathered") == std::string::npos);
  CHECK_THAT(afterGathers, Catch::Contains("%p_mlp_fc1_weight_gathered: f32[256, 64]{requires_grad} = "
                                           "aten.alias.default(self=%p_mlp_fc1_weight)"));

  auto sp = runCommand(kSpmdc + " compile " + model("llama") + " --schema " + example("llama_tp_sp.json") +
                       " --mesh 2 --print-after sequence-parallel" + out);
  INFO(sp.stderrText);
  REQUIRE(sp.exitCode == 0);
  CHECK_THAT(sp.stdoutText, Catch::StartsWith("// after sequence-parallel\n"));
  CHECK_THAT(sp.stdoutText,
             Catch::Contains("%embedding_sp: f32[2, 16, 64] = aten.alias.default(self=%embedding)"));
}

TEST_CASE("Megatron TP issues no more collectives than PyTorch DTensor") {
  auto ref = nlohmann::json::parse(readBytes(std::string(SPMD_TESTDATA_DIR) + "/dtensor_reference.json"));
  for (const std::string m : {"mlp", "gpt_block", "llama"}) {
    INFO(m);
    auto r = compileOrFail(m, example(m + "_tp.json"));
    auto counts = countCollectives(r.program);
    int dtensor = ref[m + "_megatron"]["forward"]["c10d_functional.all_reduce"].get<int>();
    CHECK(counts["spmd.all_reduce"] == dtensor);
    CHECK(counts.size() == 1);  // all-reduces only
  }
}

TEST_CASE("a fused QKV projection split Megatron-style: two all-reduces, no all-gather") {
  // qkv.weight [192, 64] as S(0,sf=3): each rank holds its heads of q, of k
  // and of v; the split into q, k, v keeps them sharded, attention runs on
  // local heads, and the block issues DTensor's two all-reduces.
  for (int64_t n : {2, 4}) {
    INFO("tp " << n);
    auto r = compileOrFail("gpt_block_fused", example("gpt_block_fused_tp.json"), std::vector<int64_t>{n});
    auto counts = countCollectives(r.program);
    CHECK(counts["spmd.all_reduce"] == 2);
    CHECK(counts.size() == 1);
  }
}

TEST_CASE("a vocab-sharded embedding looks up locally and all-reduces the activations") {
  // Megatron's vocab-parallel embedding: no gather of the [256, 64] table,
  // one all-reduce of the [2, 16, 64] lookup on top of Megatron's four.
  auto r = compileOrFail("llama", std::string(SPMD_TESTDATA_DIR) + "/schemas/llama_vocab_tp.json");
  CHECK(countCollectives(r.program) == std::map<std::string, int>{{"spmd.all_reduce", 5}});
  std::string dump = program::dumpProgram(r.program);
  CHECK_THAT(dump, Catch::Contains("%embedding: f32[2, 16, 64] = spmd.vocab_embedding(weight=%p_tok_weight, "
                                   "indices=%tokens, spec=\"[S(0)]\", vocab=256)"));
}

TEST_CASE("a rule on a tied weight the program never reads is a warning naming the name it reads") {
  // torch.export keeps both FQNs of a tied table (wte.weight, lm_head.weight)
  // but the graph reads only one of them.
  TempDir dir;
  std::string schema = dir.file("s.json");
  std::ofstream(schema) << R"js({"version": 1, "mesh": {"shape": [2]},
      "params": [{"match": "wte.weight", "placements": ["S(0)"]}]})js";
  auto r = compileOrFail("tied_lm", schema);
  REQUIRE(r.warnings.size() == 1);
  CHECK(
      r.warnings[0] ==
      "parameter 'wte.weight' is laid out [S(0)] but the program never reads it: it reads that tensor (tied) "
      "as parameter 'lm_head.weight', laid out [R]; place parameter 'lm_head.weight' instead");
  std::ofstream(schema, std::ios::trunc) << R"js({"version": 1, "mesh": {"shape": [2]},
      "params": [{"match": "*.weight", "placements": ["S(0)"]}]})js";
  CHECK(compileOrFail("tied_lm", schema).warnings.empty());
}

TEST_CASE("a gather warning names the node that gathers; a layout an earlier node asked for warns nothing") {
  // fsdp + AdamW: the weight decay reads each parameter in the layout FSDP's
  // gather produced for the forward; the program gathers nothing else.
  passes::OptimizerOptions adamw;
  adamw.kind = "adamw";
  adamw.weightDecay = 0.01;
  auto r = compileOrFail("llama_train", "fsdp", std::vector<int64_t>{2}, adamw);
  for (const auto& w : r.warnings) CHECK_THAT(w, !Catch::Contains(" gathers %"));
  // The sequence sharded: each attention matmul does gather, and says so once.
  TempDir dir;
  std::string schema = dir.file("s.json");
  std::ofstream(schema) << R"js({"version": 1, "mesh": {"shape": [2]},
      "inputs": [{"match": "tokens", "placements": ["S(1)"]}]})js";
  auto seq = compileOrFail("llama", schema);
  std::set<std::string> warned;
  for (const auto& w : seq.warnings)
    if (w.find(" gathers %") != std::string::npos) CHECK(warned.insert(w).second);
  CHECK(warned.size() >= 2);
  CHECK(countCollectives(seq.program)["spmd.all_gather"] >= 2);
}

TEST_CASE("a Hugging Face tp plan compiles as the hand-written Megatron schema, directly or via from-hf") {
  // llama_hf_plan.json holds a base_model_tp_plan; `spmdc schema from-hf`
  // writes it out as explicit rules, and a schema may carry it as tp_plan.
  TempDir dir;
  std::string plan = std::string(SPMD_TESTDATA_DIR) + "/schemas/llama_hf_plan.json";
  for (const std::string m : {"llama", "llama_train"}) {
    INFO(m);
    std::string explicitSchema = dir.file(m + ".json");
    auto r = runCommand(kSpmdc + " schema from-hf " + plan + " --mesh 2 --model " + model(m) + " -o " +
                        explicitSchema);
    INFO(r.stderrText);
    REQUIRE(r.exitCode == 0);
    std::string inline_ = dir.file(m + "_inline.json");
    std::ofstream(inline_) << R"js({"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
        "tp_plan": {"layers.*.w[qkv13]": "colwise", "layers.*.w[o2]": "rowwise"}})js";
    std::string byHand =
        program::dumpProgram(compileOrFail(m, example("llama_tp.json"), std::vector<int64_t>{2}).program);
    auto strip = [](const std::string& d) {  // provenance names the schema file
      std::string out, line;
      std::istringstream in(d);
      while (std::getline(in, line))
        if (line.rfind("provenance", 0) != 0) out += line + "\n";
      return out;
    };
    CHECK(strip(program::dumpProgram(compileOrFail(m, explicitSchema).program)) == strip(byHand));
    CHECK(strip(program::dumpProgram(compileOrFail(m, inline_).program)) == strip(byHand));
  }
  auto bad = runCommand(kSpmdc + " schema from-hf " + std::string(SPMD_TESTDATA_DIR) +
                        "/schemas/llama_fsdp_tp_strided.json --mesh 2 -o " + dir.file("x.json"));
  CHECK(bad.exitCode == 2);
  CHECK_THAT(bad.stderrText, Catch::Contains("no tensor-parallel plan"));
  CHECK_FALSE(std::ifstream(dir.file("x.json")).good());
}

TEST_CASE("size-1 mesh axes issue no collectives") {
  // A gather, reduce or slice over one rank is the identity: nothing is
  // emitted, counted or reported for it.
  for (const std::string m : {"mlp", "llama_train"}) {
    INFO(m);
    CHECK(countCollectives(compileOrFail(m, "fsdp", std::vector<int64_t>{1}).program).empty());
    CHECK(countCollectives(compileOrFail(m, "dp", std::vector<int64_t>{1, 1}).program).empty());
    auto r = compileOrFail(m, "fsdp", std::vector<int64_t>{1, 2});
    for (const auto& n : r.program.graph.graph.nodes())
      if (ir::isCommunicating(n->target())) {
        INFO(n->name());
        REQUIRE(n->inputs().size() > 1);
        CHECK(n->inputs()[1].arg.strings == std::vector<std::string>{"d1"});
      }
  }
}

TEST_CASE("data parallel keeps the batch sharded: llama needs only the output all-gather") {
  auto r = compileOrFail("llama", "dp", std::vector<int64_t>{2});
  auto counts = countCollectives(r.program);
  CHECK(counts["spmd.all_gather"] == 1);
  CHECK(counts.size() == 1);
  const ir::Value* tokens = r.program.graph.graph.findValue("tokens");
  REQUIRE(tokens);
  CHECK(tokens->type().str() == "i64[1, 16]");
}

TEST_CASE("data parallel training with an optimizer reduces each gradient once, as DDP does") {
  // DDP all-reduces each gradient once before the optimizer; a pending sum
  // flowing into AdamW's math was all-reduced again at the squared
  // gradient, the second moment, the first moment and the new parameter
  // (4x the bytes).
  for (const std::string m : {"mlp_train", "llama_train"}) {
    for (const std::string kind : {"adamw", "sgd"}) {
      INFO(m << " with " << kind);
      auto archive = pt2::readArchive(model(m));
      REQUIRE(archive.hasValue());
      int64_t gradientBytes = 0;
      for (const auto& in : archive->program.signature.inputs)
        if (in.kind == ir::InputKind::Parameter) gradientBytes += *in.value->type().numel() * 4;
      auto s = schema::loadSchemaOrPreset("dp");
      passes::CompileOptions opts;
      opts.mesh = std::vector<int64_t>{2};
      opts.bucketBytes = 0;
      opts.optimizer.kind = kind;
      opts.optimizer.momentum = 0.9;
      auto r = passes::compile(*archive, *s, opts);
      REQUIRE(r.hasValue());
      int64_t reduced = 0, scalars = 0;
      for (const auto& n : r->program.graph.graph.nodes()) {
        if (n->target() != ir::kAllReduce) continue;
        int64_t numel = *n->outputValues()[0]->type().numel();
        numel == 1 ? ++scalars : reduced += numel * 4;
      }
      CHECK(reduced == gradientBytes);  // every gradient once
      CHECK(scalars <= 2);              // the loss (and llama's count of targets)
    }
  }
}

namespace {

passes::CompileResult compileTrain(const std::string& m, const std::string& schema, std::vector<int64_t> mesh,
                                   const std::string& optimizer,
                                   int64_t bucketBytes = passes::kDefaultBucketBytes) {
  auto archive = pt2::readArchive(model(m));
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::move(mesh);
  opts.optimizer.kind = optimizer;
  opts.bucketBytes = bucketBytes;
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

int64_t parameterCount(const std::string& m) {
  auto archive = pt2::readArchive(model(m));
  REQUIRE(archive.hasValue());
  int64_t n = 0;
  for (const auto& in : archive->program.signature.inputs)
    if (in.kind == ir::InputKind::Parameter) n += *in.value->type().numel();
  return n;
}

}  // namespace

TEST_CASE("Megatron TP training: one all-reduce per column-parallel input gradient, none on weights") {
  // Megatron's backward all-reduces the activation gradient once where the
  // column-parallel linears' input gradients meet; row-parallel weight
  // gradients and the replicated norms' gradients are computed locally.
  // llama_train: 2 layers x (2 forward + 2 backward) all-reduces of [2, 16, 64].
  for (const std::string kind : {"sgd", "adamw"}) {
    INFO(kind);
    auto r = compileTrain("llama_train", example("llama_tp.json"), {2}, kind);
    auto counts = countCollectives(r.program);
    CHECK(counts["spmd.all_reduce"] == 8);
    CHECK(counts.size() == 1);
    for (const auto& n : r.program.graph.graph.nodes())
      if (n->target() == ir::kAllReduce) CHECK(n->outputValues()[0]->type().str() == "f32[2, 16, 64]");
  }
  auto mlp = compileTrain("mlp_train", example("mlp_tp.json"), {2}, "adamw");
  CHECK(countCollectives(mlp.program) == std::map<std::string, int>{{"spmd.all_reduce", 1}});
}

TEST_CASE(
    "fsdp is ZeRO-3 as FSDP2: layers gathered before the forward and again for the backward, "
    "gradients reduce-scattered, states sharded") {
  // Collectives per step, as FSDP2 with its default reshard_after_forward
  // issues them wrapped per LlamaLayer + root (mlp: root only),
  // tests/reference/reference_comm.py: one all-gather per module group in
  // the forward, one more per layer in the backward (the root's gathered
  // weights are kept), one reduce-scatter per group.
  const std::map<std::string, int> gathers = {{"mlp_train", 1}, {"llama_train", 5}};
  const std::map<std::string, int> scatters = {{"mlp_train", 1}, {"llama_train", 3}};
  for (const std::string m : {"mlp_train", "llama_train"}) {
    INFO(m);
    auto r = compileTrain(m, "fsdp", {2}, "adamw");
    auto counts = countCollectives(r.program);
    CHECK(counts["spmd.all_gather"] == gathers.at(m));
    CHECK(counts["spmd.reduce_scatter"] == scatters.at(m));
    int64_t gathered = 0, scattered = 0, parameters = 0, layerParameters = 0;  // elements
    for (const auto& n : r.program.graph.graph.nodes()) {
      if (!ir::isCommunicating(n->target())) continue;
      int64_t numel = *n->outputValues()[0]->type().numel();
      if (n->target() == ir::kAllGather) {
        // A flat buffer of stored shards (cat of their reshapes), not an activation.
        const ir::Node* cat = n->inputValues()[0]->producer();
        REQUIRE(cat != nullptr);
        CHECK(cat->target() == "aten.cat.default");
        for (const ir::Value* part : cat->inputValues()) {
          REQUIRE(part->producer() != nullptr);
          CHECK(part->producer()->inputValues()[0]->producer() == nullptr);
        }
        gathered += numel;
      }
      if (n->target() == ir::kReduceScatter) scattered += numel * 2;
      CHECK(n->target() != ir::kAllToAll);
    }
    std::set<std::string> params;
    auto archive = pt2::readArchive(model(m));
    REQUIRE(archive.hasValue());
    for (const auto& in : archive->program.signature.inputs)
      if (in.kind == ir::InputKind::Parameter) params.insert(in.target);
    for (const auto& w : r.program.weights) {
      INFO(w.fqn);
      if (w.fqn.rfind("optim.", 0) == 0 && w.fqn != "optim.step") CHECK(w.spec.str() == "[S(0)]");
      if (w.fqn.rfind("optim.", 0) != 0 && !params.count(w.fqn)) CHECK(w.spec.str() == "[R]");  // buffers
      if (params.count(w.fqn)) {
        CHECK(w.spec.str() == "[S(0)]");
        int64_t numel = 1;
        for (int64_t d : w.globalShape) numel *= d;
        parameters += numel;
        if (w.fqn.find("layers.") != std::string::npos) layerParameters += numel;
      }
    }
    CHECK(parameters == parameterCount(m));
    CHECK(gathered == parameters + layerParameters);
    CHECK(scattered == parameters);
  }
}

TEST_CASE(
    "fsdp buckets: one flat all-gather per module group and size, prefetched; 0 keeps one per parameter") {
  auto kinds = [&](const passes::CompileResult& r) { return countCollectives(r.program); };
  auto unbucketed = compileTrain("llama_train", "fsdp", {2}, "adamw", 0);
  CHECK(kinds(unbucketed)["spmd.all_gather"] == 21 + 18);  // 18 layer parameters gathered again
  CHECK(kinds(unbucketed)["spmd.reduce_scatter"] == 21);
  auto r = compileTrain("llama_train", "fsdp", {2}, "adamw");
  const ir::Graph* g = &r.program.graph.graph;
  std::map<const ir::Value*, std::string> fqn;
  for (const auto& in : r.program.graph.signature.inputs) fqn[in.value] = in.target;
  // Members of one gather share a module group: the root's, or one layer's.
  std::vector<const ir::Node*> gathers, scatters;
  for (const auto& n : g->nodes()) {
    if (n->target() == ir::kReduceScatter) scatters.push_back(n.get());
    if (n->target() != ir::kAllGather) continue;
    gathers.push_back(n.get());
    std::set<std::string> groups;
    for (const ir::Value* part : n->inputValues()[0]->producer()->inputValues()) {
      std::string name = fqn[part->producer()->inputValues()[0]];
      size_t layer = name.find("layers.");
      groups.insert(layer == std::string::npos ? "root" : name.substr(0, layer + 8));
    }
    CHECK(groups.size() == 1);
  }
  REQUIRE(gathers.size() == 5);  // root + 2 layers in the forward, 2 layers again in the backward
  REQUIRE(scatters.size() == 3);
  // Prefetch: each gather is issued before the one before is waited for,
  // within the forward's and within the backward's.
  for (size_t i : {1, 2, 4})
    CHECK(gathers[i]->index() < gathers[i - 1]->outputValues()[0]->users()[0]->index());
  // Overlap: the first gradient bucket is issued while the last one's
  // gradients are still being computed.
  CHECK(scatters.front()->index() < scatters.back()->inputValues()[0]->producer()->index());
  // A smaller bucket size splits the groups; no fused buffer exceeds it.
  const int64_t small = 64 * 1024;
  auto split = compileTrain("llama_train", "fsdp", {2}, "adamw", small);
  int fused = 0;
  for (const auto& n : split.program.graph.graph.nodes()) {
    if (n->target() != ir::kAllGather && n->target() != ir::kReduceScatter) continue;
    const ir::Value* full = n->target() == ir::kAllGather ? n->outputValues()[0] : n->inputValues()[0];
    bool flat = n->inputValues()[0]->producer() != nullptr && n->target() == ir::kAllGather;
    if (flat) CHECK(*full->type().numel() * 4 <= small);
    fused += flat;
  }
  CHECK(kinds(split)["spmd.all_gather"] > 3);
  CHECK(kinds(split)["spmd.all_gather"] < 21);
  CHECK(fused > 1);
}

TEST_CASE("hsdp: gathers and reduce-scatters over the shard axis, all-reduces shards over the other") {
  auto r = compileTrain("mlp_train", "hsdp", {2, 2}, "sgd");
  int64_t params = parameterCount("mlp_train");
  std::map<std::string, int64_t> elements;
  for (const auto& n : r.program.graph.graph.nodes()) {
    if (!ir::isCommunicating(n->target()) || n->outputValues()[0]->type().rank() == 0) continue;
    CHECK(n->inputs()[1].arg.strings ==
          std::vector<std::string>{n->target() == ir::kAllReduce ? "d0" : "d1"});
    elements[n->target()] += *n->outputValues()[0]->type().numel();
  }
  CHECK(elements[std::string(ir::kAllGather)] == params);
  CHECK(elements[std::string(ir::kReduceScatter)] == params / 2);
  CHECK(elements[std::string(ir::kAllReduce)] == params / 2);
}

TEST_CASE("data parallel training all-reduces every gradient and the loss; buckets fuse the gradients") {
  auto archive = pt2::readArchive(model("mlp_train"));
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset("dp");
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  opts.bucketBytes = 0;
  auto r = passes::compile(*archive, *s, opts);
  REQUIRE(r.hasValue());
  // 4 parameter gradients (pending sums over the batch) and the loss (a pending mean).
  auto counts = countCollectives(r->program);
  CHECK(counts["spmd.all_reduce"] == 5);
  CHECK(counts.size() == 1);
  // With buckets (the default), the 4 gradient sums become one all-reduce
  // of their concatenation; the mean stays apart (another reduction).
  auto bucketed = compileOrFail("mlp_train", "dp", std::vector<int64_t>{2});
  counts = countCollectives(bucketed.program);
  CHECK(counts["spmd.all_reduce"] == 2);
  std::string dump = program::dumpProgram(bucketed.program);
  CHECK_THAT(dump, Catch::Contains("%bucket: f32[33088] = aten.cat.default("));
  // Buckets of 70,000 bytes: (fc1.weight 64 KiB + fc1.bias 1 KiB), (fc2.weight + fc2.bias).
  opts.bucketBytes = 70000;
  auto archive2 = pt2::readArchive(model("mlp_train"));
  auto small = passes::compile(*archive2, *s, opts);
  REQUIRE(small.hasValue());
  CHECK(countCollectives(small->program)["spmd.all_reduce"] == 3);  // two buckets and the mean
}

TEST_CASE("Megatron MLP: local shapes and the pending bias") {
  auto r = compileOrFail("mlp", example("mlp_tp.json"));
  std::string dump = program::dumpProgram(r.program);
  CHECK_THAT(dump, Catch::Contains(
                       "input %p_fc1_weight: f32[32, 64] parameter fc1.weight  [S(0)] global f32[256, 64]"));
  CHECK_THAT(dump, Catch::Contains(
                       "%addmm: f32[32, 32] = aten.addmm.default(self=%p_fc1_bias, mat1=%x, mat2=%permute)"));
  CHECK_THAT(dump, Catch::Contains("spmd.zero_partial(self=%p_fc2_bias, axis=\"tp\")"));
  CHECK_THAT(dump, Catch::Contains("spmd.all_reduce(self=%addmm_1, axis=\"tp\", op=\"sum\", *, async=true)"));
  REQUIRE(r.program.collectives.size() == 1);
  const auto& c = r.program.collectives[0];
  CHECK(c.kind == "all_reduce");
  CHECK(c.from == "[P(sum)]");
  CHECK(c.to == "[R]");
  CHECK(c.bytesPerRank == 2 * 7 * 32 * 64 * 4 / 8);
}

TEST_CASE("async collectives: the wait sits right before the first reader") {
  auto r = compileOrFail("mlp", example("mlp_tp.json"));
  const auto& nodes = r.program.graph.graph.nodes();
  int start = -1, wait = -1;
  for (const auto& n : nodes) {
    if (n->target() == ir::kAllReduce) start = n->index();
    if (n->target() == ir::kWait) wait = n->index();
  }
  REQUIRE(start >= 0);
  REQUIRE(wait > start);
  CHECK(r.program.graph.signature.outputs[0].arg.value()->producer()->target() == ir::kWait);
}

TEST_CASE("the report names every collective and its reason") {
  auto r = compileOrFail("llama", example("llama_tp.json"));
  auto j = nlohmann::json::parse(passes::reportJson(r));
  CHECK(j["collective_counts"]["all_reduce"] == 4);
  CHECK(j["collectives"].size() == 4);
  for (const auto& c : j["collectives"]) {
    CHECK(c["kind"] == "all_reduce");
    CHECK(c["mesh_axis"] == "tp");
    CHECK(c["bytes_per_rank"].get<int64_t>() > 0);
    CHECK_THAT(c["reason"].get<std::string>(), Catch::StartsWith("needed by "));
  }
  CHECK(j["per_rank"]["param_bytes"].get<int64_t>() > 0);
  CHECK(j["per_rank"]["peak_bytes_estimate"].get<int64_t>() > j["per_rank"]["param_bytes"].get<int64_t>());
  CHECK(!j["per_rank"]["peak_node"].get<std::string>().empty());  // where the peak is reached
  CHECK(j["per_rank"].contains("peak_source_line"));
  CHECK(j["timings_ms"].contains("propagation"));
}

TEST_CASE("compiling twice gives byte-identical programs") {
  TempDir dir;
  for (int i = 0; i < 2; ++i) {
    auto res = runCommand(kSpmdc + " compile " + model("llama_train") + " --schema fsdp --mesh 2 -q -o " +
                          dir.file("p" + std::to_string(i) + ".spmd"));
    REQUIRE(res.exitCode == 0);
  }
  CHECK(readBytes(dir.file("p0.spmd")) == readBytes(dir.file("p1.spmd")));
}

TEST_CASE("ops without a rule are refused in one error listing all of them") {
  TempDir dir;
  std::string bad = dir.file("bad.pt2");
  spmd::testing::rewriteArchive(model("mlp"), bad, [](const std::string& name, std::string bytes) {
    if (name == "model/models/model.json") {
      for (int i = 0; i < 2; ++i)
        bytes = spmd::testing::replaceFirst(bytes, "torch.ops.aten.gelu.default\"",
                                            "torch.ops.aten.frobnicate.default\"");
      bytes = spmd::testing::replaceFirst(bytes, "torch.ops.aten.permute.default\"",
                                          "torch.ops.aten.twiddle.default\"");
    }
    return std::optional<std::string>(bytes);
  });
  auto res = runCommand(kSpmdc + " compile " + bad + " --schema dp --mesh 2 -o " + dir.file("out.spmd"));
  CHECK(res.exitCode == 2);
  CHECK_THAT(res.stderrText,
             Catch::Contains("no sharding rule for 2 ops: aten.twiddle.default (node %permute"));
  CHECK_THAT(res.stderrText, Catch::Contains("aten.frobnicate.default (node %gelu, export_models.py:37"));
  CHECK_THAT(res.stderrText, Catch::Contains("--replicate-unknown"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out.spmd")));
  // With --replicate-unknown they run replicated, with a warning each.
  res = runCommand(kSpmdc + " compile " + bad + " --schema dp --mesh 2 --replicate-unknown -o " +
                   dir.file("out.spmd"));
  CHECK(res.exitCode == 0);
  CHECK_THAT(res.stdoutText, Catch::Contains("warning: no sharding rule for aten.frobnicate.default"));
  CHECK(std::filesystem::exists(dir.file("out.spmd")));
}

TEST_CASE("an op from outside LibTorch is refused at compile time unless the schema gives it a rule") {
  // custom_op calls spmdtest.scaled_add, whose kernel only a --load-library
  // brings: without a rule it used to compile under --replicate-unknown and
  // then fail on every rank ("the linked LibTorch has no operator").
  TempDir dir;
  std::string out = dir.file("out.spmd");
  for (const std::string flags : {"", " --replicate-unknown"}) {
    INFO(flags);
    auto res = runCommand(kSpmdc + " compile " + model("custom_op") + " --schema dp --mesh 2" + flags +
                          " -o " + out);
    CHECK(res.exitCode == 2);
    CHECK_THAT(
        res.stderrText,
        Catch::StartsWith("error: " + model("custom_op") +
                          ": node %scaled_add (spmdtest.scaled_add.default, export_models.py:") &&
            Catch::Contains("the op is not LibTorch's (namespace 'spmdtest', registered from Python?)") &&
            Catch::Contains("give it a rule in the schema's \"rules\" and run spmd-run --load-library"));
    CHECK(std::count(res.stderrText.begin(), res.stderrText.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(out));
  }
  auto ok = runCommand(kSpmdc + " compile " + model("custom_op") + " --schema " + SPMD_SOURCE_DIR +
                       "/testdata/schemas/custom_op_dp.json -q -o " + out);
  INFO(ok.stderrText);
  CHECK(ok.exitCode == 0);
  // transformers' MoE fallback (registered from Python): the message names
  // the export setting that avoids it.
  std::string moe = dir.file("moe.pt2");
  spmd::testing::rewriteArchive(model("custom_op"), moe, [](const std::string& name, std::string bytes) {
    if (name.ends_with(".json"))
      bytes = spmd::testing::replaceFirst(bytes, "torch.ops.spmdtest.scaled_add.default\"",
                                          "torch.ops.transformers.grouped_mm_fallback.default\"");
    return std::optional<std::string>(bytes);
  });
  auto res = runCommand(kSpmdc + " compile " + moe + " --schema dp --mesh 2 --replicate-unknown -o " + out);
  CHECK(res.exitCode == 2);
  CHECK_THAT(res.stderrText, Catch::Contains("(transformers.grouped_mm_fallback.default") &&
                                 Catch::Contains("config._experts_implementation = \"batched_mm\""));
}

TEST_CASE("an unknown preset lists the presets in one line") {
  TempDir dir;
  auto res =
      runCommand(kSpmdc + " compile " + model("mlp") + " --schema fsdp2 --mesh 2 -o " + dir.file("o.spmd"));
  CHECK(res.exitCode == 2);
  CHECK(res.stderrText ==
        "error: --schema fsdp2: no such preset or schema file (presets: dp, ddp, fsdp, hsdp, auto; or give a "
        "placement schema file)\n");
}

TEST_CASE("from-hf on a 2-D mesh without --axes names them dp and tp; the schema compiles") {
  // It used to fail with "the mesh 2x2 (d0, d1) has no axis named tp; name
  // one in "mesh": {"axes": [...]}", i.e. edit the JSON by hand.
  TempDir dir;
  std::string plan = std::string(SPMD_TESTDATA_DIR) + "/schemas/llama_hf_plan.json";
  for (const std::string& withModel : {std::string(), " --model " + model("llama")}) {
    INFO(withModel);
    auto r = runCommand(kSpmdc + " schema from-hf " + plan + " --mesh 2x2" + withModel + " -o " +
                        dir.file("s.json"));
    INFO(r.stderrText);
    REQUIRE(r.exitCode == 0);
    auto j = nlohmann::json::parse(readBytes(dir.file("s.json")));
    CHECK(j["mesh"]["axes"] == nlohmann::json{"dp", "tp"});
    auto c = compileOrFail("llama", dir.file("s.json"));
    CHECK(countCollectives(c.program)["spmd.all_reduce"] >= 2);  // Megatron's, over tp
  }
}

TEST_CASE("bad schemas are refused with exit 2 and no output") {
  TempDir dir;
  struct Case {
    std::string json, expect;
  };
  std::vector<Case> cases = {
      {R"J({"version": 1, "mesh": {"shape": [8], "axes": ["tp"]}, "params": [{"match": "fc1.weigth", "placements": {"tp": "S(0)"}}]})J",
       "matches no parameter or buffer"},
      {R"J({"version": 1, "mesh": {"shape": [8], "axes": ["tp"]}, "params": [{"match": "fc1.weight", "placements": {"dp": "S(0)"}}]})J",
       "dp"},
      {R"J({"version": 1, "mesh": {"shape": [8], "axes": ["tp"]}, "params": [{"match": "fc1.weight", "placements": {"tp": "S(2)"}}]})J",
       "fc1.weight"},
      {R"J({"version": 1, "mesh": {"shape": [3], "axes": ["tp"]}, "params": [{"match": "fc1.weight", "placements": {"tp": "S(0,sf=3)"}}]})J",
       "dim 0 of size 256 does not split into 3 equal rows for S(0,sf=3) on mesh axis 'tp'"},
      {R"J({"version": 1, "mesh": {"shape": [8], "axes": ["tp"]}, "params": [{"match": "fc1.weight", "placements": ["S(0)", "R"]}]})J",
       "2 placements given for the 1-axis mesh"},
      {R"J({"version": 1, "mesh": {"shape": [8], "axes": ["tp"]}, "parms": []})J", "parms"},
      {R"J({"version": 1, "mesh": {"shape": [8], "axes": ["tp"]}, )J", "s.json:1:"},
  };
  for (const auto& c : cases) {
    INFO(c.json);
    std::ofstream(dir.file("s.json")) << c.json;
    auto res = runCommand("cd " + dir.file("") + " && " + kSpmdc + " compile " + model("mlp") +
                          " --schema s.json -o out.spmd");
    CHECK(res.exitCode == 2);
    CHECK_THAT(res.stderrText, Catch::StartsWith("error: "));
    CHECK_THAT(res.stderrText, Catch::Contains(c.expect));
    CHECK(std::count(res.stderrText.begin(), res.stderrText.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(dir.file("out.spmd")));
  }
}

TEST_CASE("a bad --mesh and a missing model are clear errors") {
  TempDir dir;
  auto res =
      runCommand(kSpmdc + " compile " + model("mlp") + " --schema dp --mesh 2x -o " + dir.file("o.spmd"));
  CHECK(res.exitCode == 2);
  CHECK_THAT(res.stderrText, Catch::Contains("--mesh 2x"));
  res = runCommand(kSpmdc + " compile /nonexistent.pt2 --schema dp --mesh 2 -o " + dir.file("o.spmd"));
  CHECK(res.exitCode == 2);
  CHECK_THAT(res.stderrText, Catch::Contains("/nonexistent.pt2: cannot open"));
}
