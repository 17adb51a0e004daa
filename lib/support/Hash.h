// Hashes for memo keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spmd {

/// FNV-1a over the words of a key (std::unordered_map's Hash for
/// std::vector<uint64_t> keys).
struct WordsHash {
  size_t operator()(const std::vector<uint64_t>& k) const {
    uint64_t h = 1469598103934665603ULL;
    for (uint64_t x : k) h = (h ^ x) * 1099511628211ULL;
    return static_cast<size_t>(h);
  }
};

}  // namespace spmd
