// TEMPORARY (json writer work): dumps exportedProgramToJsonText per model.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include "ProgramTestUtil.h"
#include "program/IrToJson.h"
#include "pt2/Archive.h"
namespace spmd::program {
TEST_CASE("scratch dump", "[.scratch]") {
  const char* dir = std::getenv("SPMD_JSON_DUMP");
  REQUIRE(dir);
  for (const auto& path : testing::modelPaths()) {
    auto archive = pt2::readArchive(path, {.loadWeights = false});
    REQUIRE(archive.hasValue());
    auto text = exportedProgramToJsonText(archive->program);
    REQUIRE(text.hasValue());
    std::string name = std::filesystem::path(path).parent_path().filename().string();
    std::ofstream(std::string(dir) + "/" + name + ".ep.json") << *text;
  }
}
}  // namespace spmd::program
#include <chrono>
#include "program/ProgramJson.h"
#include "program/Reader.h"
#include "scratch_old/IrToJson.h"
namespace spmd::program_old {
Expected<std::string> programToJsonText(const program::Program& p);
}
namespace spmd::program {
static std::chrono::duration<double> cpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::duration<double>(ts.tv_sec + ts.tv_nsec * 1e-9);
}
TEST_CASE("scratch bench", "[.bench]") {
  const char* dir = std::getenv("SPMD_JSON_SPMDS");
  REQUIRE(dir);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    auto loaded = readProgram(e.path().string());
    REQUIRE(loaded.hasValue());
    const Program& p = loaded->program();
    auto t0 = cpuNow();
    bool onlyNew = std::getenv("SPMD_ONLY_NEW") != nullptr;
    auto oldText = onlyNew ? Expected<std::string>(std::string()) : program_old::programToJsonText(p);
    auto t1 = cpuNow();
    auto newText = programToJsonText(p);
    for (int r = 0; onlyNew && r < 20; ++r) newText = programToJsonText(p);
    auto t2 = cpuNow();
    REQUIRE(oldText.hasValue());
    REQUIRE(newText.hasValue());
    if (!onlyNew) CHECK(*oldText == *newText);
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    if (newText->size() > 1000000)
      std::printf("%s: %zu bytes, old %.1f ms, new %.1f ms\n", e.path().filename().c_str(), newText->size(),
                  ms(t1 - t0), ms(t2 - t1) / (onlyNew ? 21 : 1));
  }
}
}  // namespace spmd::program
