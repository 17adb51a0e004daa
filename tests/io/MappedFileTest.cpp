// Tests of io::MappedFile: contents, empty files, errors, moves.
//
//   auto f = MappedFile::open(dir.file("x.bin"));   // "hello" -> size 5, view() == "hello"
#include "../TestCatch.h"

#include "../TestUtil.h"
#include "io/MappedFile.h"

namespace spmd::io {
namespace {

using spmd::testing::TempDir;
using spmd::testing::writeBytes;

TEST_CASE("MappedFile maps a file's bytes", "[io][mapped]") {
  TempDir dir;
  writeBytes(dir.file("x.bin"), std::string("hello\0world", 11));
  auto f = MappedFile::open(dir.file("x.bin"));
  REQUIRE(f);
  CHECK(f->size() == 11);
  CHECK(f->view() == std::string_view("hello\0world", 11));
  CHECK(f->data()[6] == 'w');
  CHECK(f->path() == dir.file("x.bin"));
}

TEST_CASE("MappedFile maps an empty file to size 0", "[io][mapped]") {
  TempDir dir;
  writeBytes(dir.file("empty.bin"), "");
  auto f = MappedFile::open(dir.file("empty.bin"));
  REQUIRE(f);
  CHECK(f->size() == 0);
  CHECK(f->data() == nullptr);
  CHECK(f->view().empty());
}

TEST_CASE("MappedFile reports a missing file with its path and reason", "[io][mapped]") {
  TempDir dir;
  auto f = MappedFile::open(dir.file("missing.bin"));
  REQUIRE_FALSE(f);
  CHECK(f.status().message() == dir.file("missing.bin") + ": cannot open: No such file or directory");
}

TEST_CASE("MappedFile refuses a directory", "[io][mapped]") {
  TempDir dir;
  auto f = MappedFile::open(dir.path().string());
  REQUIRE_FALSE(f);
  CHECK(f.status().message() == dir.path().string() + ": cannot map: Is a directory");
}

TEST_CASE("MappedFile moves keep the mapping valid", "[io][mapped]") {
  TempDir dir;
  writeBytes(dir.file("x.bin"), "abcdef");
  auto f = MappedFile::open(dir.file("x.bin"));
  REQUIRE(f);
  const uint8_t* p = f->data();
  MappedFile a = std::move(*f);
  CHECK(f->size() == 0);
  CHECK(f->data() == nullptr);
  CHECK(a.data() == p);
  MappedFile b;
  b = std::move(a);
  CHECK(b.data() == p);
  CHECK(b.view() == "abcdef");
  CHECK(a.data() == nullptr);
}

}  // namespace
}  // namespace spmd::io
