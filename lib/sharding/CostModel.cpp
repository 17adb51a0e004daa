// Alpha-beta costs of collectives (formulas at the top of CostModel.h).
//
//   CostModel cm;  // alpha 10 us, 100 GB/s
//   cm.cost(AllReduce, 0, 4, 4e6, 4e6)      == 10e-6 + 6e6 / 100e9
//   cm.cost(ReduceScatter, 0, 4, 4e6, 1e6)  == 10e-6 + 3e6 / 100e9  (cheaper)
//
// Invariants: every cost is >= 0; a collective costs at least alpha more than
// any local step of the same size; a group of one rank costs 0.
#include "sharding/CostModel.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace spmd::sharding {

std::string_view collectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::AllToAll:
      return "all_to_all";
    case CollectiveKind::LocalSlice:
      return "local_slice";
    case CollectiveKind::ZeroPartial:
      return "zero_partial";
    case CollectiveKind::MarkPartial:
      return "mark_partial";
    case CollectiveKind::ScalePartial:
      return "scale_partial";
  }
  return "?";
}

bool isLocalStep(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::LocalSlice:
    case CollectiveKind::ZeroPartial:
    case CollectiveKind::MarkPartial:
    case CollectiveKind::ScalePartial:
      return true;
    default:
      return false;
  }
}

CostModel::CostModel(LinkCost defaultLink, double localBytesPerSecond)
    : default_(defaultLink), localBytesPerSecond_(localBytesPerSecond) {
  SPMD_CHECK(defaultLink.alphaSeconds >= 0 && defaultLink.bytesPerSecond > 0);
  SPMD_CHECK(localBytesPerSecond > 0);
}

void CostModel::setAxisLink(int64_t axis, LinkCost link) {
  SPMD_CHECK(axis >= 0 && link.alphaSeconds >= 0 && link.bytesPerSecond > 0);
  if (axes_.size() <= static_cast<size_t>(axis)) axes_.resize(static_cast<size_t>(axis) + 1);
  axes_[static_cast<size_t>(axis)] = {true, link};
}

Status CostModel::setAxisLink(const Mesh& mesh, std::string_view name, LinkCost link) {
  int64_t axis = mesh.axisIndex(name);
  if (axis < 0)
    return Status::error("cost model names mesh axis '" + std::string(name) + "' but mesh " + mesh.str() +
                         " has no such axis: use one of its axis names");
  if (link.alphaSeconds < 0 || link.bytesPerSecond <= 0)
    return Status::error("link of mesh axis '" + std::string(name) + "' needs alpha >= 0 and bandwidth > 0");
  setAxisLink(axis, link);
  return Status::ok();
}

const LinkCost& CostModel::axisLink(int64_t axis) const {
  SPMD_CHECK(axis >= 0);
  if (static_cast<size_t>(axis) < axes_.size() && axes_[static_cast<size_t>(axis)].first)
    return axes_[static_cast<size_t>(axis)].second;
  return default_;
}

// num * bytes / den, saturated: a byte count that overflowed upstream
// (negative) or a product past int64 counts as the most bytes there are.
static int64_t scaledBytes(int64_t bytes, int64_t num, int64_t den) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (bytes < 0) bytes = kMax;
  __int128 v = static_cast<__int128>(num) * bytes / den;
  return v > kMax ? kMax : static_cast<int64_t>(v);
}

int64_t CostModel::bytesMoved(CollectiveKind kind, int64_t groupSize, int64_t bytesIn, int64_t bytesOut) {
  SPMD_CHECK(groupSize >= 1);
  int64_t n = groupSize;
  switch (kind) {
    case CollectiveKind::AllGather:
      return scaledBytes(bytesOut, n - 1, n);
    case CollectiveKind::ReduceScatter:
      return scaledBytes(bytesIn, n - 1, n);
    case CollectiveKind::AllReduce:
      return scaledBytes(bytesIn, 2 * (n - 1), n);
    case CollectiveKind::AllToAll:
      return scaledBytes(bytesIn, n - 1, n);
    default:
      return 0;
  }
}

double CostModel::cost(CollectiveKind kind, int64_t axis, int64_t groupSize, int64_t bytesIn,
                       int64_t bytesOut) const {
  if (groupSize == 1) return 0.0;
  if (isLocalStep(kind)) {
    // Bytes written locally: the slice copied out, the zeros or scaled values.
    double touched = kind == CollectiveKind::LocalSlice    ? static_cast<double>(bytesOut)
                     : kind == CollectiveKind::MarkPartial ? 0.0
                                                           : static_cast<double>(bytesIn);
    if (touched < 0)
      touched = static_cast<double>(std::numeric_limits<int64_t>::max());  // overflowed upstream
    return touched / localBytesPerSecond_;
  }
  const LinkCost& link = axisLink(axis);
  return link.alphaSeconds +
         static_cast<double>(bytesMoved(kind, groupSize, bytesIn, bytesOut)) / link.bytesPerSecond;
}

}  // namespace spmd::sharding
