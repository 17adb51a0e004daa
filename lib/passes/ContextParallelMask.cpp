// The causal mask recognizer of ring attention (see ContextParallelMask.h).
//
// Invariant: a mask is recognized only when every value it is built from
// is a constant of the graph (aranges, fills) whose meaning is proven by
// the pattern; anything that reads a user input (an attention_mask, a
// position_ids input) stays a mask operand.
#include "passes/ContextParallelMask.h"

#include <initializer_list>
#include <limits>
#include <string_view>
#include <vector>

#include "passes/ContextParallelRing.h"

namespace spmd::passes::detail {
namespace {

using Argument = ir::Argument;

const ir::Node* producerOf(const ir::Value* v, std::string_view target) {
  const ir::Node* p = v != nullptr ? v->producer() : nullptr;
  return p != nullptr && p->target() == target ? p : nullptr;
}

bool isOneOf(const ir::Node* p, std::initializer_list<std::string_view> targets) {
  if (p == nullptr) return false;
  for (std::string_view t : targets)
    if (p->target() == t) return true;
  return false;
}

std::vector<int64_t> sizesOf(const ir::Value* v) {
  std::vector<int64_t> out;
  for (const ir::Dim& d : v->type().sizes) out.push_back(d.isStatic() ? d.value() : -1);
  return out;
}

/// The dim argument `name` of `p`, normalized to [0, rank); -1 if absent.
int64_t dimOf(const ir::Node& p, std::string_view name, int64_t rank, int64_t absent = -1) {
  auto d = scalarOf(p.input(name));
  if (!d) return absent;
  auto i = static_cast<int64_t>(*d);
  return i < 0 ? i + rank : i;
}

/// `x + 0` or `x - 0` (transformers' kv_arange + kv_offset): x.
const ir::Value* throughZeroOffset(const ir::Node& p) {
  if (!isOneOf(&p, {"aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar"}))
    return nullptr;
  return scalarOf(p.input("other")) == 0.0 ? tensorInput(p, "self") : nullptr;
}

/// Follows ops that keep a tensor's elements in order (alias, view,
/// unsqueeze, `+ 0`) and, with `expands`, broadcasts.
const ir::Value* strip(const ir::Value* v, bool expands) {
  while (const ir::Node* p = v->producer()) {
    const ir::Value* next = nullptr;
    if (isOneOf(p, {"aten.alias.default", "aten.view.default", "aten._unsafe_view.default",
                    "aten.unsqueeze.default"}) ||
        (expands && p->target() == "aten.expand.default"))
      next = tensorInput(*p, "self");
    else
      next = throughZeroOffset(*p);
    if (next == nullptr) return v;
    v = next;
  }
  return v;
}

/// arange(0, n) (step 1).
bool isArange(const ir::Value* v, int64_t n) {
  const ir::Node* a = producerOf(v, "aten.arange.start_step");
  if (a == nullptr) a = producerOf(v, "aten.arange.default");
  if (a == nullptr || sizesOf(v) != std::vector<int64_t>{n}) return false;
  auto start = scalarOf(a->input("start")), end = scalarOf(a->input("end")),
       step = scalarOf(a->input("step"));
  return start.value_or(0) == 0 && end == static_cast<double>(n) && step.value_or(1) == 1;
}

/// Positions 0..n-1 along the dim `fromEnd` from the end (1: the keys'
/// columns, 2: the queries' rows), every other dim 1: arange(n) seen
/// through views, unsqueezes and `+ 0`.
bool isPositions(const ir::Value* v, int64_t n, int64_t fromEnd) {
  if (v == nullptr) return false;
  auto sizes = sizesOf(v);
  auto rank = static_cast<int64_t>(sizes.size());
  if (rank < fromEnd) return false;
  for (int64_t i = 0; i < rank; ++i)
    if (sizes[i] != (i == rank - fromEnd ? n : 1)) return false;
  return isArange(strip(v, false), n);
}

/// A constant x: scalar_tensor(x) or full(..., x).
bool isFill(const ir::Value* v, double x) {
  if (const ir::Node* p = producerOf(v, "aten.scalar_tensor.default")) return scalarOf(p->input("s")) == x;
  const ir::Node* f = producerOf(v, "aten.full.default");
  return f != nullptr && scalarOf(f->input("fill_value")) == x;
}

/// full(true), through any view or broadcast.
bool isAllTrue(const ir::Value* v) {
  v = strip(v, true);
  const ir::Node* f = producerOf(v, "aten.full.default");
  const Argument* fill = f != nullptr ? f->input("fill_value") : nullptr;
  return fill != nullptr && fill->ints == std::vector<int64_t>{1} && v->type().dtype == ir::ScalarType::Bool;
}

/// The bool [.., L, S] comparison `(key - query) target bound` over
/// positions (torch's SDPA decomposition).
bool keyMinusQuery(const ir::Value* c, std::string_view target, double bound, int64_t l, int64_t s) {
  const ir::Node* cmp = producerOf(c, target);
  if (cmp == nullptr || scalarOf(cmp->input("other")) != bound) return false;
  const ir::Node* sub = producerOf(tensorInput(*cmp, "self"), "aten.sub.Tensor");
  return sub != nullptr && !sub->input("alpha") && isPositions(tensorInput(*sub, "self"), s, 1) &&
         isPositions(tensorInput(*sub, "other"), l, 2);
}

/// key <= query (transformers' causal_mask_function), or query >= key.
bool keyAtMostQuery(const ir::Value* c, int64_t l, int64_t s) {
  const ir::Node* p = c->producer();
  if (!isOneOf(p, {"aten.le.Tensor", "aten.ge.Tensor"})) return false;
  const ir::Value *k = tensorInput(*p, "self"), *q = tensorInput(*p, "other");
  if (p->target() == "aten.ge.Tensor") std::swap(k, q);
  return isPositions(k, s, 1) && isPositions(q, l, 2);
}

/// transformers' sequence ids of consecutive positions, all zero:
/// cumsum(diff(P, prepend=P[:, :1] - 1) != 1, -1) with P = arange(n)
/// broadcast over the batch (diff: slice(cat, 1:) - slice(cat, :n)).
bool isZeroSequenceIds(const ir::Value* c) {
  const ir::Node* cumsum = producerOf(c, "aten.cumsum.default");
  if (cumsum == nullptr || sizesOf(c).size() != 2 || dimOf(*cumsum, "dim", 2) != 1) return false;
  const ir::Node* ne = producerOf(tensorInput(*cumsum, "self"), "aten.ne.Scalar");
  if (ne == nullptr || scalarOf(ne->input("other")) != 1.0) return false;
  const ir::Node* diff = producerOf(tensorInput(*ne, "self"), "aten.sub.Tensor");
  if (diff == nullptr || diff->input("alpha")) return false;
  const ir::Node *hi = producerOf(tensorInput(*diff, "self"), "aten.slice.Tensor"),
                 *lo = producerOf(tensorInput(*diff, "other"), "aten.slice.Tensor");
  if (hi == nullptr || lo == nullptr || tensorInput(*hi, "self") != tensorInput(*lo, "self")) return false;
  const ir::Node* cat = producerOf(tensorInput(*hi, "self"), "aten.cat.default");
  const Argument* parts = cat != nullptr ? cat->input("tensors") : nullptr;
  int64_t n = sizesOf(c)[1];
  // [start, end) along dim 1; `open`: any end from `end` on (x[:, 1:])
  auto slices = [](const ir::Node& sl, int64_t start, int64_t end, bool open) {
    auto e = scalarOf(sl.input("end")).value_or(std::numeric_limits<double>::max());
    return dimOf(sl, "dim", 2, 0) == 1 &&
           scalarOf(sl.input("start")).value_or(0) == static_cast<double>(start) &&
           (open ? e >= static_cast<double>(end) : e == static_cast<double>(end));
  };
  if (parts == nullptr || parts->values.size() != 2 || dimOf(*cat, "dim", 2, 0) != 1 ||
      !slices(*hi, 1, n + 1, true) || !slices(*lo, 0, n, false))
    return false;
  const ir::Value *first = parts->values[0], *pos = parts->values[1];
  const ir::Node* dummy = producerOf(first, "aten.sub.Tensor");
  if (dummy == nullptr || scalarOf(dummy->input("other")) != 1.0 || dummy->input("alpha")) return false;
  const ir::Node* head = producerOf(tensorInput(*dummy, "self"), "aten.slice.Tensor");
  if (head == nullptr || tensorInput(*head, "self") != pos || !slices(*head, 0, 1, false)) return false;
  const ir::Node* bcast = producerOf(pos, "aten.expand.default");
  return sizesOf(pos).size() == 2 && bcast != nullptr && isPositions(tensorInput(*bcast, "self"), n, 1);
}

/// Gathers (index, views, broadcasts) of zero sequence ids: all zero.
bool isZeroGather(const ir::Value* v) {
  for (;;) {
    v = strip(v, true);
    const ir::Node* index = producerOf(v, "aten.index.Tensor");
    if (index == nullptr) return isZeroSequenceIds(v);
    v = tensorInput(*index, "self");
  }
}

enum class Truth { kUnknown, kAllTrue, kCausal };

/// What the bool [.., L, S] mask `c` (true: attend) is: all true, the
/// causal key <= query, or unknown.
Truth truthOf(const ir::Value* c, int64_t l, int64_t s) {
  if (c == nullptr) return Truth::kUnknown;
  if (isAllTrue(c)) return Truth::kAllTrue;
  const ir::Node* p = c->producer();
  if (isOneOf(p, {"aten.logical_and.default", "aten.bitwise_and.Tensor"})) {
    Truth a = truthOf(tensorInput(*p, "self"), l, s), b = truthOf(tensorInput(*p, "other"), l, s);
    if (a == Truth::kUnknown || b == Truth::kUnknown) return Truth::kUnknown;
    return a == Truth::kCausal || b == Truth::kCausal ? Truth::kCausal : Truth::kAllTrue;
  }
  auto lastTwo = [l, s](const ir::Value* v) {
    auto z = sizesOf(v);
    return z.size() >= 2 && z[z.size() - 2] == l && z.back() == s;
  };
  if (isOneOf(p,
              {"aten.alias.default", "aten.view.default", "aten.unsqueeze.default", "aten.expand.default"}) &&
      lastTwo(c) && lastTwo(tensorInput(*p, "self")))  // only leading dims change
    return truthOf(tensorInput(*p, "self"), l, s);
  if (keyAtMostQuery(c, l, s) || keyMinusQuery(c, "aten.le.Scalar", 0.0, l, s)) return Truth::kCausal;
  if (p != nullptr && p->target() == "aten.eq.Tensor" && isZeroGather(tensorInput(*p, "self")) &&
      isZeroGather(tensorInput(*p, "other")))
    return Truth::kAllTrue;
  return Truth::kUnknown;
}

}  // namespace

std::optional<double> scalarOf(const Argument* a) {
  if (a == nullptr) return std::nullopt;
  if (a->kind == Argument::Kind::Float && a->floats.size() == 1) return a->floats[0];
  if (a->kind == Argument::Kind::Int && a->ints.size() == 1) return static_cast<double>(a->ints[0]);
  return std::nullopt;
}

bool isCausalMask(const ir::Value* m, int64_t l, int64_t s) {
  if (m == nullptr || l != s) return false;
  auto sizes = sizesOf(m);
  if (sizes.size() < 2 || sizes[sizes.size() - 2] != l || sizes.back() != s) return false;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (const ir::Node* w = producerOf(m, "aten.where.self")) {
    const ir::Value *c = tensorInput(*w, "condition"), *x = tensorInput(*w, "self"),
                    *y = tensorInput(*w, "other");
    if (isFill(x, 0.0) && isFill(y, -kInf)) return truthOf(c, l, s) == Truth::kCausal;
    return sizes.size() == 2 && isFill(x, -kInf) && isFill(y, 0.0) &&
           keyMinusQuery(c, "aten.ge.Scalar", 1.0, l, s);
  }
  const ir::Node* triu = producerOf(m, "aten.triu.default");
  if (sizes.size() != 2 || triu == nullptr || scalarOf(triu->input("diagonal")) != 1.0) return false;
  return isFill(tensorInput(*triu, "self"), -kInf);
}

}  // namespace spmd::passes::detail
