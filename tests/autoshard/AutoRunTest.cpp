// The layouts --schema auto chooses run and match PyTorch's eager outputs
// (simulated ranks: threads talking through Gloo).
#include "../TestUtil.h"
#include "../e2e/E2eUtil.h"
#include "AutoTestUtil.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::autoOrFail;
using spmd::testing::checkOutputs;
using spmd::testing::modelDir;
using spmd::testing::TempDir;

TEST_CASE("auto's layouts of llama, llama_train and gpt_block match eager") {
  struct Case {
    std::string model;
    std::vector<int64_t> mesh;
    std::vector<std::string> axes;
  };
  for (const Case& c : {Case{"llama", {4}, {"tp"}}, Case{"llama_train", {2, 2}, {"dp", "tp"}},
                        Case{"llama_train", {2}, {"dp"}}, Case{"gpt_block", {4}, {"x"}}}) {
    INFO(c.model << " on " << c.mesh.size() << "-D mesh");
    auto r = autoOrFail(c.model, c.mesh, c.axes);
    auto archive = pt2::readArchive(modelDir(c.model) + "/model.pt2");
    REQUIRE(archive.hasValue());
    passes::CompileOptions opts;
    opts.mesh = c.mesh;
    auto compiled = passes::compile(*archive, r.chosen.schema, opts);
    if (!compiled) FAIL(compiled.status().message());
    TempDir dir;
    program::ArchiveWeightSource weights(*archive);
    REQUIRE(program::writeProgram(dir.file("p.spmd"), compiled->program, weights).isOk());
    auto program = program::readProgram(dir.file("p.spmd"));
    REQUIRE(program.hasValue());
    auto in = runtime::readTensors(modelDir(c.model) + "/inputs.safetensors");
    auto exp = runtime::readTensors(modelDir(c.model) + "/expected.safetensors");
    REQUIRE((in.hasValue() && exp.hasValue()));
    auto out = runtime::runThreaded(*program, *in);
    if (!out) FAIL(out.status().message());
    checkOutputs(out->outputs, *exp, 1e-5);
  }
}
