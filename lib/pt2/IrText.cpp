// Models written as IR text (`.ir`, serialize::printProgram's form) read as
// archives without weight bytes, for `spmdc opt` and lit tests:
//
//   input %w: f32[8, 8]{requires_grad} parameter w
//   -> archive.weights["w"] = {dtype f32, sizes [8, 8], no storage}
#include <filesystem>

#include "ir/Verify.h"
#include "pt2/Archive.h"
#include "serialize/FromText.h"
#include "support/File.h"

namespace spmd::pt2 {

Expected<Archive> readIrArchive(const std::string& path) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(path));
  Archive a;
  a.path = path;
  SPMD_ASSIGN_OR_RETURN(a.program, serialize::parseProgram(text, path));
  if (a.program.name.empty()) a.program.name = std::filesystem::path(path).stem().string();
  if (Status st = ir::verifyProgram(a.program); !st.isOk()) return st.withContext(path);
  for (const auto& in : a.program.signature.inputs) {
    if (!ir::isStored(in.kind) || !in.value || !in.value->isTensor()) continue;
    const ir::TensorType& t = in.value->type();
    TensorPayload p;
    p.fqn = in.target;
    p.dtype = t.dtype;
    p.isParam = in.kind == ir::InputKind::Parameter;
    for (const ir::Dim& d : t.sizes) {
      if (!d.isStatic()) return Status::error(path + ": stored input " + in.target + " has a symbolic size");
      p.sizes.push_back(d.value());
    }
    for (const ir::Dim& d : t.strides) p.strides.push_back(d.value());
    auto& table = in.kind == ir::InputKind::TensorConstant ? a.constants : a.weights;
    table.emplace(p.fqn, std::move(p));
  }
  return a;
}

Expected<Archive> readModel(const std::string& path, const ReadOptions& options) {
  if (path.ends_with(".ir")) return readIrArchive(path);
  return readArchive(path, options);
}

}  // namespace spmd::pt2
