// cp-load-balance: the load-balanced causal split of ring attention
// (docs/CONTEXT_PARALLEL.md, "Load-balanced causal split"; torch's
// _HeadTailLoadBalancer). When the ring ops carry load_balance=true the
// sequence is cut into 2n chunks of h rows on their axis of n ranks and rank
// r holds chunks r and 2n-1-r: the program runs on the sequence permuted to
// [c0, c(2n-1), c1, c(2n-2), ...], whose plain S(d) shards are those pairs.
// Every place a tensor enters or leaves the axis's sharding is permuted:
//
//   %x_local_slice = spmd.local_slice(%x, "cp", 1)                 (user input, rotary table, mask rows)
//   =>  %x_lb = aten.index_select(%x, 1, %cp_lb_index); spmd.local_slice(%x_lb, "cp", 1)
//   %y = spmd.all_gather(%t, "cp", 1)                              (a replicated output, the logits)
//   =>  %y_lb = aten.index_select(%y, 1, %cp_lb_inverse)           (back in the original order)
//
// The ring kernels read the flag (which chunks a block holds: causal skips
// and mask columns). Reductions over the sequence (the loss, the
// parameters' gradients) do not depend on the order. Refused (one line):
// a reduce-scatter or all-to-all of the axis (the ring programs have none;
// ContextParallel.cpp refuses load balance with parameters sharded on it),
// a split factor or uneven size on it.
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "passes/Passes.h"

namespace spmd::passes {
namespace {

using ir::Argument;

bool isRing(const std::string& t) {
  return t == "spmd.ring_attention" || t == "spmd.ring_attention_backward";
}

std::string stringOf(const ir::Node& n, std::string_view name) {
  const Argument* a = n.input(name);
  return a != nullptr && !a->strings.empty() ? a->strings[0] : "";
}

int64_t intOf(const ir::Node& n, std::string_view name, int64_t otherwise) {
  const Argument* a = n.input(name);
  return a != nullptr && !a->ints.empty() ? a->ints[0] : otherwise;
}

/// The axis of the load-balanced ring ops, "" when none asks for it.
std::string balancedAxis(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if (isRing(n->target()) && intOf(*n, "load_balance", 0) != 0) return stringOf(*n, "axis");
  return "";
}

bool isConstantFill(const ir::Value& v) {
  const ir::Node* p = v.producer();
  if (p == nullptr) return false;
  static const std::unordered_set<std::string> kFills = {
      "aten.full.default",      "aten.zeros.default",      "aten.ones.default",
      "aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default",
      "aten.new_full.default",  "aten.new_zeros.default",  "aten.new_ones.default"};
  return kFills.count(p->target()) != 0;
}

ir::TensorType indexType(int64_t n) {
  ir::TensorType t;
  t.dtype = ir::ScalarType::Long;
  t.sizes = {ir::Dim(n)};
  t.strides = {ir::Dim(1)};
  return t;
}

class Balancer {
 public:
  Balancer(program::Program& p, std::string axis, int64_t ranks)
      : p_(p), g_(p.graph.graph), axis_(std::move(axis)), ranks_(ranks) {}

  Status run() {
    std::vector<ir::Node*> nodes;
    for (const auto& n : g_.nodes()) nodes.push_back(n.get());
    for (ir::Node* n : nodes) SPMD_RETURN_IF_ERROR(visit(*n));
    std::vector<ir::Node*> order = front_;
    order.insert(order.end(), order_.begin(), order_.end());
    g_.setNodeOrder(order);
    for (auto [from, to] : after_)
      g_.replaceUses({{from, to}}, [&](const ir::Node& u) { return made_.count(&u); });
    g_.rebuildUses();
    syncSignatureOutputs(p_);
    return g_.verify();
  }

 private:
  Status visit(ir::Node& n) {
    const std::string& t = n.target();
    bool onAxis = ir::isSpmdOp(t) && stringOf(n, "axis") == axis_;
    if (!onAxis || t == ir::kAllReduce || t == ir::kZeroPartial || t == ir::kWait || isRing(t)) {
      order_.push_back(&n);
      return Status::ok();
    }
    if (intOf(n, "split_factor", 1) != 1 || n.input("size") != nullptr)
      return refuse(n, "a split factor or an uneven size");
    if (t == ir::kLocalSlice) return slice(n);
    if (t == ir::kAllGather) return gather(n);
    return refuse(n, "a " + t + " of a sharded dim");
  }

  Status refuse(const ir::Node& n, const std::string& what) {
    return Status::error("cp-load-balance: %" + n.name() + " (" + n.target() + ") on '" + axis_ +
                         "': " + what +
                         " has no load-balanced form; set \"load_balance\": false in context_parallel");
  }

  // The permuted positions of the sequence (inverse: where each original
  // position went), a cat of aranges made once per length.
  Expected<ir::Value*> index(int64_t length, bool inverse) {
    auto& slot = inverse ? inverse_[length] : forward_[length];
    if (slot != nullptr) return slot;
    if (length % (2 * ranks_) != 0)
      return Status::error("cp-load-balance: a sharded dim of length " + std::to_string(length) +
                           " does not split into 2 x " + std::to_string(ranks_) + " chunks on '" + axis_ +
                           "'");
    int64_t h = length / (2 * ranks_);
    std::vector<ir::Value*> pieces;
    for (int64_t c = 0; c < 2 * ranks_; ++c) {
      // forward: position block c holds original chunk r (even c = 2r) or 2n-1-r (odd);
      // inverse: original chunk c went to block 2c (c < n) or 2(2n-1-c)+1.
      int64_t from = inverse ? (c < ranks_ ? 2 * c : 2 * (2 * ranks_ - 1 - c) + 1)
                             : (c % 2 == 0 ? c / 2 : 2 * ranks_ - 1 - c / 2);
      SPMD_ASSIGN_OR_RETURN(ir::Node * a,
                            appendTensorNode(g_, "cp_lb_range", "aten.arange.start_step",
                                             {{"start", Argument::integer(from * h), false},
                                              {"end", Argument::integer((from + 1) * h), false},
                                              {"dtype", Argument::scalarType(ir::ScalarType::Long), true}},
                                             indexType(h)));
      made(*a, true);
      pieces.push_back(a->outputValues()[0]);
    }
    SPMD_ASSIGN_OR_RETURN(
        ir::Node * cat, appendTensorNode(g_, inverse ? "cp_lb_inverse" : "cp_lb_index", "aten.cat.default",
                                         {{"tensors", Argument::tensors(pieces), false}}, indexType(length)));
    made(*cat, true);
    slot = cat->outputValues()[0];
    return slot;
  }

  Expected<ir::Value*> permuted(ir::Value* x, int64_t dim, bool inverse, const std::string& base) {
    const ir::TensorType& t = x->type();
    if (dim < 0) dim += t.rank();
    if (dim < 0 || dim >= t.rank() || !t.sizes[static_cast<size_t>(dim)].isStatic())
      return Status::error("cp-load-balance: %" + x->name() + ": a symbolic or missing sharded dim");
    SPMD_ASSIGN_OR_RETURN(ir::Value * idx, index(t.sizes[static_cast<size_t>(dim)].value(), inverse));
    ir::TensorType out = t;
    out.strides.clear();
    ir::Dim stride(1);
    out.strides.resize(t.sizes.size(), ir::Dim(1));
    for (size_t i = t.sizes.size(); i-- > 0;) {
      out.strides[i] = stride;
      if (t.sizes[i].isStatic() && stride.isStatic()) stride = ir::Dim(stride.value() * t.sizes[i].value());
    }
    SPMD_ASSIGN_OR_RETURN(ir::Node * n, appendTensorNode(g_, base, "aten.index_select.default",
                                                         {{"self", Argument::tensor(x), false},
                                                          {"dim", Argument::integer(dim), false},
                                                          {"index", Argument::tensor(idx), false}},
                                                         out));
    made(*n, false);
    return n->outputValues()[0];
  }

  Status slice(ir::Node& n) {
    ir::Value* x = nullptr;
    if (const Argument* a = n.input("self"); a != nullptr && !a->values.empty()) x = a->values[0];
    if (x == nullptr || isConstantFill(*x)) {  // the same values in every order
      order_.push_back(&n);
      return Status::ok();
    }
    SPMD_ASSIGN_OR_RETURN(ir::Value * lb, permuted(x, intOf(n, "dim", 0), false, x->name() + "_lb"));
    std::vector<ir::NamedArgument> inputs;
    for (const auto& a : n.inputs())
      inputs.push_back(a.name == "self" ? ir::NamedArgument{a.name, Argument::tensor(lb), a.keyword} : a);
    n.setInputs(std::move(inputs));
    order_.push_back(&n);
    return Status::ok();
  }

  Status gather(ir::Node& n) {
    order_.push_back(&n);
    ir::Value* y = n.outputValues().at(0);
    SPMD_ASSIGN_OR_RETURN(ir::Value * back, permuted(y, intOf(n, "dim", 0), true, y->name() + "_lb"));
    after_.emplace_back(y, back);
    return Status::ok();
  }

  void made(ir::Node& n, bool front) {
    (front ? front_ : order_).push_back(&n);
    made_.insert(&n);
  }

  program::Program& p_;
  ir::Graph& g_;
  std::string axis_;
  int64_t ranks_;
  std::vector<ir::Node*> front_, order_;
  std::unordered_set<const ir::Node*> made_;
  std::vector<std::pair<ir::Value*, ir::Value*>> after_;
  std::map<int64_t, ir::Value*> forward_, inverse_;
};

}  // namespace

Status ContextParallelBalance::run(program::Program& program) {
  std::string axis = balancedAxis(program.graph.graph);
  if (axis.empty()) return Status::ok();
  int64_t a = program.mesh.axisIndex(axis);
  if (a < 0) return Status::error("cp-load-balance: the mesh has no axis '" + axis + "'");
  return Balancer(program, axis, program.mesh.size(a)).run();
}

}  // namespace spmd::passes
