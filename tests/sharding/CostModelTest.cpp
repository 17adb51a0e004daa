// The alpha-beta cost model.
//
//   all-gather over 4 ranks into 4 MiB moves 3 MiB per rank: 10 us + 3 MiB / 100 GB/s
#include "../TestCatch.h"

#include "sharding/CostModel.h"

using namespace spmd::sharding;
using K = CollectiveKind;

TEST_CASE("bytesMoved uses the ring formulas", "[cost]") {
  const int64_t mb = 1 << 20;
  CHECK(CostModel::bytesMoved(K::AllGather, 4, mb, 4 * mb) == 3 * mb);
  CHECK(CostModel::bytesMoved(K::ReduceScatter, 4, 4 * mb, mb) == 3 * mb);
  CHECK(CostModel::bytesMoved(K::AllReduce, 4, 4 * mb, 4 * mb) == 6 * mb);
  CHECK(CostModel::bytesMoved(K::AllToAll, 4, 4 * mb, 4 * mb) == 3 * mb);
  CHECK(CostModel::bytesMoved(K::AllReduce, 2, 100, 100) == 100);
  for (K local : {K::LocalSlice, K::ZeroPartial, K::MarkPartial, K::ScalePartial})
    CHECK(CostModel::bytesMoved(local, 4, 4 * mb, mb) == 0);
  CHECK(CostModel::bytesMoved(K::AllGather, 1, mb, mb) == 0);
}

TEST_CASE("cost is alpha plus bytes over bandwidth, per axis", "[cost]") {
  CostModel cm;
  CHECK(cm.axisLink(0).alphaSeconds == 10e-6);
  CHECK(cm.axisLink(5).bytesPerSecond == 100e9);
  CHECK(cm.cost(K::AllReduce, 0, 4, 4000000, 4000000) == Approx(10e-6 + 6e6 / 100e9));
  CHECK(cm.cost(K::ReduceScatter, 0, 4, 4000000, 1000000) == Approx(10e-6 + 3e6 / 100e9));
  cm.setAxisLink(1, {50e-6, 25e9});
  CHECK(cm.axisLink(1).alphaSeconds == 50e-6);
  CHECK(cm.axisLink(0).alphaSeconds == 10e-6);
  CHECK(cm.axisLink(2).alphaSeconds == 10e-6);
  CHECK(cm.cost(K::AllGather, 1, 2, 1000, 2000) == Approx(50e-6 + 1000 / 25e9));
  CHECK(cm.cost(K::AllGather, 0, 2, 1000, 2000) == Approx(10e-6 + 1000 / 100e9));
}

TEST_CASE("setAxisLink by name", "[cost]") {
  Mesh mesh = *Mesh::create({2, 4}, {"dp", "tp"});
  CostModel cm(LinkCost{5e-6, 200e9});
  REQUIRE(cm.setAxisLink(mesh, "dp", {40e-6, 12.5e9}).isOk());
  CHECK(cm.axisLink(0).bytesPerSecond == 12.5e9);
  CHECK(cm.axisLink(1).bytesPerSecond == 200e9);
  CHECK(cm.setAxisLink(mesh, "pp", {}).message() ==
        "cost model names mesh axis 'pp' but mesh 2x4 (dp, tp) has no such axis: use one of its axis names");
  CHECK_FALSE(cm.setAxisLink(mesh, "tp", {1e-6, 0}).isOk());
}

TEST_CASE("local steps are nearly free, never negative; a group of one is free", "[cost]") {
  CostModel cm;
  const int64_t big = int64_t{1} << 30;
  for (K local : {K::LocalSlice, K::ZeroPartial, K::MarkPartial, K::ScalePartial}) {
    double c = cm.cost(local, 0, 8, big, big / 8);
    CHECK(c >= 0.0);
    CHECK(c < cm.cost(K::AllGather, 0, 8, big / 8, big));
    CHECK(cm.cost(local, 0, 8, 64, 8) < cm.axisLink(0).alphaSeconds);
  }
  CHECK(cm.cost(K::MarkPartial, 0, 8, big, big) == 0.0);
  for (K kind : {K::AllGather, K::AllReduce, K::ReduceScatter, K::AllToAll, K::LocalSlice})
    CHECK(cm.cost(kind, 0, 1, big, big) == 0.0);
  CHECK(collectiveKindName(K::ReduceScatter) == "reduce_scatter");
  CHECK(isLocalStep(K::LocalSlice));
  CHECK_FALSE(isLocalStep(K::AllToAll));
}

TEST_CASE("reduce-scatter beats all-reduce plus slice", "[cost]") {
  CostModel cm;
  for (int64_t n : {2, 4, 8})
    for (int64_t bytes : {int64_t{64}, int64_t{1} << 20, int64_t{1} << 30}) {
      double rs = cm.cost(K::ReduceScatter, 0, n, bytes, bytes / n);
      double arSlice =
          cm.cost(K::AllReduce, 0, n, bytes, bytes) + cm.cost(K::LocalSlice, 0, n, bytes, bytes / n);
      CHECK(rs < arSlice);
    }
}
