// How a symbolic dim splits: its trace-time size decides the program (see
// docs/DECISIONS.md, "A symbolic dim's trace-time size decides its program").
//
//   isEvenSymbolic(s77 (hint 32), 4)  -> true:  s77 // 4, checked at run time
//   isEvenSymbolic(s77 (hint 32), 3)  -> false: torch.chunk sizes of s77
#pragma once

#include <cstdint>

#include "ir/SymExpr.h"

namespace spmd::sharding {

/// True for a symbolic dim whose trace-time size divides by `k`: the program
/// assumes it divides at run time too (d // k, checked when inputs bind);
/// one whose trace-time size does not divide splits as torch.chunk. False
/// for static dims.
inline bool isEvenSymbolic(const ir::Dim& d, int64_t k) { return !d.isStatic() && d.value() % k == 0; }

}  // namespace spmd::sharding
