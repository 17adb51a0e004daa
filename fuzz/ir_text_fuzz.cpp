// Fuzzes the IR text parser (serialize::parseProgram): any input is an error or a
// program, never a crash; and a program it accepts prints to text that
// parses back to the same text (the printer and parser agree).
//
//   build-fuzz/fuzz/ir_text_fuzz corpus/ir_text   # seeds: testdata/golden/ir, tests/lit
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ir/Graph.h"
#include "serialize/FromText.h"
#include "serialize/ToText.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p =
      spmd::serialize::parseProgram(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.ir");
  if (!p.hasValue()) return 0;
  const spmd::serialize::PrintOptions debug{.debugInfo = true};
  const std::string text = spmd::serialize::printProgram(*p, debug);
  auto again = spmd::serialize::parseProgram(text, "printed.ir");
  if (!again.hasValue() || spmd::serialize::printProgram(*again, debug) != text) std::abort();
  return 0;
}
