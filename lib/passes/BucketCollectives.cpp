// bucket-collectives: fuses all-reduces on the same mesh axis, reduction and
// dtype into buckets of up to a configurable size, so many small gradient
// all-reduces become one (as DDP's buckets). A bucket closes when it is full
// or when a member's result is needed before the next all-reduce: the fused
// collective sits where its last member was, and async-collectives then
// issues it as soon as the concatenation is ready.
//
//   %a = spmd.all_reduce(%grad_w, "dp", "sum")       %flat = aten.reshape.default(%grad_w, [-1]) ...
//   %b = spmd.all_reduce(%grad_b, "dp", "sum")  =>   %bucket = aten.cat.default([%flat, %flat_1], 0)
//                                                     %bucket_all_reduce = spmd.all_reduce(%bucket, "dp",
//                                                     "sum") %parts =
//                                                     aten.split_with_sizes.default(%bucket_all_reduce,
//                                                     [...], 0) %a = aten.reshape.default(%parts_0, [64,
//                                                     256]) ...
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "passes/Passes.h"
#include "sharding/CostModel.h"

namespace spmd::passes {
namespace {

using ir::Argument;

int64_t bytesOf(const ir::Value& v) {
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

std::string keyOf(const ir::Node& n) {
  const Argument* axis = n.input("axis");
  const Argument* op = n.input("op");
  const ir::Value* x = n.inputValues()[0];
  return (axis ? axis->strings[0] : "") + "|" + (op ? op->strings[0] : "") + "|" +
         std::string(ir::scalarTypeName(x->type().dtype));
}

class Bucketer {
 public:
  Bucketer(program::Program& p, int64_t bucketBytes, const BucketCollectives::Group& group)
      : p_(p), g_(p.graph.graph), limit_(bucketBytes), group_(group) {}

  Status run() {
    for (const auto& n : g_.nodes()) {
      if (n->target() != ir::kAllReduce || n->outputValues().size() != 1) continue;
      const ir::Value* x = n->inputValues()[0];
      if (!x->type().isStatic()) continue;
      std::optional<std::string> group = group_ ? group_(*n) : std::string();
      if (!group) continue;
      candidates_[*group + "|" + keyOf(*n)].push_back(n.get());
    }
    for (auto& [key, list] : candidates_) SPMD_RETURN_IF_ERROR(bucketize(list));
    if (removed_.empty()) return Status::ok();
    // New nodes were appended; place each fused group where its last member was.
    std::vector<ir::Node*> order;
    for (const auto& n : g_.nodes()) {
      if (placed_.count(n.get()) || moved_.count(n.get())) continue;
      order.push_back(n.get());  // bucket members stay until erased below
      if (auto it = emitAt_.find(n.get()); it != emitAt_.end())
        order.insert(order.end(), it->second.begin(), it->second.end());
    }
    return commitRewrite(p_, order, replacement_, removed_);
  }

 private:
  // Index of the first node that needs `v`; aliases of it (such as the
  // optimizer's gradient anchors) are looked through and collected in
  // `aliases`, to move behind the bucket.
  int firstUse(const ir::Value* v, std::vector<ir::Node*>& aliases) const {
    return firstUseThroughAliases(v, static_cast<int>(g_.nodes().size()), aliases);
  }

  Status bucketize(const std::vector<ir::Node*>& list) {
    std::vector<ir::Node*> bucket;
    int64_t bytes = 0;
    int closeBefore = std::numeric_limits<int>::max();
    for (ir::Node* c : list) {
      int64_t b = bytesOf(*c->inputValues()[0]);
      bool fits = bucket.empty() || (bytes + b <= limit_ && c->index() < closeBefore);
      if (!fits) {
        SPMD_RETURN_IF_ERROR(flush(bucket));
        bucket.clear();
        bytes = 0;
        closeBefore = std::numeric_limits<int>::max();
      }
      bucket.push_back(c);
      bytes += b;
      std::vector<ir::Node*> aliases;
      closeBefore = std::min(closeBefore, firstUse(c->outputValues()[0], aliases));
      aliasesOf_[c] = std::move(aliases);
    }
    return flush(bucket);
  }

  Expected<ir::Value*> emit(const std::string& base, const std::string& target,
                            std::vector<ir::NamedArgument> args, const ir::TensorType& type,
                            std::vector<ir::Node*>& out) {
    SPMD_ASSIGN_OR_RETURN(ir::Node * n, appendTensorNode(g_, base, target, std::move(args), type));
    out.push_back(n);
    placed_.insert(n);
    return n->outputValues()[0];
  }

  Status flush(const std::vector<ir::Node*>& bucket) {
    if (bucket.size() < 2) return Status::ok();
    std::vector<ir::Node*> nodes;
    std::vector<ir::Value*> flats;
    std::vector<int64_t> sizes;
    ir::TensorType flatType = bucket[0]->inputValues()[0]->type();
    int64_t total = 0;
    for (ir::Node* c : bucket) {
      ir::Value* x = c->inputValues()[0];
      int64_t n = x->type().numel().value_or(0);
      ir::TensorType t = x->type();
      t.sizes = {ir::Dim(n)};
      t.strides.clear();
      SPMD_ASSIGN_OR_RETURN(
          ir::Value * f,
          emit(x->name() + "_flat", "aten.reshape.default",
               {{"self", Argument::tensor(x), false}, {"shape", Argument::integers({-1}), false}}, t, nodes));
      flats.push_back(f);
      sizes.push_back(n);
      total += n;
    }
    flatType.sizes = {ir::Dim(total)};
    flatType.strides.clear();
    SPMD_ASSIGN_OR_RETURN(ir::Value * cat, emit("bucket", "aten.cat.default",
                                                {{"tensors", Argument::tensors(flats), false},
                                                 {"dim", Argument::integer(0), false}},
                                                flatType, nodes));
    std::vector<ir::NamedArgument> args = bucket[0]->inputs();
    args[0].arg = Argument::tensor(cat);
    SPMD_ASSIGN_OR_RETURN(ir::Value * reduced, emit(cat->name() + "_all_reduce", std::string(ir::kAllReduce),
                                                    args, flatType, nodes));
    // split_with_sizes returns a Tensor[]: one list output.
    std::vector<ir::Value*> parts;
    std::string splitName = reduced->name() + "_split";
    for (size_t i = 0; i < bucket.size(); ++i) {
      SPMD_ASSIGN_OR_RETURN(ir::Value * part,
                            g_.addValue(splitName + "_" + std::to_string(i), ir::ValueKind::Tensor));
      part->mutableType() = flats[i]->type();
      parts.push_back(part);
    }
    SPMD_ASSIGN_OR_RETURN(ir::Node * split, g_.addNode(splitName, "aten.split_with_sizes.default",
                                                       {{"self", Argument::tensor(reduced), false},
                                                        {"split_sizes", Argument::integers(sizes), false},
                                                        {"dim", Argument::integer(0), false}},
                                                       {Argument::tensors(parts)}));
    nodes.push_back(split);
    placed_.insert(split);
    for (size_t i = 0; i < bucket.size(); ++i) {
      ir::Value* y = bucket[i]->outputValues()[0];
      std::vector<int64_t> shape;
      for (const auto& d : y->type().sizes) shape.push_back(d.value());
      SPMD_ASSIGN_OR_RETURN(ir::Value * back, emit(y->name() + "_bucketed", "aten.reshape.default",
                                                   {{"self", Argument::tensor(parts[i]), false},
                                                    {"shape", Argument::integers(shape), false}},
                                                   y->type(), nodes));
      replacement_.emplace(y, back);
      removed_.insert(bucket[i]);
    }
    const std::string& axis = args[1].arg.strings[0];
    const std::string op = args.size() > 2 && !args[2].arg.strings.empty() ? args[2].arg.strings[0] : "sum";
    int64_t bytes = total * ir::elementSize(flatType.dtype);
    int64_t n = p_.mesh.size(p_.mesh.axisIndex(axis));
    p_.collectives.push_back(
        {reduced->name(), "all_reduce", axis,
         sharding::CostModel::bytesMoved(sharding::CollectiveKind::AllReduce, n, bytes, bytes),
         "bucket of " + std::to_string(bucket.size()) + " all-reduces", cat->name(), "[P(" + op + ")]", "[R]",
         ""});
    // Aliases of members read the bucket's results: they follow it.
    for (ir::Node* c : bucket)
      for (ir::Node* a : aliasesOf_[c])
        if (moved_.insert(a).second) nodes.push_back(a);
    emitAt_[bucket.back()] = nodes;
    return Status::ok();
  }

  program::Program& p_;
  ir::Graph& g_;
  int64_t limit_;
  const BucketCollectives::Group& group_;
  std::map<std::string, std::vector<ir::Node*>> candidates_;
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> emitAt_;
  std::unordered_set<const ir::Node*> placed_;
  std::unordered_set<const ir::Node*> removed_;
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> aliasesOf_;
  std::unordered_set<const ir::Node*> moved_;
  std::unordered_map<ir::Value*, ir::Value*> replacement_;
};

}  // namespace

Status BucketCollectives::run(program::Program& program) {
  if (bucketBytes_ <= 0) return Status::ok();
  return Bucketer(program, bucketBytes_, group_).run();
}

}  // namespace spmd::passes
