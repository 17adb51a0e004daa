// Parsing schema text in tests: the schema, or the error it is refused with.
//
//   CHECK(parsedSchema(R"({"version": 1})").params.empty());
//   CHECK_THAT(parseError(R"({"version": 2})"), Catch::Contains("version"));
#pragma once

#include <string>

#include "../TestCatch.h"
#include "schema/PlacementSchema.h"

namespace spmd::schema::test {

/// The schema `text` parses into as "s.json"; fails the test if it does not.
inline PlacementSchema parsedSchema(const std::string& text) {
  auto s = parsePlacementSchema(text, "s.json");
  INFO(s.status().message());
  REQUIRE(s.hasValue());
  return std::move(s).value();
}

/// The error message of parsing `text` as "s.json"; fails the test if it parses.
inline std::string parseError(const std::string& text) {
  auto s = parsePlacementSchema(text, "s.json");
  REQUIRE_FALSE(s.hasValue());
  return s.status().message();
}

}  // namespace spmd::schema::test
