// Catch2 for every test: v2 (Debian 12's single header) or v3 (Debian 13's
// library), one spelling. Tests include this, never Catch2 directly.
//
//   CHECK_THAT(msg, Catch::Contains("not a zip"));   // both versions
//   CHECK(x == Approx(0.5));
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>

#include <string>

namespace Catch {
/// v2's name for v3's ContainsSubstring.
inline Matchers::StringContainsMatcher Contains(const std::string& s) {
  return Matchers::ContainsSubstring(s);
}
using Matchers::EndsWith;
using Matchers::StartsWith;
}  // namespace Catch
using Catch::Approx;
#define SPMD_CATCH2_MAJOR 3
#else
#include <catch2/catch.hpp>
#define SPMD_CATCH2_MAJOR 2
#endif
