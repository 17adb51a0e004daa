// See LossPattern.h.
#include "sharding/rules/LossPattern.h"

#include "sharding/rules/Helpers.h"

namespace spmd::sharding::rules {
namespace {

const ir::Node* producerOf(const ir::Argument* a) {
  return a && a->kind == ir::Argument::Kind::Tensor && a->value() ? a->value()->producer() : nullptr;
}

std::vector<int64_t> sizesOf(const ir::Value& v) { return shapeHint(v); }

// A tensor of zeros: full_like(x, 0), zeros_like(x), zeros(...), full(..., 0).
bool isZeros(const ir::Node* n) {
  if (!n) return false;
  const std::string& t = n->target();
  if (t == "aten.zeros_like.default" || t == "aten.zeros.default") return true;
  if (t != "aten.full_like.default" && t != "aten.full.default") return false;
  return scalarArg(*n, "fill_value", 1.0) == 0.0;
}

}  // namespace

std::optional<OneHotRowSum> matchOneHotRowSum(const ir::Node& node) {
  if (node.target() != "aten.sum.dim_IntList" || !boolArg(node, "keepdim", false)) return std::nullopt;
  const ir::Argument* dtype = node.input("dtype");
  if (dtype && dtype->kind != ir::Argument::Kind::None) return std::nullopt;
  auto ops = tensorOperands(node);
  auto res = tensorResults(node);
  if (ops.size() != 1 || res.size() != 1) return std::nullopt;
  int64_t rank = ops[0]->type().rank();
  std::vector<int64_t> dims = dimsArg(node, "dim", rank);
  if (dims.size() != 1) return std::nullopt;
  const ir::Node* mul = ops[0]->producer();
  if (!mul || mul->target() != "aten.mul.Tensor") return std::nullopt;
  const ir::Node* scatter = nullptr;
  const ir::Value* factor = nullptr;
  for (auto [s, f] : {std::pair{"self", "other"}, std::pair{"other", "self"}}) {
    const ir::Node* p = producerOf(mul->input(s));
    const ir::Argument* other = mul->input(f);
    if (p && p->target() == "aten.scatter.value" && other && other->kind == ir::Argument::Kind::Tensor) {
      scatter = p;
      factor = other->value();
      break;
    }
  }
  if (!scatter || !factor || !isZeros(producerOf(scatter->input("self")))) return std::nullopt;
  const ir::Argument* index = scatter->input("index");
  const ir::Argument* value = scatter->input("value");
  if (!index || !index->value() || !value) return std::nullopt;
  int64_t d = dims[0];
  if (normalizeDim(intArg(*scatter, "dim", 0), rank) != d) return std::nullopt;
  // One index per row, and the factor is the sum's shape (1 at the summed dim).
  auto written = tensorResults(*scatter);
  if (written.size() != 1 || sizesOf(*written[0]) != sizesOf(*ops[0])) return std::nullopt;
  std::vector<int64_t> out = sizesOf(*res[0]);
  if (sizesOf(*index->value()) != out || sizesOf(*factor) != out) return std::nullopt;
  if (factor->type().dtype != res[0]->type().dtype) return std::nullopt;
  return OneHotRowSum{factor, *value, d};
}

}  // namespace spmd::sharding::rules
