// The IR text form reads back: for every test model and for a program
// with every argument kind, print -> parse -> print is the identity (with
// and without debug info), and the parsed program serializes to the same
// torch.export JSON as the original. Bad text is one error naming the line.
#include "../TestCatch.h"

#include "ProgramTestUtil.h"
#include "pt2/Archive.h"
#include "serialize/FromText.h"
#include "serialize/ToExportJson.h"
#include "serialize/ToText.h"

namespace spmd::program {
namespace {

using namespace serialize;  // NOLINT: the functions under test

// Parses `text`, failing the test with the parser's message.
ir::ExportedProgram parsed(const std::string& text) {
  auto p = serialize::parseProgram(text, "test.ir");
  INFO(p.status().message());
  REQUIRE(p.hasValue());
  return std::move(*p);
}

void checkRoundTrip(const ir::ExportedProgram& original) {
  const serialize::PrintOptions debug{.debugInfo = true};
  const std::string full = serialize::printProgram(original, debug);
  ir::ExportedProgram back = parsed(full);
  CHECK(serialize::printProgram(back, debug) == full);
  CHECK(serialize::printProgram(back) == serialize::printProgram(original));
  // Nothing the export JSON holds is lost on the way through the text.
  CHECK(*exportedProgramToJsonText(back) == *exportedProgramToJsonText(original));
  // Without debug info, the text still reads back to itself.
  const std::string brief = serialize::printProgram(original);
  CHECK(serialize::printProgram(parsed(brief)) == brief);
}

TEST_CASE("every test model's IR text parses back", "[program][text]") {
  testing::forEachModelProgram(checkRoundTrip);
}

TEST_CASE("a program with every argument kind parses back", "[program][text]") {
  checkRoundTrip(everyKindProgram());
}

TEST_CASE("the text names every argument and spells what differs from defaults", "[program][text]") {
  const std::string text = serialize::printProgram(everyKindProgram());
  CHECK(text.find("aten.sym_size.int(self=%x, dim=0)") != std::string::npos);
  CHECK(text.find("_operator.mul(a=%sym_size_int, b=sym_int(4))") != std::string::npos);
  CHECK(text.find("opt=optional_tensor(none), opt2=optional_tensor(%p_w), opts=[%x, none]") !=
        std::string::npos);
  CHECK(text.find("*, kw=7)") != std::string::npos);
  CHECK(text.find("f32[s0, 16]{strides=[1, 1], device=cuda:1, requires_grad}") != std::string::npos);
  CHECK(text.find("symbol s0: [2, 64] hint 8\n") != std::string::npos);
}

TEST_CASE("a hand-written program needs no header and reads defaults", "[program][text]") {
  ir::ExportedProgram p = parsed(
      "// RUN: lines and blank lines are skipped\n"
      "\n"
      "input %x: f32[4, 8] user_input\n"
      "input %w: f32[8, 8]{requires_grad} parameter w\n"
      "%mm: f32[4, 8] = aten.mm.default(self=%x, mat2=%w)  # model.py:12\n"
      "output %mm user_output\n");
  REQUIRE(p.graph.nodes().size() == 1);
  const ir::Node& mm = *p.graph.nodes()[0];
  CHECK(mm.name() == "mm");
  CHECK(mm.input("mat2")->value()->name() == "w");
  CHECK(mm.outputValues()[0]->type().strides == std::vector<ir::Dim>{8, 1});
  CHECK(ir::userSourceLine(mm.metadata().stackTrace) == "model.py:12");
  CHECK(p.signature.inputs[1].target == "w");
  CHECK(p.graph.inputs().size() == 2);
}

TEST_CASE("an empty program, and one without a name, read back", "[program][text]") {
  // Found by fuzz/ir_text_fuzz: an empty name printed "program  (schema ...", read back as a node.
  const std::string empty = serialize::printProgram(parsed(""));
  CHECK(empty == "program  (schema 0.0, torch )\n");
  CHECK(serialize::printProgram(parsed(empty)) == empty);
}

TEST_CASE("sizes print so that they parse back to the same tree", "[program][text]") {
  for (const char* text : {"8*s52", "(s0 + 1) // 2", "s0 // (2*s1)", "(s0 // 2)*s1", "s0 + -1", "-1*s0",
                           "max(s0, 2)", "ceildiv(s0, 64)", "(s0 + 1)**2", "(s0 % 3) // 2", "s0*s1*4"}) {
    INFO(text);
    auto d = serialize::parseDim(text, {{"s0", 10}, {"s1", 3}, {"s52", 2}});
    REQUIRE(d.hasValue());
    CHECK(d->str() == text);
  }
  auto hinted = serialize::parseDim("(s0 + 1) // 2", {{"s0", 9}});
  CHECK(hinted->value() == 5);
}

TEST_CASE("bad IR text is one error naming the line", "[program][text]") {
  auto err = [](const std::string& text) {
    return serialize::parseProgram(text, "bad.ir").status().message();
  };
  CHECK(err("input %x: f33[4] user_input\n") == "bad.ir:1: unknown dtype 'f33'");
  CHECK(err("input %x: f32[4] user_input\n%y: f32[4] = aten.neg.default(self=%z)\n") ==
        "bad.ir:2: unknown value %z");
  CHECK(err("input %x: f32[4] user_input\ninput %x: f32[4] user_input\n").starts_with("bad.ir:2: "));
  CHECK(err("input %x: f32[4] user_in\n") == "bad.ir:1: unknown input kind 'user_in'");
  CHECK(err("input %x: f32[4] user_input\n%y: f32[4] = aten.neg.default(%x)\n").starts_with("bad.ir:2: "));
  CHECK(err("input %x: f32[4] user_input\n%y: f32[4] = aten.cat.default(tensors=[%x, 1])\n") ==
        "bad.ir:2: a list mixes items of different kinds");
  CHECK(err("input %x: f32[s0 +] user_input\n").starts_with("bad.ir:1: size 's0 +'"));
}

}  // namespace
}  // namespace spmd::program
