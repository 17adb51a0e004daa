// spmdc: the compiler's command-line driver. Only flag parsing lives here;
// every subcommand calls a library.
//
//   spmdc inspect model.pt2 [--format text|json] [--ir]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "pt2/Archive.h"
#include "pt2/Inspect.h"

namespace {

constexpr int kExitBadInput = 2;

int fail(const spmd::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return kExitBadInput;
}

int runInspect(const std::string& path, const std::string& format, bool ir) {
  auto archive = spmd::pt2::readArchive(path, {.loadWeights = false});
  if (!archive) return fail(archive.status());
  if (ir)
    std::cout << spmd::ir::printProgram(archive->program);
  else if (format == "json")
    std::cout << spmd::pt2::inspectJson(*archive);
  else
    std::cout << spmd::pt2::inspectText(*archive);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spmdc: ahead-of-time SPMD compiler for torch.export programs"};
  app.require_subcommand(1);

  std::string inspectPath, format = "text";
  bool printIr = false;
  auto* inspect = app.add_subcommand("inspect", "Summarize a .pt2 archive");
  inspect->add_option("model", inspectPath, "torch.export archive (.pt2)")->required();
  inspect->add_option("--format", format, "text or json")->check(CLI::IsMember({"text", "json"}));
  inspect->add_flag("--ir", printIr, "print the IR, one node per line");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  if (*inspect) return runInspect(inspectPath, format, printIr);
  return kExitBadInput;
}
