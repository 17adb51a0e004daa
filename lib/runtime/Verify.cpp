// spmd-run --verify / --verify-against (see Verify.h).
#include "runtime/Verify.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "pt2/Archive.h"
#include "runtime/LaunchSupport.h"
#include "runtime/Runner.h"
#include "runtime/TypeMap.h"
#include "support/Strings.h"

namespace spmd::runtime {
namespace {

// The dtype whose defaults are the looser (torch: the max of each tolerance).
at::ScalarType looser(at::ScalarType a, at::ScalarType b) {
  Tolerance ta = defaultTolerance(a), tb = defaultTolerance(b);
  return ta.rtol >= tb.rtol ? a : b;
}

// The IR's short name of `t` (f32, bf16, f16, f64, i64, ...).
std::string dtypeName(at::ScalarType t) {
  std::optional<ir::ScalarType> ir = fromC10ScalarType(t);
  return ir ? std::string(ir::scalarTypeName(*ir)) : std::string(c10::toString(t));
}

// One comparison as a line: "verify <name>  max abs A  rel R  (dtype: rtol T atol U)  ok".
std::string comparisonLine(const std::string& name, const Comparison& c) {
  char line[320];
  std::snprintf(line, sizeof line, "verify %-32s max abs %.3g  rel %.3g  (%s: rtol %.3g atol %.3g)  %s\n",
                name.c_str(), c.maxAbs, c.rel, dtypeName(c.dtype).c_str(), c.tol.rtol, c.tol.atol,
                c.pass ? "ok" : "ABOVE TOLERANCE");
  return line;
}

// The single-device reference: o.verify run with the first batch of o.inputs.
Expected<TensorMap> runReference(const DistributedOptions& o) {
  SPMD_ASSIGN_OR_RETURN(pt2::Archive archive, pt2::readArchive(o.verify));
  auto runner = ProgramRunner::create(archive);
  if (!runner) return Status::error(o.verify + ": " + runner.status().message());
  TensorMap inputs;
  if (!o.inputs.empty()) {
    SPMD_ASSIGN_OR_RETURN(std::vector<TensorMap> batches, readBatches(o.inputs));
    inputs = std::move(batches.front());
  }
  auto expected = runner->run(inputs);
  if (!expected) return Status::error(o.verify + ": " + expected.status().message());
  return expected;
}

}  // namespace

Tolerance defaultTolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
    case at::kComplexHalf:
      return {1e-3, 1e-5};
    case at::kBFloat16:
      return {1.6e-2, 1e-5};
    case at::kFloat:
    case at::kComplexFloat:
      return {1.3e-6, 1e-5};
    case at::kDouble:
    case at::kComplexDouble:
      return {1e-7, 1e-7};
    default:
      return {0, 0};  // integers, bool: exact
  }
}

std::string defaultToleranceTable() {
  std::ostringstream s;
  const char* sep = "";
  for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
    Tolerance tol = defaultTolerance(t);
    s << sep << dtypeName(t) << " rtol " << tol.rtol << " atol " << tol.atol;
    sep = ", ";
  }
  s << "; integers and bool exact";
  return s.str();
}

Comparison compareTensor(const at::Tensor& got, const at::Tensor& want, std::optional<double> rtol,
                         std::optional<double> atol) {
  Comparison c;
  c.dtype = looser(got.scalar_type(), want.scalar_type());
  Tolerance def = defaultTolerance(c.dtype);
  c.tol = {rtol.value_or(def.rtol), atol.value_or(def.atol)};
  if (got.sizes() != want.sizes()) {
    std::ostringstream s;
    s << "has shape " << got.sizes() << ", the reference " << want.sizes();
    c.problem = s.str();
    return c;
  }
  if (got.numel() == 0) return c.pass = true, c;
  // In double; complex as (real, imaginary) pairs.
  bool complex = got.is_complex() || want.is_complex();
  auto asDouble = [complex](const at::Tensor& t) {
    at::Tensor c = t.detach().cpu();
    return complex ? at::view_as_real(c.to(at::kComplexDouble)) : c.to(at::kDouble);
  };
  at::Tensor g = asDouble(got), x = asDouble(want);
  at::Tensor same = g.eq(x);  // equal infinities are no error
  at::Tensor finite = g.isfinite().logical_and(x.isfinite());
  if (same.logical_or(finite).logical_not().any().item<bool>()) {
    c.problem = "has non-finite values (nan or inf) where the reference differs";
    return c;
  }
  at::Tensor diff = at::where(same, at::zeros_like(g), g - x);
  at::Tensor wantFinite = at::where(x.isfinite(), x, at::zeros_like(x));
  c.maxAbs = diff.abs().max().item<double>();
  double errNorm = diff.norm().item<double>(), wantNorm = wantFinite.norm().item<double>();
  c.rel = wantNorm > 0 ? errNorm / wantNorm : c.maxAbs;
  double bound = c.tol.atol * std::sqrt(static_cast<double>(g.numel())) + c.tol.rtol * wantNorm;
  c.pass = errNorm <= bound;
  return c;
}

bool compareOutputs(const TensorMap& got, const TensorMap& want, std::optional<double> rtol,
                    std::optional<double> atol, std::ostream& out, std::ostream& err) {
  bool ok = true;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      err << "verify: " << name << " missing from the distributed outputs\n";
      ok = false;
      continue;
    }
    Comparison c = compareTensor(it->second, w, rtol, atol);
    if (!c.problem.empty()) {
      err << "verify: " << name << " " << c.problem << "\n";
      ok = false;
      continue;
    }
    ok &= c.pass;
    (c.pass ? out : err) << comparisonLine(name, c);
  }
  return ok;
}

Status checkVerifyOptions(const DistributedOptions& o, const ir::ExportedProgram& program) {
  if (!o.verify.empty() && !o.verifyAgainst.empty())
    return Status::error("--verify and --verify-against both given: compare with one reference");
  if (!o.verify.empty()) {
    auto archive = pt2::readArchive(o.verify);
    if (!archive)
      return Status::error(archive.status().message() +
                           " (--verify takes the .pt2 to run on one device; for a file of expected outputs "
                           "use --verify-against)");
    if (o.steps > 1)
      return Status::error(
          o.verify + ": --verify runs the program once and cannot follow --steps " + std::to_string(o.steps) +
          "; pass --verify-against a safetensors file of PyTorch's outputs after those steps");
  }
  if (o.verifyAgainst.empty()) return Status::ok();
  if (std::filesystem::is_directory(o.verifyAgainst))
    return Status::error(o.verifyAgainst + ": --verify-against takes one safetensors file, not a folder");
  auto expected = readTensors(o.verifyAgainst);
  if (!expected)
    return Status::error(
        expected.status().message() +
        " (--verify-against takes a safetensors file of expected outputs; for a .pt2 use --verify)");
  SPMD_ASSIGN_OR_RETURN(std::vector<std::string> names, outputNames(program));
  std::string known = joined(names);
  if (expected->empty())
    return Status::error(o.verifyAgainst + ": holds no tensors; expected the outputs of " + o.program + " (" +
                         known + ")");
  for (const auto& [name, t] : *expected)
    if (std::find(names.begin(), names.end(), name) == names.end())
      return Status::error(o.verifyAgainst + ": tensor '" + name + "' is not an output of " + o.program +
                           " (its outputs: " + known + ")");
  return Status::ok();
}

int verifyOutputs(const DistributedOptions& o, const std::string& outputFile, std::ostream& out,
                  std::ostream& err) {
  auto got = readTensors(outputFile);
  if (!got) return fail(err, kFailure, got.status().message());
  TensorMap want;
  if (!o.verifyAgainst.empty()) {
    auto read = readTensors(o.verifyAgainst);
    if (!read) return fail(err, kBadInput, read.status().message());
    want = std::move(*read);
  } else {
    auto ran = runReference(o);
    if (!ran) return fail(err, kFailure, ran.status().message());
    want = std::move(*ran);
  }
  return compareOutputs(*got, want, o.rtol, o.atol, out, err) ? 0 : kFailure;
}

}  // namespace spmd::runtime
