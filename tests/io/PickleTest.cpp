// Tests of io::readPickle / io::writePickle on pickles Python wrote, and of
// the DCP metadata layer (runtime/DcpMetadata, no LibTorch) on a real
// `.metadata` torch 2.14.1 wrote (testdata/dcp/tiny.metadata: dcp.save of
// {"model": {"w": arange(6).reshape(2, 3) f32, "b": ones(3) bf16},
//  "optim": {"state": {"w": {"step": tensor(3.)}}, "param_groups": [{"lr": 0.5, "params": ["w"]}]}}).
//
//   readPickle(pickle.dumps({"a": [1, ...]}, protocol=4)) -> Dict{Str "a": List[Int 1, ...]}
#include <string>
#include "../TestCatch.h"

#include "../TestUtil.h"
#include "io/Pickle.h"
#include "runtime/DcpMetadata.h"

namespace spmd::io {
namespace {

using Kind = PyValue::Kind;

// pickle.dumps(obj, protocol=p) for p = 3, 4 of
// obj = {"a": [1, -2, 3.5, None, True, "é", b"xy", (1, 2, 3, 4), 2**40, -2**63, 300, 70000, -1]};
// obj["again"] = obj["a"]   (a memo reference)
const std::string kProto3(
    "\x80\x03\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x47"
    "\x40\x0c\x00\x00\x00\x00\x00\x00\x4e\x88\x58\x02\x00\x00\x00\xc3\xa9\x71\x03\x43\x02\x78\x79\x71\x04\x28"
    "\x4b\x01\x4b\x02\x4b\x03\x4b\x04\x74\x71\x05\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00"
    "\x00\x00\x80\x4d\x2c\x01\x4a\x70\x11\x01\x00\x4a\xff\xff\xff\xff\x65\x58\x05\x00\x00\x00\x61\x67\x61\x69"
    "\x6e\x71\x06\x68\x02\x75\x2e",
    129);
const std::string kProto4(
    "\x80\x04\x95\x5d\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x4a\xfe\xff"
    "\xff\xff\x47\x40\x0c\x00\x00\x00\x00\x00\x00\x4e\x88\x8c\x02\xc3\xa9\x94\x43\x02\x78\x79\x94\x28\x4b\x01"
    "\x4b\x02\x4b\x03\x4b\x04\x74\x94\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
    "\x4d\x2c\x01\x4a\x70\x11\x01\x00\x4a\xff\xff\xff\xff\x65\x8c\x05\x61\x67\x61\x69\x6e\x94\x68\x02\x75"
    "\x2e",
    104);

std::string errorOf(const std::string& bytes) {
  auto v = readPickle(bytes, "x.pkl");
  return v ? "" : v.status().message();
}

void checkSample(const PyRef& root, bool shared) {
  REQUIRE(root->kind == Kind::Dict);
  REQUIRE(root->entries.size() == 2);
  PyRef a = root->get("a");
  REQUIRE(a);
  REQUIRE(a->kind == Kind::List);
  REQUIRE(a->items.size() == 13);
  CHECK(a->items[0]->integer == 1);
  CHECK(a->items[1]->integer == -2);
  CHECK(a->items[2]->real == 3.5);
  CHECK(a->items[3]->kind == Kind::None);
  CHECK(a->items[4]->boolean);
  CHECK(a->items[5]->text == "\xc3\xa9");
  CHECK(a->items[6]->kind == Kind::Bytes);
  CHECK(a->items[6]->text == "xy");
  CHECK(a->items[7]->kind == Kind::Tuple);
  CHECK(a->items[7]->items.size() == 4);
  CHECK(a->items[8]->integer == (int64_t{1} << 40));
  CHECK(a->items[9]->integer == INT64_MIN);
  CHECK(a->items[10]->integer == 300);
  CHECK(a->items[11]->integer == 70000);
  CHECK(a->items[12]->integer == -1);
  if (shared) CHECK(root->get("again") == a);  // the memo shares the node
  CHECK(samePyValue(*root->get("again"), *a));
}

TEST_CASE("readPickle reads what Python's pickle writes (protocols 3 and 4)") {
  for (const std::string* bytes : {&kProto3, &kProto4}) {
    auto v = readPickle(*bytes, "x.pkl");
    REQUIRE(v);
    checkSample(*v, true);
  }
}

TEST_CASE("writePickle round-trips through readPickle") {
  auto v = readPickle(kProto4, "x.pkl");
  REQUIRE(v);
  auto out = writePickle(**v);
  REQUIRE(out);
  auto again = readPickle(*out, "y.pkl");
  REQUIRE(again);
  checkSample(*again, false);  // the writer writes a shared node twice
  CHECK(samePyValue(**v, **again));
  PyRef obj = PyValue::object("torch", "Size", {PyValue::tuple({PyValue::ofInt(5), PyValue::ofInt(-70000)})},
                              false, PyValue::dict({{PyValue::str("k"), PyValue::ofFloat(0.25)}}));
  auto bytes = writePickle(*obj);
  REQUIRE(bytes);
  auto back = readPickle(*bytes, "z.pkl");
  REQUIRE(back);
  CHECK((*back)->isObject("torch", "Size"));
  CHECK(samePyValue(*obj, **back));
  // A class name with a newline (which GLOBAL's text lines cannot hold; found by dcp_metadata_fuzz).
  PyRef odd = PyValue::global("a\nb", "c\n");
  auto oddBytes = writePickle(*odd);
  REQUIRE(oddBytes);
  auto oddBack = readPickle(*oddBytes, "odd.pkl");
  REQUIRE(oddBack);
  CHECK(samePyValue(*odd, **oddBack));
}

TEST_CASE("readPickle refuses every truncation and malformed stream with an error") {
  for (size_t n = 0; n < kProto4.size(); ++n) {
    std::string e = errorOf(kProto4.substr(0, n));
    INFO("prefix of " << n << " bytes");
    CHECK(e.rfind("x.pkl: not a pickle this reader accepts: ", 0) == 0);
  }
  CHECK(errorOf("\x80\x04\xff.").find("opcode 0xff") != std::string::npos);
  CHECK(errorOf("h\x05.").find("memo key (5) never stored") != std::string::npos);
  CHECK(errorOf("R.").find("stack underflow") != std::string::npos);
  CHECK(errorOf(std::string("\x8a\x09"
                            "123456789.",
                            12))
            .find("beyond 64 bits") != std::string::npos);
  CHECK(errorOf("(K\x01K\x02.").find("STOP with") != std::string::npos);
  CHECK(errorOf("K\x01K\x02R.").find("a call of something other than a global") != std::string::npos);
  CHECK(errorOf("(K\x01"
                "a.")
            .find("stack underflow") != std::string::npos);  // no pop crosses a MARK
  // l = []; l.append(l): a cycle would leak, so it is refused.
  CHECK(errorOf(std::string("]\x94h\x00"
                            "a.",
                            6))
            .find("a value that contains itself") != std::string::npos);
}

TEST_CASE("writePickle refuses a cyclic tree") {
  PyRef l = PyValue::list({});
  l->items.push_back(l);
  CHECK_FALSE(writePickle(*l));
  l->items.clear();  // break the cycle so the node is freed
}

TEST_CASE("parseDcpMetadata reads torch 2.14.1's .metadata") {
  std::string bytes = spmd::testing::readBytes(std::string(SPMD_SOURCE_DIR) + "/testdata/dcp/tiny.metadata");
  auto md = runtime::parseDcpMetadata(bytes, "tiny.metadata");
  REQUIRE(md);
  REQUIRE(md->tensors.count("model.w"));
  const runtime::DcpTensor& w = md->tensors.at("model.w");
  CHECK(w.dtype == ir::ScalarType::Float);
  CHECK(w.size == std::vector<int64_t>{2, 3});
  REQUIRE(w.chunks.size() == 1);
  CHECK(w.chunks[0].offsets == std::vector<int64_t>{0, 0});
  CHECK(w.chunks[0].sizes == std::vector<int64_t>{2, 3});
  CHECK(w.chunks[0].storage.file == "__0_0.distcp");
  CHECK(w.chunks[0].storage.length > 0);
  CHECK(md->tensors.at("model.b").dtype == ir::ScalarType::BFloat16);
  CHECK(md->tensors.at("optim.state.w.step").size.empty());
  CHECK(md->bytes.count("optim.param_groups.0.lr"));
  // What formatDcpMetadata writes of it reads back the same.
  auto text = runtime::formatDcpMetadata(*md);
  REQUIRE(text);
  auto again = runtime::parseDcpMetadata(*text, "again.metadata");
  REQUIRE(again);
  CHECK(again->tensors.size() == md->tensors.size());
  CHECK(again->tensors.at("model.w").chunks[0].storage.offset == w.chunks[0].storage.offset);
}

TEST_CASE("parseDcpMetadata refuses what is not DCP or does not add up") {
  runtime::DcpMetadata md;
  md.tensors["w"] = {ir::ScalarType::Float, {4}, {{{0}, {2}, {"__0_0.distcp", 0, 10}}}};
  auto text = runtime::formatDcpMetadata(md);
  REQUIRE(text);
  auto half = runtime::parseDcpMetadata(*text, "m");
  REQUIRE_FALSE(half);
  CHECK(half.status().message().find("key 'w': its chunks hold 2 of its 4 elements") != std::string::npos);
  md.tensors["w"].chunks[0] = {{0}, {4}, {"../etc/passwd", 0, 10}};
  auto escape = runtime::parseDcpMetadata(*runtime::formatDcpMetadata(md), "m");
  REQUIRE_FALSE(escape);
  CHECK(escape.status().message().find("not a file name inside the checkpoint folder") != std::string::npos);
  auto notDcp = runtime::parseDcpMetadata(*writePickle(*PyValue::dict()), "m");
  REQUIRE_FALSE(notDcp);
  CHECK(notDcp.status().message().find("m: not a DCP checkpoint's metadata") == 0);
}

}  // namespace
}  // namespace spmd::io
