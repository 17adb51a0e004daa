// Fuzzes the IR text parser (ir::parseProgram): any input is an error or a
// program, never a crash; and a program it accepts prints to text that
// parses back to the same text (the printer and parser agree).
//
//   build-fuzz/fuzz/ir_text_fuzz corpus/ir_text   # seeds: testdata/golden/ir, tests/lit
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ir/Graph.h"
#include "ir/Parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = spmd::ir::parseProgram(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.ir");
  if (!p.hasValue()) return 0;
  const spmd::ir::PrintOptions debug{.debugInfo = true};
  const std::string text = spmd::ir::printProgram(*p, debug);
  auto again = spmd::ir::parseProgram(text, "printed.ir");
  if (!again.hasValue() || spmd::ir::printProgram(*again, debug) != text) std::abort();
  return 0;
}
