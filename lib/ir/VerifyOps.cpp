// The verifier's node checks (see Verify.h): argument values of the kind
// their argument says, then per op the arguments that the sharding rules,
// the expansion and the runtime index with.
//
//   aten.permute.default(%x: f32[2, 3, 4], [0, 2])
//     -> "node %permute (aten.permute.default): dims [0, 2] is not a permutation of the 3 dims of its
//         input; re-export the model"
//   aten.softmax.int(%x: f32[2, 3], 5, False)
//     -> "node %softmax (aten.softmax.int): dim 5 is out of range for its rank-2 input (expected -2..1); ..."
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/Verify.h"
#include "support/Strings.h"

namespace spmd::ir {
namespace {

using K = Argument::Kind;

constexpr const char* kReexport = "; re-export the model";

std::string where(const Node& n) { return "node %" + n.name() + " (" + n.target() + ")"; }

Status fail(const Node& n, const std::string& what) {
  return Status::error(where(n) + ": " + what + kReexport);
}

// Argument values must be of the kind the argument says.
Status checkValueKinds(const Node& n, const Argument& a, const std::string& name) {
  for (const Value* v : a.values) {
    if (!v) {
      if (a.kind == K::Tensor || a.kind == K::Tensors)
        return fail(n, "argument '" + name + "' has a missing tensor");
      continue;
    }
    bool ok = true;
    switch (a.kind) {
      case K::Tensor:  // also tokens and script objects
        ok = v->kind() == ValueKind::Tensor || v->kind() == ValueKind::Token ||
             v->kind() == ValueKind::CustomObj;
        break;
      case K::Tensors:
      case K::OptionalTensor:
      case K::OptionalTensors:
        ok = v->kind() == ValueKind::Tensor;
        break;
      case K::SymInt:
      case K::SymInts:
        ok = v->kind() == ValueKind::SymInt;
        break;
      case K::SymFloat:
      case K::SymFloats:
        ok = v->kind() == ValueKind::SymFloat || v->kind() == ValueKind::SymInt;
        break;
      case K::SymBool:
      case K::SymBools:
        ok = v->kind() == ValueKind::SymBool;
        break;
      default:
        ok = false;
    }
    if (!ok)
      return fail(n, "argument '" + name + "' (" + std::string(argumentKindName(a.kind)) + ") refers to %" +
                         v->name() + ", which is not of that kind");
  }
  return Status::ok();
}

// How a dim argument is checked.
enum class DimKind : uint8_t {
  One,          ///< an int dim (None allowed: the op's default)
  List,         ///< a list of distinct dims (or one int, or None)
  Permutation,  ///< every dim exactly once; required
};

struct DimArg {
  const char* name;
  DimKind kind;
  int64_t extraRank = 0;  ///< 1 where the dim indexes the result (unsqueeze, stack)
};

struct OpSpec {
  std::vector<DimArg> dims;
};

const std::unordered_map<std::string_view, OpSpec>& opSpecs() {
  static const auto* kSpecs = [] {
    auto* m = new std::unordered_map<std::string_view, OpSpec>();
    auto add = [&](std::initializer_list<std::string_view> targets, const OpSpec& spec) {
      for (auto t : targets) m->emplace(t, spec);
    };
    const DimArg dim{"dim", DimKind::One};
    const DimArg dims{"dim", DimKind::List};
    add({"aten._log_softmax.default",
         "aten._softmax.default",
         "aten.log_softmax.int",
         "aten.softmax.int",
         "aten._log_softmax_backward_data.default",
         "aten._softmax_backward_data.default",
         "aten.any.dim",
         "aten.argmax.default",
         "aten.argmin.default",
         "aten.argsort.default",
         "aten.cat.default",
         "aten.chunk.default",
         "aten.cumsum.default",
         "aten.cumprod.default",
         "aten.diff.default",
         "aten.gather.default",
         "aten.index_select.default",
         "aten.max.dim",
         "aten.min.dim",
         "aten.prod.dim_int",
         "aten.scatter.src",
         "aten.scatter.value",
         "aten.scatter_add.default",
         "aten.scatter_reduce.two",
         "aten.select.int",
         "aten.select_scatter.default",
         "aten.slice.Tensor",
         "aten.slice_scatter.default",
         "aten.sort.default",
         "aten.split.Tensor",
         "aten.split_with_sizes.default",
         "aten.squeeze.dim",
         "aten.sym_size.int",
         "aten.sym_stride.int",
         "aten.topk.default",
         "aten.unbind.int",
         "aten.unflatten.int",
         "aten.repeat_interleave.self_int",
         "aten.narrow.default",
         "aten.logcumsumexp.default"},
        {{dim}});
    add({"aten.amax.default", "aten.amin.default", "aten.any.dims", "aten.mean.dim", "aten.sum.dim_IntList",
         "aten.var.correction", "aten.var.dim", "aten.std.correction", "aten.std.dim",
         "aten.var_mean.correction", "aten.squeeze.dims", "aten._fft_r2c.default", "aten._fft_c2r.default",
         "aten.logsumexp.default", "aten.linalg_vector_norm.default"},
        {{dims}});
    add({"aten.flip.default", "aten.roll.default"}, {{{"dims", DimKind::List}}});
    add({"aten.permute.default"}, {{{"dims", DimKind::Permutation}}});
    add({"aten.transpose.int"}, {{{"dim0", DimKind::One}, {"dim1", DimKind::One}}});
    add({"aten.diagonal.default"}, {{{"dim1", DimKind::One}, {"dim2", DimKind::One}}});
    add({"aten.flatten.using_ints"}, {{{"start_dim", DimKind::One}, {"end_dim", DimKind::One}}});
    add({"aten.unsqueeze.default", "aten.stack.default"}, {{{"dim", DimKind::One, 1}}});
    return m;
  }();
  return *kSpecs;
}

// The rank dims are counted against: the first tensor argument's (the
// largest of a list's, as cat accepts legacy empty 1-D tensors).
int64_t inputRank(const Node& n) {
  for (const auto& na : n.inputs()) {
    if (!na.arg.isTensorLike()) continue;
    int64_t rank = -1;
    for (const Value* v : na.arg.values)
      if (v && v->isTensor()) rank = std::max(rank, v->type().rank());
    if (rank >= 0) return rank;
  }
  return -1;
}

Status checkDims(const Node& n, const DimArg& spec, int64_t inRank) {
  const Argument* a = n.input(spec.name);
  if (!a || a->kind == K::None) {
    if (spec.kind == DimKind::Permutation)
      return fail(n, "argument '" + std::string(spec.name) + "' is missing");
    return Status::ok();
  }
  bool list = spec.kind != DimKind::One;
  if (a->kind != K::Int && !(list && a->kind == K::Ints))
    return fail(n, "argument '" + std::string(spec.name) + "' is " + std::string(argumentKindName(a->kind)) +
                       ", expected " + (list ? "a list of dims" : "a dim"));
  int64_t rank = inRank + spec.extraRank;
  int64_t wrap = std::max<int64_t>(rank, 1);  // a 0-dim tensor takes dim 0 and -1
  std::string label = std::string(spec.name) + (a->kind == K::Ints ? " " + formatShape(a->ints) : "");
  if (spec.kind == DimKind::Permutation) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    bool ok = static_cast<int64_t>(a->ints.size()) == rank;
    for (int64_t d : a->ints) {
      int64_t k = d < 0 ? d + rank : d;
      if (!ok || k < 0 || k >= rank || seen[static_cast<size_t>(k)]) {
        ok = false;
        break;
      }
      seen[static_cast<size_t>(k)] = true;
    }
    if (!ok)
      return fail(n, label + " is not a permutation of the " + std::to_string(rank) + " dims of its input");
    return Status::ok();
  }
  std::vector<int64_t> normalized;
  for (int64_t d : a->ints) {
    if (d < -wrap || d >= wrap)
      return fail(n, (a->kind == K::Ints ? label + ": dim " : std::string(spec.name) + " ") +
                         std::to_string(d) + " is out of range for its rank-" + std::to_string(inRank) +
                         " input (expected " + std::to_string(-wrap) + ".." + std::to_string(wrap - 1) + ")");
    int64_t k = d < 0 ? d + wrap : d;
    if (std::find(normalized.begin(), normalized.end(), k) != normalized.end())
      return fail(n, label + " names dim " + std::to_string(k) + " twice");
    normalized.push_back(k);
  }
  return Status::ok();
}

const Value* firstTensorResult(const Node& n) {
  for (const Value* v : n.outputValues())
    if (v->isTensor()) return v;
  return nullptr;
}

std::string sizesText(const TensorType& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.sizes.size(); ++i) s += (i ? ", " : "") + t.sizes[i].str();
  return s + "]";
}

// permute / transpose: the result is the input with its dims moved.
Status checkMovedDims(const Node& n, const std::vector<int64_t>& perm) {
  const Value* out = firstTensorResult(n);
  const Value* in = nullptr;
  for (const Value* v : n.inputValues())
    if (v->isTensor()) {
      in = v;
      break;
    }
  if (!in || !out) return fail(n, "expected a tensor input and a tensor result");
  const TensorType& a = in->type();
  const TensorType& b = out->type();
  bool ok = b.rank() == a.rank();
  for (size_t d = 0; ok && d < perm.size(); ++d) {
    int64_t src = perm[d] < 0 ? perm[d] + a.rank() : perm[d];
    ok = a.sizes[static_cast<size_t>(src)] == b.sizes[d];
  }
  if (!ok)
    return fail(n, "result sizes " + sizesText(b) + " are not the input's " + sizesText(a) + " with dims " +
                       formatShape(perm));
  return Status::ok();
}

// Ranks the matrix ops' rules index with: [min, max] per tensor argument
// ("" is the result), then the contracted dims of `a` and `b` equal.
struct RankSpec {
  const char* arg;
  int64_t min, max;
};
struct MatrixSpec {
  std::vector<RankSpec> ranks;
  const char* a = nullptr;
  const char* b = nullptr;
};

const std::unordered_map<std::string_view, MatrixSpec>& matrixSpecs() {
  static const auto* kSpecs = new std::unordered_map<std::string_view, MatrixSpec>{
      {"aten.mm.default", {{{"self", 2, 2}, {"mat2", 2, 2}, {"", 2, 2}}, "self", "mat2"}},
      {"aten.bmm.default", {{{"self", 3, 3}, {"mat2", 3, 3}, {"", 3, 3}}, "self", "mat2"}},
      {"aten.addmm.default", {{{"self", 0, 2}, {"mat1", 2, 2}, {"mat2", 2, 2}, {"", 2, 2}}, "mat1", "mat2"}},
      {"aten.baddbmm.default",
       {{{"self", 0, 3}, {"batch1", 3, 3}, {"batch2", 3, 3}, {"", 3, 3}}, "batch1", "batch2"}},
      {"aten.linear.default", {{{"input", 1, 64}, {"weight", 1, 2}, {"bias", 0, 1}}}},
      {"aten.embedding.default", {{{"weight", 2, 2}}}},
  };
  return *kSpecs;
}

const Value* tensorArg(const Node& n, const char* name) {
  if (!*name) return firstTensorResult(n);
  const Argument* a = n.input(name);
  return a && a->values.size() == 1 && a->values[0] && a->values[0]->isTensor() ? a->values[0] : nullptr;
}

Status checkMatrixOp(const Node& n, const MatrixSpec& spec) {
  for (const RankSpec& r : spec.ranks) {
    const Value* v = tensorArg(n, r.arg);
    std::string what = *r.arg ? "argument '" + std::string(r.arg) + "'" : std::string("the result");
    if (!v) {
      if (std::string_view(r.arg) == "bias") continue;  // optional
      return fail(n, what + " is missing or not a tensor");
    }
    int64_t rank = v->type().rank();
    if (rank < r.min || rank > r.max)
      return fail(n, what + " has rank " + std::to_string(rank) + ", expected " +
                         (r.min == r.max ? std::to_string(r.min)
                                         : std::to_string(r.min) + " to " + std::to_string(r.max)));
  }
  if (!spec.a) return Status::ok();
  const TensorType& a = tensorArg(n, spec.a)->type();
  const TensorType& b = tensorArg(n, spec.b)->type();
  const Dim& k1 = a.sizes[a.sizes.size() - 1];
  const Dim& k2 = b.sizes[b.sizes.size() - 2];
  if (k1.isStatic() && k2.isStatic() && k1.value() != k2.value())
    return fail(n, "cannot multiply " + a.str() + " by " + b.str());
  return Status::ok();
}

Status checkShapes(const Node& n, int64_t inRank) {
  if (auto it = matrixSpecs().find(n.target()); it != matrixSpecs().end())
    return checkMatrixOp(n, it->second);
  const std::string& t = n.target();
  if (t == "aten.permute.default") return checkMovedDims(n, n.input("dims")->ints);
  if (t == "aten.transpose.int") {
    std::vector<int64_t> perm(static_cast<size_t>(inRank));
    for (int64_t d = 0; d < inRank; ++d) perm[static_cast<size_t>(d)] = d;
    auto at = [&](const char* name) {
      const Argument* a = n.input(name);
      int64_t d = a && a->kind == K::Int ? a->ints[0] : 0;
      return static_cast<size_t>(d < 0 ? d + inRank : d);
    };
    if (inRank > 0) std::swap(perm[at("dim0")], perm[at("dim1")]);
    return checkMovedDims(n, perm);
  }
  if (t == "aten.t.default" && inRank > 2)
    return fail(n, "t() takes a tensor of at most 2 dims, its input has " + std::to_string(inRank));
  return Status::ok();
}

}  // namespace

Status verifyNode(const Node& n) {
  for (const auto& na : n.inputs()) SPMD_RETURN_IF_ERROR(checkValueKinds(n, na.arg, na.name));
  for (const auto& out : n.outputs()) SPMD_RETURN_IF_ERROR(checkValueKinds(n, out, "output"));
  auto it = opSpecs().find(n.target());
  int64_t inRank = inputRank(n);
  if (it != opSpecs().end()) {
    if (inRank < 0) return fail(n, "expected a tensor input");
    for (const DimArg& d : it->second.dims) SPMD_RETURN_IF_ERROR(checkDims(n, d, inRank));
  }
  return checkShapes(n, inRank);
}

}  // namespace spmd::ir
