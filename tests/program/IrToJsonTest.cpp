// IR -> torch.export JSON: srepr printing, float spelling, targets, and the
// round trip through serialize::parseExportedProgram for every test model and for
// a hand-built program using every argument kind.
//
//   archive -> IR -> JSON -> IR: printProgram text identical byte for byte.
#include "../TestCatch.h"

#include <cmath>
#include <limits>

#include "ProgramTestUtil.h"
#include "pt2/Archive.h"
#include "serialize/FromExportJson.h"
#include "serialize/ToExportJson.h"
#include "serialize/ToText.h"

namespace spmd::program {
namespace {

using namespace serialize;  // NOLINT: the functions under test

using ir::Argument;
using K = ir::Argument::Kind;

ir::Dim sym(const std::string& srepr, int64_t hint) { return *ir::parseSymExpr(srepr, hint); }

Argument make(K kind, std::vector<ir::Value*> values = {}, std::vector<int64_t> ints = {},
              std::vector<double> floats = {}, std::vector<std::string> strings = {}) {
  Argument a;
  a.kind = kind;
  a.values = std::move(values);
  a.ints = std::move(ints);
  a.floats = std::move(floats);
  a.strings = std::move(strings);
  return a;
}

// One argument of each kind (and a keyword one), reading `x`, `w`, `size`, `mul`.
std::vector<ir::NamedArgument> everyArgumentKind(ir::Value* x, ir::Value* w, ir::Value* size,
                                                 ir::Value* mul) {
  return {
      {"none", Argument::none()},
      {"tensors", Argument::tensors({x, w})},
      {"opt", make(K::OptionalTensor, {nullptr})},
      {"opt2", make(K::OptionalTensor, {w})},
      {"opts", make(K::OptionalTensors, {x, nullptr})},
      {"ints", Argument::integers({1, -1, std::numeric_limits<int64_t>::max()})},
      {"f", Argument::floating(0.1)},
      {"inf", Argument::floating(std::numeric_limits<double>::infinity())},
      {"ninf", Argument::floating(-std::numeric_limits<double>::infinity())},
      {"nan", Argument::floating(std::nan(""))},
      {"floats", make(K::Floats, {}, {}, {1e-310, -0.0, 3.141592653589793, 1e300})},
      {"b", Argument::boolean(true)},
      {"bs", make(K::Bools, {}, {1, 0, 1})},
      {"s", make(K::String, {}, {}, {}, {"tanh \"quoted\" \xc3\xa9"})},
      {"ss", make(K::Strings, {}, {}, {}, {"a", "b"})},
      {"si", Argument::symInt(mul)},
      {"sis", Argument::symInts({size, nullptr, mul}, {0, -1, 0})},
      {"sf", make(K::SymFloat, {nullptr}, {0}, {2.5})},
      {"sfs", make(K::SymFloats, {nullptr}, {0}, {0.25})},
      {"sb", make(K::SymBool, {nullptr}, {1})},
      {"sbs", make(K::SymBools, {nullptr, nullptr}, {1, 0})},
      {"dtype", Argument::scalarType(ir::ScalarType::BFloat16)},
      {"mf", make(K::MemoryFormat, {}, {1})},
      {"layout", make(K::Layout, {}, {7})},
      {"device", Argument::device({"cuda", 0})},
      {"cpu", Argument::device({"cpu", -1})},
      {"complex", make(K::Complex, {}, {}, {1.5, -2.0})},
      {"lists",
       [] {
         Argument a = make(K::IntLists, {}, {1, 2, 3});
         a.listSizes = {2, 0, 1};
         return a;
       }()},
      {"kw", Argument::integer(7), true},
  };
}

}  // namespace

// A program exercising every argument kind, symbolic sizes, keyword
// arguments, metadata, a constant input and every output spec kind.
ir::ExportedProgram everyKindProgram() {
  ir::ExportedProgram p;
  p.name = "kinds";
  p.schemaMajor = 8;
  p.schemaMinor = 17;
  p.torchVersion = "2.11.0";
  p.ranges["s0"] = {2, 64};
  p.ranges["s1"] = {1, std::numeric_limits<int64_t>::max()};
  ir::Graph& g = p.graph;
  auto tensor = [&](const std::string& name, std::vector<ir::Dim> sizes,
                    ir::ScalarType dt = ir::ScalarType::Float) {
    ir::Value* v = *g.addValue(name, ir::ValueKind::Tensor);
    v->mutableType().dtype = dt;
    v->mutableType().strides.assign(sizes.size(), ir::Dim(1));  // one per dim, as the verifier asks
    v->mutableType().sizes = std::move(sizes);
    v->mutableType().device = {"cuda", 1};
    v->mutableType().requiresGrad = true;
    return v;
  };
  ir::Dim s0 = sym("Symbol('s0', positive=True, integer=True)", 8);
  ir::Dim s0x4 = sym("Mul(Integer(4), Symbol('s0', positive=True, integer=True))", 32);
  ir::Value* x = tensor("x", {s0, 16});
  ir::Value* w = tensor("p_w", {16, 16});
  ir::Value* buf = tensor("b_running", {16});
  ir::Value* n = *g.addValue("n", ir::ValueKind::SymInt);
  n->setSymValue(sym("Symbol('s1', positive=True, integer=True)", 3));
  for (ir::Value* v : {w, buf, x, n}) g.addInput(v);
  p.signature.inputs = {{ir::InputKind::Parameter, w, "w", true, {}, "p_w"},
                        {ir::InputKind::Buffer, buf, "running", false, {}, "b_running"},
                        {ir::InputKind::UserInput, x, "", true, {}, "x"},
                        {ir::InputKind::UserInput, n, "", true, {}, "n"},
                        {ir::InputKind::ConstantInput, nullptr, "", true, Argument::floating(0.5), "alpha"}};

  ir::Value* size = *g.addValue("sym_size_int", ir::ValueKind::SymInt);
  size->setSymValue(s0);
  (void)*g.addNode("sym_size_int", "aten.sym_size.int",
                   {{"self", Argument::tensor(x)}, {"dim", Argument::integer(0)}}, {Argument::symInt(size)});
  ir::Value* mul = *g.addValue("mul", ir::ValueKind::SymInt);
  mul->setSymValue(s0x4);
  (void)*g.addNode("mul", "_operator.mul",
                   {{"a", Argument::symInt(size)}, {"b", Argument::symInt(nullptr, 4)}},
                   {Argument::symInt(mul)});
  ir::Value* all = tensor("everything", {s0x4, 16});
  std::vector<ir::NamedArgument> in = everyArgumentKind(x, w, size, mul);
  ir::Node* node = *g.addNode("everything", "aten.everything.default", std::move(in),
                              {Argument::tensor(all), Argument::none()});
  node->mutableMetadata().stackTrace = "File \"/home/me/model.py\", line 3, in forward\n    return f(x)";
  node->mutableMetadata().nnModuleStack = "L__self__,,M";
  node->mutableMetadata().torchFn = "f;builtin.f";
  node->mutableMetadata().other["custom"] = "value";
  ir::Value* a = tensor("split_0", {16});
  ir::Value* b = tensor("split_1", {16});
  (void)*g.addNode("split", "aten.split.Tensor",
                   {{"self", Argument::tensor(buf)}, {"split_size", Argument::integer(8)}},
                   {Argument::tensors({a, b})});
  for (ir::Value* v : {all, a, b, w}) g.addOutput(Argument::tensor(v));
  g.addOutput(Argument::symInt(mul));
  p.signature.outputs = {{ir::OutputKind::UserOutput, Argument::tensor(all), ""},
                         {ir::OutputKind::BufferMutation, Argument::tensor(a), "running"},
                         {ir::OutputKind::LossOutput, Argument::tensor(b), ""},
                         {ir::OutputKind::GradientToParameter, Argument::tensor(w), "w"},
                         {ir::OutputKind::UserOutput, Argument::symInt(mul), ""}};
  return p;
}

namespace {

std::string roundTrip(const ir::ExportedProgram& p, ir::ExportedProgram* back = nullptr) {
  auto text = exportedProgramToJsonText(p);
  REQUIRE(text.hasValue());
  auto parsed = serialize::parseExportedProgram(*text, p.name);
  INFO(parsed.status().message());
  REQUIRE(parsed.hasValue());
  std::string printed = serialize::printProgram(*parsed);
  if (back) *back = std::move(*parsed);
  return printed;
}

TEST_CASE("srepr printing matches sympy and parses back", "[program][json]") {
  auto srepr = [](const std::string& text) { return symExprSrepr(*sym(text, 1).expr()); };
  CHECK(srepr("Symbol('s52', positive=True, integer=True)") == "Symbol('s52', positive=True, integer=True)");
  CHECK(srepr("Mul(Integer(8), Symbol('s52'))") ==
        "Mul(Integer(8), Symbol('s52', positive=True, integer=True))");
  CHECK(srepr("Add(Integer(-1), Mul(Symbol('a'), Symbol('b')))") ==
        "Add(Integer(-1), Mul(Symbol('a', positive=True, integer=True), Symbol('b', positive=True, "
        "integer=True)))");
  CHECK(srepr("FloorDiv(Symbol('a'), Integer(2))") ==
        "FloorDiv(Symbol('a', positive=True, integer=True), Integer(2))");
  CHECK(srepr("Mod(Symbol('a'), Integer(2))") ==
        "PythonMod(Symbol('a', positive=True, integer=True), Integer(2))");
  CHECK(srepr("CeilingDiv(Symbol('a'), Integer(3))") ==
        "CeilDiv(Symbol('a', positive=True, integer=True), Integer(3))");
  for (const char* text : {"Max(Symbol('a'), Integer(3))", "Min(Symbol('a'), Pow(Symbol('b'), Integer(2)))",
                           "Add(Symbol('a'), FloorDiv(Mul(Integer(3), Symbol('b')), Integer(2)))"}) {
    ir::Dim d = sym(text, 5);
    ir::Dim back = sym(symExprSrepr(*d.expr()), 5);
    CHECK(back == d);
    CHECK(back.str() == d.str());
  }
  CHECK(symIntToJson(ir::Dim(64)).dump() == R"({"as_int":64})");
  CHECK(symIntToJson(sym("Symbol('s1')", 7)).dump() ==
        R"j({"as_expr":{"expr_str":"Symbol('s1', positive=True, integer=True)","hint":{"as_int":7}}})j");
}

TEST_CASE("floats are spelled as torch.export writes them", "[program][json]") {
  CHECK(floatToJson(std::numeric_limits<double>::infinity()).dump() == R"("Infinity")");
  CHECK(floatToJson(-std::numeric_limits<double>::infinity()).dump() == R"("-Infinity")");
  CHECK(floatToJson(std::nan("")).dump() == R"("NaN")");
  CHECK(floatToJson(0.1).dump() == "0.1");
  CHECK(floatToJson(1.0).dump() == "1.0");
  for (double v : {0.1 + 0.2, 1e-310, 6.02214076e23, -1.0 / 3.0})
    CHECK(Json::parse(floatToJson(v).dump()).get<double>() == v);
}

TEST_CASE("targets get torch.ops. back except Python and spmd ones", "[program][json]") {
  CHECK(exportTarget("aten.mm.default") == "torch.ops.aten.mm.default");
  CHECK(exportTarget("prims.convert_element_type.default") == "torch.ops.prims.convert_element_type.default");
  CHECK(exportTarget("_operator.mul") == "_operator.mul");
  CHECK(exportTarget("spmd.all_reduce") == "spmd.all_reduce");
}

TEST_CASE("every test model round-trips through the export JSON", "[program][json]") {
  testing::forEachModelProgram([](const ir::ExportedProgram& original) {
    ir::ExportedProgram back;
    CHECK(roundTrip(original, &back) == testing::withoutTies(serialize::printProgram(original)));
    // Metadata survives (from_node is dropped by the reader itself).
    REQUIRE(back.graph.nodes().size() == original.graph.nodes().size());
    for (size_t i = 0; i < original.graph.nodes().size(); ++i) {
      const auto& a = original.graph.nodes()[i]->metadata();
      const auto& b = back.graph.nodes()[i]->metadata();
      CHECK((a.stackTrace == b.stackTrace && a.nnModuleStack == b.nnModuleStack && a.torchFn == b.torchFn &&
             a.other == b.other));
    }
    // Serializing again gives the same text: the JSON is a function of the IR.
    CHECK(*exportedProgramToJsonText(back) == *exportedProgramToJsonText(original));
  });
}

TEST_CASE("the streamed text is what nlohmann prints for the same document", "[program][json]") {
  auto canonical = [](const std::string& text) {
    return Json::parse(text).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  for (const auto& path : testing::modelPaths()) {
    if (std::filesystem::file_size(path) > (1 << 20)) continue;  // the big ones add nothing but time
    INFO(path);
    auto archive = pt2::readArchive(path, {.loadWeights = false});
    REQUIRE(archive.hasValue());
    auto text = exportedProgramToJsonText(archive->program);
    REQUIRE(text.hasValue());
    CHECK(*text == canonical(*text));
  }
  auto text = exportedProgramToJsonText(everyKindProgram());
  REQUIRE(text.hasValue());
  CHECK(*text == canonical(*text));
}

TEST_CASE("a metadata key of 'other' naming a known field replaces its value", "[program][json]") {
  ir::ExportedProgram p = everyKindProgram();
  ir::NodeMetadata& md = p.graph.nodes()[2]->mutableMetadata();
  md.other["stack_trace"] = "from other";
  md.other["torch_fn"] = "";
  md.torchFn.clear();
  auto j = exportedProgramToJson(p);
  REQUIRE(j.hasValue());
  CHECK((*j)["graph_module"]["graph"]["nodes"][2]["metadata"].dump() ==
        R"({"stack_trace":"from other","nn_module_stack":"L__self__,,M","custom":"value","torch_fn":""})");
}

TEST_CASE("the real archive's node JSON is reproduced for plain nodes", "[program][json]") {
  auto archive =
      pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/mlp/model.pt2", {.loadWeights = false});
  REQUIRE(archive.hasValue());
  auto j = exportedProgramToJson(archive->program);
  REQUIRE(j.hasValue());
  const Json& node = (*j)["graph_module"]["graph"]["nodes"][0];
  CHECK(node["target"] == "torch.ops.aten.permute.default");
  CHECK(node["inputs"].dump() == R"([{"name":"self","arg":{"as_tensor":{"name":"p_fc1_weight"}},"kind":1},)"
                                 R"({"name":"dims","arg":{"as_ints":[1,0]},"kind":1}])");
  CHECK(node["outputs"].dump() == R"([{"as_tensor":{"name":"permute"}}])");
  const Json& meta = (*j)["graph_module"]["graph"]["tensor_values"]["p_fc1_weight"];
  CHECK(meta.dump() == R"({"dtype":7,"sizes":[{"as_int":256},{"as_int":64}],"requires_grad":true,)"
                       R"("device":{"type":"cpu","index":null},"strides":[{"as_int":64},{"as_int":1}],)"
                       R"("storage_offset":{"as_int":0},"layout":7})");
  CHECK((*j)["graph_module"]["signature"]["input_specs"][0].dump() ==
        R"({"parameter":{"arg":{"name":"p_fc1_weight"},"parameter_name":"fc1.weight"}})");
}

TEST_CASE("a program with every argument kind round-trips", "[program][json]") {
  ir::ExportedProgram p = everyKindProgram();
  REQUIRE(p.graph.verify().isOk());
  ir::ExportedProgram back;
  std::string printed = serialize::printProgram(p);
  CHECK(roundTrip(p, &back) == printed);
  CHECK(printed.find("inf=inf, ninf=-inf, nan=nan") != std::string::npos);
  CHECK(printed.find("input alpha = 0.5 constant_input") != std::string::npos);
  CHECK(printed.find("non_persistent") != std::string::npos);
  const auto& meta = back.graph.nodes()[2]->metadata();
  CHECK(meta.torchFn == "f;builtin.f");
  CHECK(meta.other.at("custom") == "value");
  // Exact doubles, devices and requires_grad are kept.
  const ir::Node& n = *back.graph.nodes()[2];
  CHECK(n.input("floats")->floats == std::vector<double>{1e-310, -0.0, 3.141592653589793, 1e300});
  CHECK(std::signbit(n.input("floats")->floats[1]));
  CHECK(n.input("complex")->floats == std::vector<double>{1.5, -2.0});
  CHECK(n.input("lists")->listSizes == std::vector<int64_t>{2, 0, 1});
  CHECK(n.inputs().back().keyword);
  const ir::Value* x = back.graph.findValue("x");
  CHECK(x->type().device == ir::Device{"cuda", 1});
  CHECK(x->type().requiresGrad);
  CHECK(x->type().sizes[0].str() == "s0");
  CHECK(back.graph.findValue("mul")->symValue().value() == 32);
  CHECK(back.ranges.at("s1").max == std::numeric_limits<int64_t>::max());
}

TEST_CASE("inputs that do not line up with the signature are an error", "[program][json]") {
  ir::ExportedProgram p = everyKindProgram();
  std::swap(p.signature.inputs[0], p.signature.inputs[1]);
  auto j = exportedProgramToJson(p);
  REQUIRE_FALSE(j.hasValue());
  CHECK(j.status().message() == "signature input 'b_running' does not line up with graph input 0");
}

}  // namespace
}  // namespace spmd::program
