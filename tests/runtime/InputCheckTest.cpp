// Input names: the one rule both spmd-run paths (one device, -n N) apply to
// the tensors of an --inputs file.
//
//   checkInputNames({"input.0", "extra"}, {"x"})
//   -> "unknown input 'extra'; the program takes input.0 (x)"
#include "runtime/InputCheck.h"  // before Catch2: c10's logging defines a CHECK Catch must replace

#include <string>
#include <vector>

#include "../TestCatch.h"

using spmd::runtime::checkInputNames;

TEST_CASE("checkInputNames accepts indices and signature names", "[runtime][inputs]") {
  CHECK(checkInputNames({"input.0", "y"}, {"x", "y"}).isOk());
  CHECK(checkInputNames({"x"}, {"x", "y"}).isOk());  // a missing input is the next check's
  CHECK(checkInputNames({}, {}).isOk());
}

TEST_CASE("checkInputNames refuses an unknown tensor, naming what the program takes", "[runtime][inputs]") {
  CHECK(checkInputNames({"input.0", "input.1", "extra"}, {"tokens", "labels"}).message() ==
        "unknown input 'extra'; the program takes input.0 (tokens), input.1 (labels)");
  CHECK(checkInputNames({"input.1"}, {"tokens"}).message() ==
        "unknown input 'input.1'; the program takes input.0 (tokens)");
  CHECK(checkInputNames({"x"}, {}).message() == "unknown input 'x'; the program takes none");
  CHECK(checkInputNames({std::string(1000, 'n')}, {"x"}).message() ==
        "unknown input '" + std::string(80, 'n') + "... (1,000 characters)'; the program takes input.0 (x)");
}

TEST_CASE("checkInputNames refuses one input given twice", "[runtime][inputs]") {
  CHECK(checkInputNames({"input.0", "tokens"}, {"tokens"}).message() ==
        "input 'tokens' is given twice, as 'input.0' and 'tokens'");
}
