// Whole-file helpers with the project's no-partial-output rule.
//
//   SPMD_RETURN_IF_ERROR(writeFileAtomic("report.json", text));  // temp + rename
#pragma once

#include <string>
#include <string_view>

#include "support/Status.h"

namespace spmd {

/// Writes `contents` to `path` through "<path>.tmp.<pid>" and a rename, so
/// readers never see a partial file; the temporary is removed on failure.
Status writeFileAtomic(const std::string& path, std::string_view contents);

/// Reads a whole file; the error names the path.
Expected<std::string> readFile(const std::string& path);

}  // namespace spmd
