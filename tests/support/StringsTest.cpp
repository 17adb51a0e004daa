// The text helpers of support/Strings.h: one shape form and one list join
// for every message, and the version both tools print.
#include <cstdint>
#include <string>
#include <vector>

#include "../TestCatch.h"
#include "support/FirstLine.h"
#include "support/Strings.h"
#include "support/Version.h"

using namespace spmd;

TEST_CASE("formatShape writes the IR's shape form") {
  CHECK(formatShape(std::vector<int64_t>{256, 64}) == "[256, 64]");
  CHECK(formatShape(std::vector<int64_t>{7}) == "[7]");
  CHECK(formatShape(std::vector<int64_t>{}) == "[]");
  CHECK(formatShape(std::vector<int64_t>{4, -1}) == "[4, -1]");
}

TEST_CASE("joined separates items, with nothing around them") {
  CHECK(joined(std::vector<std::string>{"dp", "tp"}) == "dp, tp");
  CHECK(joined(std::vector<std::string>{"a"}) == "a");
  CHECK(joined(std::vector<std::string>{}).empty());
  CHECK(joined(std::vector<std::string>{"a", "b", "c"}, " | ") == "a | b | c");
}

TEST_CASE("kVersion is CMake's project version") { CHECK(std::string(kVersion) == SPMD_PROJECT_VERSION); }

TEST_CASE("firstLine picks the first line with text, trimmed") {
  CHECK(firstLine("node failed\nException raised from x") == "node failed");
  // c10 messages may start with a newline: the line after it, not "".
  CHECK(firstLine("\nindex 9 is out of bounds for dimension 0 with size 4\nException raised from") ==
        "index 9 is out of bounds for dimension 0 with size 4");
  CHECK(firstLine("  \r\n\t\n  shape mismatch \r\nmore") == "shape mismatch");
  CHECK(firstLine("one line") == "one line");
  CHECK(firstLine("") == "");
  CHECK(firstLine("\n \n\t") == "");
}
