// Linear algebra on batches of matrices: each tensor's last few dims are its
// core (a matrix: 2, a vector of pivots or eigenvalues: 1, a determinant or
// an info code: 0), the dims before them are batch dims, broadcast and
// aligned from the right across every operand and result. A batch dim
// passes through (each rank factors its own matrices); a core dim stays
// whole (a factorization reads the whole matrix).
//
//   aten._linalg_svd.default(A[6, 5, 4], false)
//     -> ([i, j, k]) -> ([i, j, l], [i, l], [i, l, k]) {i=6, j=5 replicated, k=4 replicated,
//        l=4 replicated}
//   aten.linalg_lu_solve.default(LU[5, 5], pivots[5], B[3, 5, 2])
//     -> ([j, k], [l], [i, m, n]) -> ([i, m, n]) {i=3, ...replicated}
//
// A core the op leaves empty (U and Vh of svd without compute_uv: shape
// [0]) is below its core rank and gets no batch factor.
#include <algorithm>
#include <utility>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

size_t sz(int64_t i) { return static_cast<size_t>(i); }

// Core rank of each tensor operand (tensorOperands order) and result
// (tensorResults order); a tensor past the end is all core.
struct Cores {
  std::vector<int64_t> operands;
  std::vector<int64_t> results;
};

// Batch dims of `shape` under core rank `core` (right-aligned to the
// broadcast batch), or -1 when the tensor is smaller than its core.
int64_t batchRank(const std::vector<int64_t>& shape, const std::vector<int64_t>& cores, int i) {
  if (static_cast<size_t>(i) >= cores.size()) return -1;
  return static_cast<int64_t>(shape.size()) - cores[sz(i)];
}

Expected<OpShardingRule> batchedRule(const ir::Node& node, const Cores& cores) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() < 1) return Status::error("linalg rule: expected a tensor");
  // The broadcast batch shape: per right-aligned position, the size not 1.
  std::vector<int64_t> batch;
  auto widen = [&](const std::vector<int64_t>& shape, int64_t nb) {
    if (nb <= 0) return;
    if (static_cast<int64_t>(batch.size()) < nb) batch.insert(batch.begin(), sz(nb) - batch.size(), 1);
    int64_t off = static_cast<int64_t>(batch.size()) - nb;
    for (int64_t d = 0; d < nb; ++d)
      if (shape[sz(d)] != 1) batch[sz(off + d)] = shape[sz(d)];
  };
  for (int i = 0; i < b.numOperands(); ++i)
    widen(b.operandShape(i), batchRank(b.operandShape(i), cores.operands, i));
  for (int i = 0; i < b.numResults(); ++i)
    widen(b.resultShape(i), batchRank(b.resultShape(i), cores.results, i));
  auto nbatch = static_cast<int64_t>(batch.size());
  for (int64_t p = 0; p < nbatch; ++p) {
    int64_t n = batch[sz(p)];
    if (n == 1) continue;
    int f = b.factor(n);
    auto share = [&](const std::vector<int64_t>& shape, int64_t nb, auto&& add) {
      int64_t d = p - (nbatch - nb);
      if (nb > 0 && d >= 0 && shape[sz(d)] == n) add(d);
    };
    for (int i = 0; i < b.numOperands(); ++i)
      share(b.operandShape(i), batchRank(b.operandShape(i), cores.operands, i),
            [&](int64_t d) { b.operand(i, d, f); });
    for (int i = 0; i < b.numResults(); ++i)
      share(b.resultShape(i), batchRank(b.resultShape(i), cores.results, i),
            [&](int64_t d) { b.result(i, d, f); });
  }
  return b.replicateRest().build();
}

RuleFn batched(std::vector<int64_t> operands, std::vector<int64_t> results) {
  return [cores = Cores{std::move(operands), std::move(results)}](const ir::Node& node) {
    return batchedRule(node, cores);
  };
}

// _linalg_solve_ex(A[..., n, n], B, left): B is a batch of vectors (core 1)
// when it is 1-D or A's shape without its last dim, else of matrices; the
// solution has B's core.
Expected<OpShardingRule> solveExRule(const ir::Node& node) {
  auto ops = tensorOperands(node);
  if (ops.size() != 2) return Status::error("_linalg_solve_ex rule: expected A and B");
  std::vector<int64_t> a = shapeHint(*ops[0]), bs = shapeHint(*ops[1]);
  bool vector = bs.size() == 1 || (bs.size() + 1 == a.size() && std::equal(bs.begin(), bs.end(), a.begin()));
  int64_t core = vector ? 1 : 2;
  return batchedRule(node, Cores{{2, core}, {core, 2, 1, 0}});
}

}  // namespace

void registerLinalgRules(RuleRegistry& r) {
  r.add("aten._linalg_det.default", batched({2}, {0, 2, 1}));
  r.add("aten._linalg_eigh.default", batched({2}, {1, 2}));
  r.add("aten._linalg_slogdet.default", batched({2}, {0, 0, 2, 1}));
  r.add("aten._linalg_solve_ex.default", solveExRule);
  r.add("aten._linalg_svd.default", batched({2}, {2, 1, 2}));
  r.add("aten.cholesky_inverse.default", batched({2}, {2}));
  r.add("aten.cholesky_solve.default", batched({2, 2}, {2}));
  r.add("aten.geqrf.default", batched({2}, {2, 1}));
  r.add("aten.linalg_cholesky_ex.default", batched({2}, {2, 0}));
  r.add("aten.linalg_eig.default", batched({2}, {1, 2}));
  r.add("aten.linalg_householder_product.default", batched({2, 1}, {2}));
  r.add("aten.linalg_inv_ex.default", batched({2}, {2, 0}));
  r.add("aten.linalg_ldl_factor_ex.default", batched({2}, {2, 1, 0}));
  r.add("aten.linalg_ldl_solve.default", batched({2, 1, 2}, {2}));
  r.add("aten.linalg_lu.default", batched({2}, {2, 2, 2}));
  r.add("aten.linalg_lu_factor_ex.default", batched({2}, {2, 1, 0}));
  r.add("aten.linalg_lu_solve.default", batched({2, 1, 2}, {2}));
  r.add("aten.linalg_matrix_exp.default", batched({2}, {2}));
  r.add("aten.linalg_matrix_sqrth.default", batched({2}, {2}));
  // pinv(self, atol?, rtol?): the tolerances broadcast over the batch.
  r.add("aten.linalg_pinv.atol_rtol_tensor", batched({2, 0, 0}, {2}));
  r.add("aten.linalg_polar.default", batched({2}, {2, 2}));
  r.add("aten.linalg_qr.default", batched({2}, {2, 2}));
  r.add("aten.linalg_solve_triangular.default", batched({2, 2}, {2}));
  r.add("aten.lu_unpack.default", batched({2, 1}, {2, 2, 2}));
  r.add("aten.ormqr.default", batched({2, 1, 2}, {2}));
  r.add("aten.triangular_solve.default", batched({2, 2}, {2, 2}));
}

}  // namespace spmd::sharding
