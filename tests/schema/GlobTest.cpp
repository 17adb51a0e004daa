// Glob matching and "did you mean" suggestions.
//
//   globMatch("layers.*.wq.weight", "layers.10.wq.weight") -> true
//   suggestGlob("layers.*.wq.weigth", names)               -> "layers.*.wq.weight"
#include "../TestCatch.h"

#include <fnmatch.h>

#include <chrono>
#include <random>
#include <string>

#include "schema/Glob.h"

using spmd::schema::closestWord;
using spmd::schema::globDistance;
using spmd::schema::globMatch;
using spmd::schema::suggestGlob;

TEST_CASE("globMatch: star crosses dots, ? is one char, classes", "[glob]") {
  CHECK(globMatch("layers.*.wq.weight", "layers.0.wq.weight"));
  CHECK(globMatch("layers.*.wq.weight", "layers.10.wq.weight"));
  CHECK(globMatch("*weight", "model.layers.0.wq.weight"));
  CHECK(globMatch("*", "anything.at.all"));
  CHECK(globMatch("layers.?.w[13].weight", "layers.1.w3.weight"));
  CHECK_FALSE(globMatch("layers.?.w[13].weight", "layers.1.w2.weight"));
  CHECK_FALSE(globMatch("layers.?.wq.weight", "layers.10.wq.weight"));
  CHECK(globMatch("w[!o2].weight", "wq.weight"));
  CHECK_FALSE(globMatch("w[!o2].weight", "wo.weight"));
  CHECK(globMatch("input.0", "input.0"));
  CHECK_FALSE(globMatch("fc1.weight", "fc1.weight.extra"));
  CHECK(globMatch("a\\*b", "a*b"));
  CHECK_FALSE(globMatch("a\\*b", "axb"));
}

TEST_CASE("globMatch agrees with fnmatch on random small globs", "[glob]") {
  const std::vector<std::string> pieces = {"a", "b", "*", "?", "[ab]", "[!a]", "\\*", "**", "["};
  std::mt19937 rng(15);
  for (int n = 0; n < 20000; ++n) {
    std::string pattern, name;
    for (int k = static_cast<int>(rng() % 6); k > 0; --k) pattern += pieces[rng() % pieces.size()];
    for (int k = static_cast<int>(rng() % 7); k > 0; --k) name += "ab*["[rng() % 4];
    bool want = fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
    INFO("pattern '" << pattern << "', name '" << name << "'");
    REQUIRE(globMatch(pattern, name) == want);
  }
}

/// Seconds `f` takes.
template <typename F>
double secondsOf(F f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_CASE("globMatch is linear on a 10 MB glob", "[glob]") {
  std::string stars;  // "*a*a*a...*a*b": fnmatch backtracks over every star
  for (int i = 0; i < 5'000'000; ++i) stars += "*a";
  std::string name(200, 'a');
  double seconds = secondsOf([&] {
    CHECK_FALSE(globMatch(stars + "*b", name));
    CHECK(globMatch(stars.substr(0, 200) + "*", name + "b"));
    CHECK_FALSE(globMatch(std::string(10'000'000, '['), "[[["));
    CHECK(globMatch(std::string(1'000'000, '[') + "*", std::string(1'000'000, '[')));
  });
  CHECK(seconds < 2.0);
}

TEST_CASE("globDistance: wildcards are free, literals cost one edit", "[glob]") {
  CHECK(globDistance("layers.*.wq.weight", "layers.3.wq.weight") == 0);
  CHECK(globDistance("layers.*.wq.weigth", "layers.3.wq.weight") == 1);  // one swap
  CHECK(globDistance("fc1.weigh", "fc1.weight") == 1);
  CHECK(globDistance("fc3.weight", "fc1.weight") == 1);
  CHECK(globDistance("w[13].weight", "w2.weight") == 1);
}

TEST_CASE("suggestGlob keeps wildcards and fixes literals", "[glob]") {
  std::vector<std::string> names = {"tok.weight", "layers.0.wq.weight", "layers.1.wq.weight", "norm.weight"};
  CHECK(suggestGlob("layers.*.wq.weigth", names) == std::optional<std::string>("layers.*.wq.weight"));
  CHECK(suggestGlob("layers.?.wq.wieght", names) == std::optional<std::string>("layers.?.wq.weight"));
  CHECK(suggestGlob("tok.weights", names) == std::optional<std::string>("tok.weight"));
  CHECK(suggestGlob("layer.*.wq.weight", names) == std::optional<std::string>("layers.*.wq.weight"));
}

TEST_CASE("suggestGlob gives nothing when no name is close or one matches", "[glob]") {
  std::vector<std::string> names = {"fc1.weight", "fc1.bias"};
  CHECK_FALSE(suggestGlob("encoder.block.*.attention", names).has_value());
  CHECK_FALSE(suggestGlob("fc1.*", names).has_value());
  CHECK_FALSE(suggestGlob("x", {}).has_value());
}

TEST_CASE("suggested globs escape special characters of the name", "[glob]") {
  CHECK(suggestGlob("a*b", {"a*c"}) == std::optional<std::string>("a*c"));
  CHECK(suggestGlob("ab", {"a?"}) == std::optional<std::string>("a\\?"));
}

TEST_CASE("closestWord suggests near axis and key names only", "[glob]") {
  CHECK(closestWord("tpp", {"dp", "tp"}) == std::optional<std::string>("tp"));
  CHECK(closestWord("mathc", {"match", "placements", "optional"}) == std::optional<std::string>("match"));
  CHECK_FALSE(closestWord("pipeline", {"dp", "tp"}).has_value());
}
