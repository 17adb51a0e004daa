// The streaming JSON writer against nlohmann's serializer: string escaping
// (including invalid UTF-8), number spelling, commas and nesting.
//
//   appendJsonString("a\"b\n\xff") == json("a\"b\n\xff").dump(-1, ' ', false, replace)
#include "../TestCatch.h"

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "serialize/JsonWriter.h"

namespace spmd::serialize {
namespace {

using Ordered = nlohmann::ordered_json;

std::string nlohmannDump(const Ordered& j) {
  return j.dump(-1, ' ', false, Ordered::error_handler_t::replace);
}

std::string jsonString(std::string_view s) {
  std::string out;
  appendJsonString(out, s);
  return out;
}

std::string jsonNumber(double v) {
  std::string out;
  appendJsonNumber(out, v);
  return out;
}

TEST_CASE("strings are escaped as nlohmann escapes them", "[program][jsonwriter]") {
  CHECK(jsonString("") == R"("")");
  CHECK(jsonString("plain text") == R"("plain text")");
  CHECK(jsonString("a\"b\\c\n\t\r\b\f") == R"("a\"b\\c\n\t\r\b\f")");
  CHECK(jsonString(std::string_view("\x00\x01\x1f\x7f", 4)) == "\"\\u0000\\u0001\\u001f\x7f\"");
  CHECK(jsonString("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  // Invalid UTF-8: each maximal invalid prefix becomes U+FFFD.
  CHECK(jsonString("a\xff!") == "\"a\xef\xbf\xbd!\"");
  CHECK(jsonString("\xe2\x82") == "\"\xef\xbf\xbd\"");
  CHECK(jsonString("\xe2\x82x") == "\"\xef\xbf\xbdx\"");
  CHECK(jsonString("\xed\xa0\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  CHECK(jsonString("\xc0\xaf") == "\"\xef\xbf\xbd\xef\xbf\xbd\"");                  // overlong
  // Long runs take the 8-bytes-at-a-time path; specials at every offset.
  std::string longText(37, 'x');
  for (size_t i = 0; i < longText.size(); ++i)
    for (const char* special : {"\"", "\\", "\n", "\x01", "\xc3\xa9", "\xff"}) {
      std::string s = longText;
      s.replace(i, 1, special);
      INFO(i << " " << special);
      CHECK(jsonString(s) == nlohmannDump(Ordered(s)));
    }
}

TEST_CASE("random byte strings are escaped as nlohmann escapes them", "[program][jsonwriter]") {
  // clang-format off
  const std::vector<std::string> pieces = {
      "a",        "Z",        " ",        "~",        "\"",       "\\",        "\n",    "\t",    "\x01",
      "\x1f",     "\x7f",     "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\x80",
      "\xbf",     "\xc0",     "\xc1",     "\xc2",     "\xe0",     "\xe0\x80",  "\xe0\xa0", "\xed\xa0",
      "\xee",     "\xef\xbf", "\xf0",     "\xf0\x8f", "\xf0\x90", "\xf4\x90",  "\xf5",  "\xff",
      "abcdefgh", "stack_trace line 12"};
  // clang-format on
  std::mt19937 rng(12345);
  for (int n = 0; n < 5000; ++n) {
    std::string s;
    int parts = static_cast<int>(rng() % 12);
    for (int p = 0; p < parts; ++p) s += pieces[rng() % pieces.size()];
    INFO(nlohmannDump(Ordered(s)));
    REQUIRE(jsonString(s) == nlohmannDump(Ordered(s)));
  }
}

TEST_CASE("numbers read back exactly and are laid out as nlohmann lays them out", "[program][jsonwriter]") {
  CHECK(jsonNumber(0.0) == "0.0");
  CHECK(jsonNumber(-0.0) == "-0.0");
  CHECK(jsonNumber(1.0) == "1.0");
  CHECK(jsonNumber(-2.5) == "-2.5");
  CHECK(jsonNumber(0.1) == "0.1");
  CHECK(jsonNumber(0.0001) == "0.0001");
  CHECK(jsonNumber(1e-5) == "1e-05");
  CHECK(jsonNumber(1e14) == "100000000000000.0");
  CHECK(jsonNumber(1e15) == "1e+15");
  CHECK(jsonNumber(123456789012345.0) == "123456789012345.0");
  CHECK(jsonNumber(1234567890123456.0) == "1.234567890123456e+15");
  CHECK(jsonNumber(1e300) == "1e+300");
  CHECK(jsonNumber(1e-310) == "1e-310");
  CHECK(jsonNumber(123456.789) == "123456.789");
  CHECK(jsonNumber(6.02214076e23) == "6.02214076e+23");
  CHECK(jsonNumber(std::numeric_limits<double>::infinity()) == "null");
  CHECK(jsonNumber(std::nan("")) == "null");
  std::vector<double> values = {DBL_MAX,
                                -DBL_MAX,
                                DBL_MIN,
                                DBL_TRUE_MIN,
                                0.1 + 0.2,
                                1.0 / 3.0,
                                3.141592653589793,
                                1e-4,
                                1e14,
                                1e15,
                                1e16,
                                1234567890123456.0,
                                9.999999999999999e14,
                                1e21,
                                123e-20,
                                5e-324,
                                4.35,
                                2.0 / 3.0 * 1e10};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    if (std::isfinite(v)) values.push_back(v);
    values.push_back(static_cast<double>(static_cast<int64_t>(rng() % 2000000) - 1000000) / 1000.0);
  }
  int differ = 0;
  for (double v : values) {
    std::string ours = jsonNumber(v);
    std::string theirs = nlohmannDump(Ordered(v));
    INFO(ours << " vs nlohmann " << theirs);
    // Reads back to the same double, with a '.' or an exponent.
    double back = 0;
    auto [ptr, ec] = std::from_chars(ours.data(), ours.data() + ours.size(), back);
    REQUIRE(ec == std::errc());
    REQUIRE(ptr == ours.data() + ours.size());
    REQUIRE(std::memcmp(&back, &v, sizeof v) == 0);
    REQUIRE(ours.find_first_of(".e") != std::string::npos);
    // Same spelling, except where Grisu2 takes more digits than needed or
    // is not the closest of the shortest (both read back exactly).
    if (ours != theirs) {
      ++differ;
      CHECK(ours.size() <= theirs.size());
      CHECK(Ordered::parse(theirs).get<double>() == v);
    }
  }
  CHECK(differ < static_cast<int>(values.size()) / 100);
}

TEST_CASE("the writer places commas and colons like nlohmann's dump", "[program][jsonwriter]") {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  w.key("empty_object").beginObject().endObject();
  w.key("empty_array").beginArray().endArray();
  w.key("ints").integers({1, -2, std::numeric_limits<int64_t>::min()});
  w.key("big").unsignedInteger(std::numeric_limits<uint64_t>::max());
  w.key("strings").strings({"a", "b\"c"});
  w.key("nested").beginArray().beginObject().key("x").null().key("y").boolean(false).endObject();
  w.beginArray().endArray().beginArray().number(0.5).boolean(true).endArray().endArray();
  w.key("quoted \"key\"").string("v");
  w.endObject();

  Ordered expected = Ordered::object();
  expected["empty_object"] = Ordered::object();
  expected["empty_array"] = Ordered::array();
  expected["ints"] = {1, -2, std::numeric_limits<int64_t>::min()};
  expected["big"] = std::numeric_limits<uint64_t>::max();
  expected["strings"] = {"a", "b\"c"};
  expected["nested"] =
      Ordered::array({Ordered{{"x", nullptr}, {"y", false}}, Ordered::array(), Ordered::array({0.5, true})});
  expected["quoted \"key\""] = "v";
  CHECK(out == nlohmannDump(expected));
  CHECK(w.text() == out);
}

TEST_CASE("keys and strings are spelled the same whatever their length and position",
          "[program][jsonwriter]") {
  // Short plain keys and strings take one append with their comma; long or
  // escaped ones take appendJsonString: both must spell them as nlohmann.
  std::string out;
  JsonWriter w(out);
  Ordered expected = Ordered::object();
  w.beginObject();
  for (size_t n : {0, 1, 7, 8, 95, 96, 97, 200}) {
    for (const char* tail : {"", "\"", "\xc3\xa9", "\xff"}) {
      std::string k = std::string(n, 'k') + tail + std::to_string(n);
      std::string v = std::string(n, 'v') + tail;
      w.key(k).string(v);
      expected[k] = v;
    }
  }
  w.key("items").beginArray().string("a").integer(-7).unsignedInteger(7).string("b").endArray();
  expected["items"] = {"a", -7, 7, "b"};
  w.endObject();
  CHECK(out == nlohmannDump(expected));
}

TEST_CASE("json() writes a fragment as the next value, with its comma", "[program][jsonwriter]") {
  std::string out;
  JsonWriter w(out);
  std::string longFragment = "[" + std::string(70, '1') + "]";
  w.beginArray().json(R"({"as_int":1})").json(R"({"as_int":2})").json(longFragment).integer(3).endArray();
  CHECK(out == R"([{"as_int":1},{"as_int":2},)" + longFragment + ",3]");
  std::string obj;
  JsonWriter o(obj);
  o.beginObject().key("a").json("null").key("b").json("[]").endObject();
  CHECK(obj == R"({"a":null,"b":[]})");
}

TEST_CASE("the writer appends to what the string holds", "[program][jsonwriter]") {
  std::string out = "prefix:";
  JsonWriter w(out);
  w.beginArray().integer(1).integer(2).endArray();
  CHECK(out == "prefix:[1,2]");
}

}  // namespace
}  // namespace spmd::serialize
