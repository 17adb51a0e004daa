// Fused CPU attention scratch for the memory estimate (see AttentionMemory.h).
#include "passes/AttentionMemory.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

namespace spmd::passes {
namespace {

constexpr std::string_view kForward = "aten._scaled_dot_product_flash_attention_for_cpu.default";
constexpr std::string_view kBackward = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default";

int64_t bytesOf(const ir::Value& v) {
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

// The kernel's blocks of one call: [b, h, s, d] query and key sizes.
struct Blocks {
  int64_t heads = 0;  // batch x heads: the kernel's parallel loop
  int64_t qSplit = 0, kvSplit = 0, head = 0;
};

Blocks blocksOf(const ir::Value& q, const ir::Value& k) {
  const auto& qs = q.type().sizes;
  const auto& ks = k.type().sizes;
  Blocks b;
  if (qs.size() != 4 || ks.size() != 4) return b;
  int64_t qLen = qs[2].value(), kvLen = ks[2].value();
  b.heads = qs[0].value() * qs[1].value();
  b.qSplit = std::min<int64_t>(qLen >= 768 ? 256 : qLen >= 192 ? 64 : 32, qLen);
  b.kvSplit = std::min<int64_t>(512, kvLen);
  b.head = qs[3].value();
  return b;
}

// grad_out seen as [b, s, h, d] (the kernel's transpose(1, 2)) is contiguous
// when it is a [0, 2, 1, 3] permute of a [b, s, h, d] tensor, the layout
// the forward's output and a reshaped projection gradient have.
bool gradOutContiguous(const ir::Value& g) {
  const ir::Node* p = g.producer();
  if (p == nullptr) return false;
  const ir::Argument* dims = p->input("dims");
  if (p->target() == "aten.permute.default" && dims != nullptr) {
    const auto& d = dims->ints;
    return d.size() == 4 && d[0] == 0 && d[1] == 2 && d[2] == 1 && d[3] == 3;
  }
  return false;
}

}  // namespace

int64_t attentionScratchBytes(const ir::Node& n, int threads) {
  bool backward = n.target() == kBackward;
  if (!backward && n.target() != kForward) return 0;
  const ir::Argument* qa = n.input("query");
  const ir::Argument* ka = n.input("key");
  if (qa == nullptr || ka == nullptr || qa->value() == nullptr || ka->value() == nullptr) return 0;
  const ir::Value& q = *qa->value();
  Blocks b = blocksOf(q, *ka->value());
  if (b.heads == 0) return 0;
  ir::ScalarType dtype = q.type().dtype;
  int64_t elt = ir::elementSize(dtype);
  int64_t accum = dtype == ir::ScalarType::Double ? 8 : 4;  // at::opmath_type
  bool reduced = dtype == ir::ScalarType::BFloat16 || dtype == ir::ScalarType::Half;
  int64_t t = std::max(1, threads);
  int64_t block = b.qSplit * b.kvSplit;
  if (!backward) {
    int64_t bytes = t * (block + 2 * b.qSplit + b.qSplit * b.head) * accum;
    if (dtype == ir::ScalarType::BFloat16) bytes += t * block * elt + 3 * bytesOf(q);
    return bytes;
  }
  int64_t bytes = t * 2 * block * (accum + (reduced ? elt : 0)) + std::min(t, b.heads) * b.qSplit * accum;
  const ir::Argument* g = n.input("grad_out");
  if (g != nullptr && g->value() != nullptr && !gradOutContiguous(*g->value())) bytes += bytesOf(*g->value());
  return bytes;
}

int intraOpThreads(int64_t ranks) {
  int64_t cores = std::max(1U, std::thread::hardware_concurrency());
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    // LibTorch 2.14.1 runs no more threads than cores, whatever it is asked.
    if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min<int64_t>(v, cores));
  }
  return static_cast<int>(std::max<int64_t>(1, cores / std::max<int64_t>(1, ranks)));
}

}  // namespace spmd::passes
