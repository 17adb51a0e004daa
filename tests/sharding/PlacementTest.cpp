// Placements, meshes and shard geometry.
//
//   parsePlacement("S(-1)") -> S(-1); Mesh::parseShape("2x4") -> {2, 4};
//   chunkOf(5, 4, i) -> sizes 2, 2, 1, 0; localShape({16}, [S(0), S(0)]) -> {2}
#include "../TestCatch.h"

#include "sharding/Placement.h"

using namespace spmd::sharding;

namespace {

Placement parsed(std::string_view text) {
  auto p = parsePlacement(text);
  INFO(text << ": " << p.status().message());
  REQUIRE(p.hasValue());
  return *p;
}

ShardingSpec spec(std::initializer_list<const char*> texts) {
  ShardingSpec s;
  for (const char* t : texts) s.placements.push_back(parsed(t));
  return s;
}

}  // namespace

TEST_CASE("parsePlacement accepts every form, whitespace tolerant", "[placement]") {
  CHECK(parsed("R") == Placement::replicate());
  CHECK(parsed("S(0)") == Placement::shard(0));
  CHECK(parsed("S(-1)") == Placement::shard(-1));
  CHECK(parsed("  S ( 12 ) ") == Placement::shard(12));
  CHECK(parsed("P") == Placement::partial(ReduceOp::Sum));
  CHECK(parsed("P(sum)") == Placement::partial(ReduceOp::Sum));
  CHECK(parsed("P(avg)") == Placement::partial(ReduceOp::Avg));
  CHECK(parsed(" P( max ) ") == Placement::partial(ReduceOp::Max));
  CHECK(parsed("P(min)") == Placement::partial(ReduceOp::Min));
  CHECK(parsed("\tR\n") == Placement::replicate());
}

TEST_CASE("parsePlacement refuses malformed text with a clear message", "[placement]") {
  for (const char* bad :
       {"", "X", "RR", "S", "S()", "S(a)", "S(1", "S(1)x", "P(prod)", "P()", "r", "S(1.5)"}) {
    auto p = parsePlacement(bad);
    INFO("'" << bad << "'");
    REQUIRE_FALSE(p.hasValue());
    CHECK(p.status().message() ==
          "invalid placement '" + std::string(bad) + "': expected R, S(<dim>), P, or P(sum|avg|max|min)");
  }
}

TEST_CASE("Placement and ShardingSpec print and round-trip", "[placement]") {
  for (const char* text : {"R", "S(0)", "S(-1)", "P(sum)", "P(avg)", "P(max)", "P(min)"})
    CHECK(parsed(text).str() == text);
  CHECK(reduceOpName(ReduceOp::Avg) == "avg");
  ShardingSpec s = spec({"S(0)", "R", "P(max)"});
  CHECK(s.str() == "[S(0), R, P(max)]");
  CHECK(s.hasPartial());
  CHECK_FALSE(s.isReplicated());
  CHECK(s.shardsDim(0));
  CHECK_FALSE(s.shardsDim(1));
  CHECK(ShardingSpec::replicated(3).isReplicated());
  CHECK(ShardingSpec::replicated(3).str() == "[R, R, R]");
  CHECK_FALSE(ShardingSpec::replicated(2).hasPartial());
}

TEST_CASE("Mesh::parseShape", "[mesh]") {
  CHECK(*Mesh::parseShape("8") == std::vector<int64_t>{8});
  CHECK(*Mesh::parseShape("2x4") == std::vector<int64_t>{2, 4});
  CHECK(*Mesh::parseShape("2x2x2") == std::vector<int64_t>{2, 2, 2});
  CHECK(*Mesh::parseShape(" 2 x 4 ") == std::vector<int64_t>{2, 4});
  for (const char* bad : {"0", "2x", "x2", "abc", "", "2x0", "-2", "2xx4", "2*4", "99999999999999999999"}) {
    auto s = Mesh::parseShape(bad);
    INFO("'" << bad << "'");
    REQUIRE_FALSE(s.hasValue());
    CHECK(s.status().message() == "invalid mesh shape '" + std::string(bad) +
                                      "': expected positive sizes joined by 'x', e.g. 8 or 2x4");
  }
}

TEST_CASE("Mesh::create names axes and refuses bad meshes", "[mesh]") {
  Mesh m1 = *Mesh::create({8});
  CHECK(m1.axisNames() == std::vector<std::string>{"x"});
  CHECK(m1.str() == "8 (x)");
  Mesh m2 = *Mesh::create({2, 4});
  CHECK(m2.axisNames() == std::vector<std::string>{"d0", "d1"});
  Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
  CHECK(m.numAxes() == 2);
  CHECK(m.numRanks() == 8);
  CHECK(m.size(1) == 4);
  CHECK(m.axisIndex("tp") == 1);
  CHECK(m.axisIndex("pp") == -1);
  CHECK(m.str() == "2x4 (dp, tp)");
  CHECK(Mesh::create({2, 0}).status().message() == "mesh axis 1 has size 0: every mesh axis needs size >= 1");
  CHECK(Mesh::create({2, 4}, {"dp"}).status().message() ==
        "mesh has 2 axes but 1 axis names: give one name per axis");
  CHECK(Mesh::create({2, 4}, {"dp", "dp"}).status().message() ==
        "mesh axis name 'dp' is used twice: give every axis a distinct name");
  CHECK_FALSE(Mesh::create({}).hasValue());
  CHECK_FALSE(Mesh::create({2}, {""}).hasValue());
}

TEST_CASE("Mesh coords and rankAt are row-major inverses", "[mesh]") {
  Mesh m = *Mesh::create({2, 3, 4});
  CHECK(m.coords(0) == std::vector<int64_t>{0, 0, 0});
  CHECK(m.coords(1) == std::vector<int64_t>{0, 0, 1});
  CHECK(m.coords(4) == std::vector<int64_t>{0, 1, 0});
  CHECK(m.coords(23) == std::vector<int64_t>{1, 2, 3});
  CHECK(m.rankAt({1, 0, 2}) == 14);
  for (int64_t r = 0; r < m.numRanks(); ++r) CHECK(m.rankAt(m.coords(r)) == r);
}

TEST_CASE("chunkOf follows torch.chunk", "[chunk]") {
  auto sizes = [](int64_t n, int64_t parts) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < parts; ++i) out.push_back(chunkOf(n, parts, i).size);
    return out;
  };
  CHECK(sizes(5, 4) == std::vector<int64_t>{2, 2, 1, 0});
  CHECK(sizes(6, 4) == std::vector<int64_t>{2, 2, 2, 0});
  CHECK(sizes(8, 4) == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(sizes(10, 4) == std::vector<int64_t>{3, 3, 3, 1});
  CHECK(sizes(2, 4) == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(sizes(0, 3) == std::vector<int64_t>{0, 0, 0});
  CHECK(chunkOf(5, 4, 2) == Chunk{4, 1});
  CHECK(chunkOf(5, 4, 3) == Chunk{5, 0});
  // Chunks tile [0, n) in order for every n and parts.
  for (int64_t n = 0; n < 20; ++n)
    for (int64_t parts = 1; parts < 9; ++parts) {
      int64_t next = 0;
      for (int64_t i = 0; i < parts; ++i) {
        Chunk c = chunkOf(n, parts, i);
        CHECK(c.offset == next);
        CHECK(c.size >= 0);
        next += c.size;
      }
      CHECK(next == n);
    }
}

TEST_CASE("localShape and localChunks, nested axes split in axis order", "[chunk]") {
  Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
  CHECK(localShape({64, 128}, spec({"S(0)", "R"}), m, {1, 3}) == std::vector<int64_t>{32, 128});
  CHECK(localShape({64, 128}, spec({"S(0)", "S(1)"}), m, {1, 3}) == std::vector<int64_t>{32, 32});
  CHECK(localShape({64, 128}, spec({"P", "S(-1)"}), m, {0, 0}) == std::vector<int64_t>{64, 32});
  // dp splits 16 rows into halves, tp splits each half into 4.
  auto chunks = localChunks({16, 3}, spec({"S(0)", "S(0)"}), m, {1, 2});
  CHECK(chunks[0] == Chunk{12, 2});
  CHECK(chunks[1] == Chunk{0, 3});
  // dp coordinate 0 keeps rows [0, 8); tp coordinate 3 the last 2 of those.
  chunks = localChunks({16, 3}, spec({"S(0)", "S(0)"}), m, {0, 3});
  CHECK(chunks[0] == Chunk{6, 2});
  // Uneven: 10 rows over dp (5, 5), then 5 over tp (2, 2, 1, 0).
  std::vector<int64_t> sizes;
  for (int64_t r = 0; r < m.numRanks(); ++r)
    sizes.push_back(localShape({10}, spec({"S(0)", "S(0)"}), m, m.coords(r))[0]);
  CHECK(sizes == std::vector<int64_t>{2, 2, 1, 0, 2, 2, 1, 0});
  CHECK(localChunks({10}, spec({"S(0)", "S(0)"}), m, {1, 2})[0] == Chunk{9, 1});
}

TEST_CASE("localChunks of strided shards: runs, and later splits of them", "[chunk]") {
  // A fused [3*h] dim (q, k, v of h = 4 each) strided over tp: every rank
  // holds its piece of q, of k and of v.
  Mesh tp = *Mesh::create({2}, {"tp"});
  CHECK(localChunks({12}, spec({"S(0,sf=3)"}), tp, {1})[0] == (Chunk{2, 6, 3, 4}));
  CHECK(localShape({12}, spec({"S(0,sf=3)"}), tp, {1}) == std::vector<int64_t>{6});
  Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
  // dp strided in 4 rows of 4, tp then splits dp's 4 runs of 2: one run each.
  CHECK(localChunks({16}, spec({"S(0,sf=4)", "S(0)"}), m, {1, 3})[0] == (Chunk{14, 2, 1, 0}));
  // dp strided in 2 rows of 8 (runs of 4), tp splits those 8 into 4 pieces of 2 inside a run.
  CHECK(localChunks({16}, spec({"S(0,sf=2)", "S(0)"}), m, {0, 2})[0] == (Chunk{8, 2, 1, 0}));
  // dp strided in 2 rows of 1 (torch.chunk: rank 1 holds no row of each);
  // tp splits that empty piece into empty pieces (it divided by its run
  // length, 0: SIGFPE).
  CHECK(localChunks({2}, spec({"S(0,sf=2)", "S(0)"}), m, {1, 1})[0].size == 0);
  CHECK(localChunks({2}, spec({"S(0,sf=2)", "S(0)"}), m, {1, 0})[0].size == 0);
  // A strided shard over one rank is the whole dim.
  Mesh one = *Mesh::create({1, 2}, {"a", "b"});
  CHECK(localChunks({8}, spec({"S(0,sf=2)", "S(0)"}), one, {0, 1})[0] == (Chunk{4, 4, 1, 0}));
  // dp leaves 3 runs of 4; 4 pieces of 3 would straddle them: refused
  // before anything uses the layout.
  CHECK_THAT(checkEvenlyDivisible({24}, spec({"S(0,sf=3)", "S(0)"}), m).message(),
             Catch::Contains("would split the strided rows"));
  CHECK_THAT(checkEvenlyDivisible({12}, spec({"S(0,sf=4)", "R"}), m).message(),
             Catch::Contains("does not divide evenly over mesh axis 'dp' of size 2 in 4 rows"));
}

TEST_CASE("checkEvenlyDivisible names dim, size and axis", "[chunk]") {
  Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
  CHECK(checkEvenlyDivisible({16, 8}, spec({"S(0)", "S(1)"}), m).isOk());
  CHECK(checkEvenlyDivisible({16, 8}, spec({"S(0)", "S(0)"}), m).isOk());
  CHECK(checkEvenlyDivisible({3, 5}, spec({"P", "R"}), m).isOk());
  CHECK(checkEvenlyDivisible({10, 8}, spec({"R", "S(0)"}), m).message() ==
        "dim 0 of size 10 does not divide evenly over mesh axis 'tp' of size 4: "
        "shard it over axes whose sizes divide it, or pad it");
  CHECK(checkEvenlyDivisible({8, 7}, spec({"S(-1)", "R"}), m)
            .message()
            .starts_with("dim 1 of size 7 does not divide evenly over mesh axis 'dp' of size 2"));
  // 12 divides by 2 and by 4 but not by 8: the tp split of dp's 6-row chunk fails.
  CHECK(checkEvenlyDivisible({12}, spec({"S(0)", "S(0)"}), m)
            .message()
            .starts_with("dim 0 of size 12 (6 per shard after mesh axes 'dp') does not divide evenly over "
                         "mesh axis 'tp' of size 4"));
}

TEST_CASE("normalizeSpec checks counts and dims and canonicalizes", "[placement]") {
  Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
  auto n = normalizeSpec(spec({"S(-1)", "S(-2)"}), 3, m);
  REQUIRE(n.hasValue());
  CHECK(n->str() == "[S(2), S(1)]");
  CHECK(normalizeSpec(spec({"R"}), 2, m).status().message() ==
        "sharding [R] has 1 placements but mesh 2x4 (dp, tp) has 2 axes: give one placement per mesh axis");
  CHECK(normalizeSpec(spec({"R", "S(2)"}), 2, m).status().message() ==
        "placement S(2) on mesh axis 'tp' names no dim of a rank-2 tensor: use a dim in [-2, 2)");
  CHECK_FALSE(normalizeSpec(spec({"S(-3)", "R"}), 2, m).hasValue());
  ShardingSpec odd{
      {Placement{Placement::Kind::Replicate, 5, ReduceOp::Max}, Placement::partial(ReduceOp::Min)}};
  CHECK(*normalizeSpec(odd, 2, m) ==
        ShardingSpec{{Placement::replicate(), Placement::partial(ReduceOp::Min)}});
}

TEST_CASE("strided shards print and parse back") {
  using spmd::sharding::parsePlacement;
  using spmd::sharding::Placement;
  Placement p = Placement::stridedShard(1, 4);
  CHECK(p.str() == "S(1,sf=4)");
  auto q = parsePlacement("S(1,sf=4)");
  REQUIRE(q.hasValue());
  CHECK(*q == p);
  CHECK(parsePlacement("S(1)")->splitFactor == 1);
  CHECK_FALSE(parsePlacement("S(1,sf=0)").hasValue());
  CHECK_FALSE(parsePlacement("S(1,x=2)").hasValue());
}

TEST_CASE("uneven shards follow torch.chunk; nested ones split axis by axis", "[chunk][uneven]") {
  Mesh four = *Mesh::create({4}, {"tp"});
  auto sizesOn = [](const Mesh& m, std::vector<int64_t> global, const ShardingSpec& s) {
    std::vector<int64_t> out;
    for (int64_t r = 0; r < m.numRanks(); ++r) out.push_back(localShape(global, s, m, m.coords(r))[0]);
    return out;
  };
  CHECK(sizesOn(four, {5}, spec({"S(0)"})) == std::vector<int64_t>{2, 2, 1, 0});
  Mesh two = *Mesh::create({2}, {"dp"});
  CHECK(sizesOn(two, {3}, spec({"S(0)"})) == std::vector<int64_t>{2, 1});
  CHECK(sizesOn(two, {1}, spec({"S(0)"})) == std::vector<int64_t>{1, 0});
  Mesh eight = *Mesh::create({8}, {"tp"});
  CHECK(sizesOn(eight, {50257}, spec({"S(0)"})) ==
        std::vector<int64_t>{6283, 6283, 6283, 6283, 6283, 6283, 6283, 6276});
  // S(0) on both axes of a 2x2 mesh, 5 rows: 3 | 2, then 2 | 1 and 1 | 1 —
  // the nested split (2, 1, 1, 1), not the flat one (2, 2, 1, 0).
  Mesh m = *Mesh::create({2, 2}, {"dp", "tp"});
  CHECK(sizesOn(m, {5}, spec({"S(0)", "S(0)"})) == std::vector<int64_t>{2, 1, 1, 1});
  CHECK(localChunks({5}, spec({"S(0)", "S(0)"}), m, {1, 1})[0] == Chunk{4, 1});
  CHECK(pieceBefore({5}, spec({"S(0)", "S(0)"}), m, {1, 0}, 1) == std::vector<int64_t>{2});
  CHECK(pieceBefore({5}, spec({"S(0)", "S(0)"}), m, {0, 1}, 1) == std::vector<int64_t>{3});
}

TEST_CASE("checkShardable takes uneven plain and strided shards, refuses uneven splits of runs",
          "[chunk][uneven]") {
  Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
  CHECK(checkShardable({10, 8}, spec({"R", "S(0)"}), m).isOk());
  CHECK(checkShardable({5}, spec({"S(0)", "S(0)"}), m).isOk());
  CHECK(isUneven({10, 8}, spec({"R", "S(0)"}), m));
  CHECK_FALSE(isUneven({16, 8}, spec({"S(0)", "S(1)"}), m));
  // 4 rows of 3 (a [4, 3] view flattened), each split as torch.chunk: 2 | 1.
  CHECK(checkShardable({12}, spec({"S(0,sf=4)", "R"}), m).isOk());
  CHECK(isUneven({12}, spec({"S(0,sf=4)", "R"}), m));
  CHECK(localChunks({12}, spec({"S(0,sf=4)", "R"}), m, {0, 0})[0] == (Chunk{0, 8, 4, 3}));
  CHECK(localChunks({12}, spec({"S(0,sf=4)", "R"}), m, {1, 0})[0] == (Chunk{2, 4, 4, 3}));
  // 3 rows of 2 over 4 ranks: 1, 1, 0, 0 per row; the empty ranks hold none.
  CHECK(localChunks({6}, spec({"R", "S(0,sf=3)"}), m, {0, 1})[0] == (Chunk{1, 3, 3, 2}));
  CHECK(localShape({6}, spec({"R", "S(0,sf=3)"}), m, {0, 3}) == std::vector<int64_t>{0});
  CHECK(paddingElements({6}, spec({"R", "S(0,sf=3)"}), m) == 2 * 3 * 2);
  CHECK(checkShardable({12}, spec({"S(0,sf=5)", "R"}), m).message() ==
        "dim 0 of size 12 does not split into 5 equal rows for S(0,sf=5) on mesh axis 'dp': a strided shard "
        "views the dim as [sf, size / sf], so sf must divide it (a fused weight of k parts has k * n rows: "
        "sf=k); the mesh axis need not divide it");
  CHECK_THAT(checkShardable({24}, spec({"S(0,sf=3)", "S(0)"}), m).message(),
             Catch::Contains("would split the strided rows"));
  // Rows split unevenly by dp cannot be split again.
  CHECK(checkShardable({12}, spec({"S(0,sf=4)", "S(0)"}), m).message() ==
        "dim 0 of size 12 (8 per shard after mesh axes 'dp'): S(0) on mesh axis 'tp' would split rows that "
        "earlier axes split unevenly (ranks' pieces differ); shard that dim on fewer axes, or on axes whose "
        "sizes divide it");
  CHECK_FALSE(checkShardable({10}, spec({"S(0)", "S(0,sf=2)"}), m).isOk());
}

TEST_CASE("paddingElements: what padding every shard to the largest adds", "[chunk][uneven]") {
  Mesh four = *Mesh::create({4}, {"tp"});
  // Rows 2, 2, 1, 0 of 8 columns: padded to 2 rows, 1 + 2 rows of padding.
  CHECK(paddingElements({5, 8}, spec({"S(0)"}), four) == 3 * 8);
  CHECK(paddingElements({8, 8}, spec({"S(0)"}), four) == 0);
  Mesh m = *Mesh::create({2, 2}, {"dp", "tp"});
  CHECK(paddingElements({5}, spec({"S(0)", "S(0)"}), m) == 3);
}
