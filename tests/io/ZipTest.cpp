// Tests of io::ZipArchive: a real .pt2, archives built here with libzip, and
// every refused input.
//
//   makeZip(p, {{"../evil", "x"}});  ZipArchive::open(p)
//   // error: "<p>: member ../evil escapes the archive (absolute path or '..' component)"
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>
#include "../TestCatch.h"

#include "../TestUtil.h"
#include "io/Zip.h"

namespace spmd::io {
namespace {

using spmd::testing::readBytes;
using spmd::testing::TempDir;
using spmd::testing::writeBytes;

const std::string kMlp = std::string(SPMD_TESTDATA_DIR) + "/pt2/mlp/model.pt2";
const std::string kWeight0 = "model/data/weights/weight_0";

struct ZipMember {
  std::string name;
  std::string content;  // a name ending in '/' makes a directory entry
  bool encrypt = false;
};

/// Writes a zip at `path` holding `members`, stored uncompressed.
void makeZip(const std::string& path, const std::vector<ZipMember>& members) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z != nullptr);
  for (const ZipMember& m : members) {
    if (!m.name.empty() && m.name.back() == '/') {
      REQUIRE(zip_dir_add(z, m.name.c_str(), ZIP_FL_ENC_UTF_8) >= 0);
      continue;
    }
    zip_source_t* src = zip_source_buffer(z, m.content.data(), m.content.size(), 0);
    REQUIRE(src != nullptr);
    zip_int64_t idx = zip_file_add(z, m.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    REQUIRE(idx >= 0);
    REQUIRE(zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0) == 0);
    if (m.encrypt)
      REQUIRE(zip_file_set_encryption(z, static_cast<zip_uint64_t>(idx), ZIP_EM_AES_256, "secret") == 0);
  }
  REQUIRE(zip_close(z) == 0);
}

/// Replaces every occurrence of `from` in the file at `path` by `to` (same length).
void patchFile(const std::string& path, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  std::string bytes = readBytes(path);
  size_t n = 0;
  for (size_t pos = bytes.find(from); pos != std::string::npos; pos = bytes.find(from, pos + 1)) {
    bytes.replace(pos, to.size(), to);
    ++n;
  }
  REQUIRE(n > 0);
  writeBytes(path, bytes);
}

TEST_CASE("ZipArchive lists the members of a real .pt2 in archive order", "[io][zip]") {
  auto z = ZipArchive::open(kMlp);
  REQUIRE(z);
  const ZipArchive& zip = **z;
  CHECK(zip.path() == kMlp);
  REQUIRE(zip.names().size() == 13);
  CHECK(zip.names().front() == kWeight0);
  CHECK(zip.contains("model/models/model.json"));
  CHECK_FALSE(zip.contains("model/models"));
  CHECK_FALSE(zip.contains("nope"));
  auto size = zip.size(kWeight0);
  REQUIRE(size);
  CHECK(*size == 65536);
}

TEST_CASE("ZipArchive reads model.json of a real .pt2", "[io][zip]") {
  auto z = ZipArchive::open(kMlp);
  REQUIRE(z);
  auto json = (*z)->readString("model/models/model.json");
  REQUIRE(json);
  CHECK(json->size() == 9358);
  CHECK(json->front() == '{');
  CHECK(json->find("\"graph_module\"") != std::string::npos);
}

TEST_CASE("ZipArchive readString leaves zeroed padding past the end for simdjson", "[io][zip]") {
  auto z = ZipArchive::open(kMlp);
  REQUIRE(z);
  auto json = (*z)->readString("model/models/model.json", 64);
  REQUIRE(json);
  CHECK(json->size() == 9358);
  REQUIRE(json->capacity() >= json->size() + 64);
  const char* end = json->data() + json->size();
  CHECK(std::all_of(end, end + 64, [](char c) { return c == 0; }));
}

TEST_CASE("ZipArchive reads a weight into a caller buffer", "[io][zip]") {
  auto z = ZipArchive::open(kMlp);
  REQUIRE(z);
  std::vector<uint8_t> w(65536, 0xAB);
  Status s = (*z)->readInto(kWeight0, w.data(), w.size());
  REQUIRE(s.isOk());
  // Members are stored uncompressed, so the same bytes appear in the raw archive.
  std::string raw = readBytes(kMlp);
  CHECK(raw.find(std::string(w.begin(), w.end())) != std::string::npos);
}

TEST_CASE("ZipArchive readInto refuses a wrong size", "[io][zip]") {
  auto z = ZipArchive::open(kMlp);
  REQUIRE(z);
  std::vector<uint8_t> w(100);
  Status s = (*z)->readInto(kWeight0, w.data(), w.size());
  CHECK(s.message() == kMlp + ": member " + kWeight0 + " has 65536 bytes, expected 100");
}

TEST_CASE("ZipArchive reports an absent member", "[io][zip]") {
  auto z = ZipArchive::open(kMlp);
  REQUIRE(z);
  CHECK((*z)->size("model/nope").status().message() == kMlp + ": no member model/nope in the archive");
  char c = 0;
  CHECK((*z)->readInto("model/nope", &c, 1).message() == kMlp + ": no member model/nope in the archive");
  CHECK_FALSE((*z)->readString("model/nope"));
}

TEST_CASE("ZipArchive refuses a missing file", "[io][zip]") {
  TempDir dir;
  auto z = ZipArchive::open(dir.file("missing.pt2"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("missing.pt2") + ": cannot open: No such file or directory");
}

TEST_CASE("ZipArchive refuses an empty file", "[io][zip]") {
  TempDir dir;
  writeBytes(dir.file("empty.pt2"), "");
  auto z = ZipArchive::open(dir.file("empty.pt2"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("empty.pt2") + ": empty file, not a zip archive");
}

TEST_CASE("ZipArchive refuses a file that is not a zip", "[io][zip]") {
  TempDir dir;
  writeBytes(dir.file("text.pt2"), "this is not a zip archive, just some text\n");
  auto z = ZipArchive::open(dir.file("text.pt2"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("text.pt2") + ": not a zip archive");
}

TEST_CASE("ZipArchive refuses a member with a '..' component", "[io][zip]") {
  TempDir dir;
  makeZip(dir.file("evil.zip"), {{"ok.txt", "fine"}, {"../evil", "gotcha"}});
  auto z = ZipArchive::open(dir.file("evil.zip"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() ==
        dir.file("evil.zip") + ": member ../evil escapes the archive (absolute path or '..' component)");
}

TEST_CASE("ZipArchive refuses a '..' component inside a member path", "[io][zip]") {
  TempDir dir;
  makeZip(dir.file("evil.zip"), {{"model/../../evil", "gotcha"}});
  auto z = ZipArchive::open(dir.file("evil.zip"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("evil.zip") +
                                    ": member model/../../evil escapes the archive "
                                    "(absolute path or '..' component)");
}

TEST_CASE("ZipArchive refuses an absolute member path", "[io][zip]") {
  TempDir dir;
  makeZip(dir.file("abs.zip"), {{"/etc/evil", "gotcha"}});
  auto z = ZipArchive::open(dir.file("abs.zip"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() ==
        dir.file("abs.zip") + ": member /etc/evil escapes the archive (absolute path or '..' component)");
}

TEST_CASE("ZipArchive accepts names that merely contain dots", "[io][zip]") {
  TempDir dir;
  makeZip(dir.file("dots.zip"), {{"a/..b/c..", "x"}, {"a/.../d", "y"}});
  auto z = ZipArchive::open(dir.file("dots.zip"));
  REQUIRE(z);
  CHECK((*z)->names() == std::vector<std::string>{"a/..b/c..", "a/.../d"});
}

TEST_CASE("ZipArchive refuses an encrypted member", "[io][zip]") {
  if (!zip_encryption_method_supported(ZIP_EM_AES_256, 1)) {
    WARN("libzip built without AES: cannot make an encrypted member");
    return;
  }
  TempDir dir;
  makeZip(dir.file("enc.zip"), {{"plain", "abc"}, {"secret", "hidden", true}});
  auto z = ZipArchive::open(dir.file("enc.zip"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("enc.zip") + ": member secret is encrypted");
}

TEST_CASE("ZipArchive refuses a duplicated member name", "[io][zip]") {
  TempDir dir;
  makeZip(dir.file("dup.zip"), {{"name1", "abc"}, {"name2", "def"}});
  patchFile(dir.file("dup.zip"), "name2", "name1");
  auto z = ZipArchive::open(dir.file("dup.zip"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("dup.zip") + ": member name1 appears more than once");
}

TEST_CASE("ZipArchive excludes directory entries from names", "[io][zip]") {
  TempDir dir;
  makeZip(dir.file("dirs.zip"), {{"top/", ""}, {"top/a.txt", "aaa"}, {"top/sub/", ""}, {"b", ""}});
  auto z = ZipArchive::open(dir.file("dirs.zip"));
  REQUIRE(z);
  CHECK((*z)->names() == std::vector<std::string>{"top/a.txt", "b"});
  CHECK_FALSE((*z)->contains("top/"));
  auto a = (*z)->readString("top/a.txt");
  REQUIRE(a);
  CHECK(*a == "aaa");
  auto b = (*z)->readString("b");
  REQUIRE(b);
  CHECK(b->empty());
}

TEST_CASE("ZipArchive readInto reports a CRC mismatch", "[io][zip]") {
  TempDir dir;
  const std::string content = "0123456789abcdefghijklmnopqrstuvwxyz";
  makeZip(dir.file("crc.zip"), {{"data", content}});
  patchFile(dir.file("crc.zip"), content, "0123456789abcdefghijklmnopqrstuvwxyZ");
  auto z = ZipArchive::open(dir.file("crc.zip"));
  REQUIRE(z);
  std::string out(content.size(), '\0');
  Status s = (*z)->readInto("data", out.data(), out.size());
  REQUIRE_FALSE(s.isOk());
  CHECK(s.message() == dir.file("crc.zip") +
                           ": member data: the archive is damaged (CRC error); re-create or re-download it");
}

/// Overwrites the 32-bit little-endian field `offset` bytes into the first
/// record with signature `magic` ("PK\1\2": central directory, "PK\3\4": local header).
void patchU32(const std::string& path, const std::string& magic, size_t offset, uint32_t value) {
  std::string bytes = readBytes(path);
  size_t at = bytes.find(magic);
  REQUIRE(at != std::string::npos);
  for (int i = 0; i < 4; ++i) bytes[at + offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  writeBytes(path, bytes);
}

const std::string kCentral("PK\1\2", 4);
constexpr size_t kCompressedSize = 20, kUncompressedSize = 24, kLocalOffset = 42;

TEST_CASE("ZipArchive refuses a stored member whose two sizes disagree", "[io][zip][limits]") {
  TempDir dir;
  makeZip(dir.file("sizes.zip"), {{"ok", "fine"}, {"data", "0123456789"}});
  REQUIRE(ZipArchive::open(dir.file("sizes.zip")));
  std::string bytes = readBytes(dir.file("sizes.zip"));
  size_t second = bytes.find(kCentral, bytes.find(kCentral) + 1);
  REQUIRE(second != std::string::npos);
  bytes[second + kUncompressedSize] = 100;  // 10 -> 100 bytes, still 10 compressed
  writeBytes(dir.file("sizes.zip"), bytes);
  auto z = ZipArchive::open(dir.file("sizes.zip"));
  REQUIRE_FALSE(z);
  CHECK(z.status().message() == dir.file("sizes.zip") +
                                    ": member data: the archive is damaged (it is stored uncompressed but "
                                    "declares 100 bytes in 10); re-create or re-download it");
}

TEST_CASE("ZipArchive refuses a 4 GiB member in a small archive before allocating", "[io][zip][limits]") {
  TempDir dir;
  makeZip(dir.file("big.zip"), {{"data", "0123456789"}});
  patchU32(dir.file("big.zip"), kCentral, kCompressedSize, 0xFFFFFFF0u);
  patchU32(dir.file("big.zip"), kCentral, kUncompressedSize, 0xFFFFFFF0u);
  auto z = ZipArchive::open(dir.file("big.zip"));
  REQUIRE_FALSE(z);
  uint64_t archive = readBytes(dir.file("big.zip")).size();
  CHECK(z.status().message() ==
        dir.file("big.zip") +
            ": member data: the archive is damaged (it declares 4294967280 compressed "
            "bytes, more than the whole archive (" +
            std::to_string(archive) + " bytes)); re-create or re-download it");
}

TEST_CASE("ZipArchive refuses a compressed member beyond any ratio", "[io][zip][limits]") {
  TempDir dir;
  const std::string path = dir.file("bomb.zip");
  const std::string content(100000, 'x');
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z != nullptr);
  zip_source_t* src = zip_source_buffer(z, content.data(), content.size(), 0);
  REQUIRE(zip_file_add(z, "data", src, 0) == 0);
  REQUIRE(zip_set_file_compression(z, 0, ZIP_CM_DEFLATE, 9) == 0);
  REQUIRE(zip_close(z) == 0);
  REQUIRE(ZipArchive::open(path));
  patchU32(path, kCentral, kUncompressedSize, 0xFFFFFFF0u);
  auto opened = ZipArchive::open(path);
  REQUIRE_FALSE(opened);
  CHECK(opened.status().message().rfind(
            path + ": member data: the archive is damaged (it declares 4294967280 bytes from ", 0) == 0);
  CHECK(opened.status().message().find("compressed bytes, beyond any compression ratio)") !=
        std::string::npos);
}

TEST_CASE("ZipArchive says a member with a bad header offset is damaged", "[io][zip][limits]") {
  TempDir dir;
  makeZip(dir.file("offset.zip"), {{"data", "0123456789"}});
  patchU32(dir.file("offset.zip"), kCentral, kLocalOffset, 5);
  auto z = ZipArchive::open(dir.file("offset.zip"));
  REQUIRE(z);
  auto text = (*z)->readString("data");
  REQUIRE_FALSE(text);
  CHECK(text.status().message().rfind(dir.file("offset.zip") + ": member data: the archive is damaged (",
                                      0) == 0);
  CHECK(text.status().message().find("No such file") == std::string::npos);
}

}  // namespace
}  // namespace spmd::io
