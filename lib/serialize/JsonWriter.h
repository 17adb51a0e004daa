// A streaming writer of compact JSON text: no document tree, just appends
// to a string, so a 10 MB program prints in tens of milliseconds.
//
//   std::string out;
//   JsonWriter w(out);
//   w.beginObject().key("sizes").beginArray().integer(256).integer(64).endArray();
//   w.key("scale").number(0.1).key("name").string("fc1 \"w\"").endObject();
//   // out == R"({"sizes":[256,64],"scale":0.1,"name":"fc1 \"w\""})"
//
// The text is byte for byte what nlohmann::json::dump() (compact,
// ensure_ascii off, invalid UTF-8 replaced) prints for the same document,
// except that doubles take the shortest digits that read back exactly
// (std::to_chars) where nlohmann's Grisu2 now and then prints one digit
// more or another last digit (both read back to the same double). The
// caller is responsible for well-formed nesting and unique keys.
// Header-only (inline): the IR -> export JSON writer (ToExportJson.h) and
// the program JSON writer (lib/program) both stream through it.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "support/Status.h"

namespace spmd::serialize {

/// Appends `s` as a JSON string literal: quotes, `"` and `\` and control
/// characters escaped (\n, \t, ..., else \u00XX), other bytes as they are;
/// each invalid UTF-8 sequence (its longest valid-looking prefix) becomes
/// U+FFFD.
void appendJsonString(std::string& out, std::string_view s);

/// Appends a finite double as a JSON number that reads back to exactly
/// `v`, always with a '.' or an exponent: 1.0, 0.1, -0.0, 1e-05, 1e+300.
/// Non-finite values are written as null (JSON has no spelling for them).
void appendJsonNumber(std::string& out, double v);

/// Compact JSON onto a string; commas and colons are placed automatically.
class JsonWriter {
 public:
  /// Appends to `out`, which must outlive the writer.
  explicit JsonWriter(std::string& out) : out_(&out) {}

  JsonWriter& beginObject() { return open('{'); }
  JsonWriter& endObject() { return close('}'); }
  JsonWriter& beginArray() { return open('['); }
  JsonWriter& endArray() { return close(']'); }

  /// The key of the next member of the enclosing object.
  JsonWriter& key(std::string_view k) {
    if (!plainString(k, ':')) {
      separate();
      appendJsonString(*out_, k);
      out_->push_back(':');
    }
    needComma_ = false;
    return *this;
  }

  JsonWriter& string(std::string_view s) {
    if (!plainString(s, 0)) {
      separate();
      appendJsonString(*out_, s);
    }
    return done();
  }
  JsonWriter& integer(int64_t v);
  JsonWriter& unsignedInteger(uint64_t v);
  JsonWriter& boolean(bool v) { return raw(v ? "true" : "false"); }
  JsonWriter& null() { return raw("null"); }
  /// A double as appendJsonNumber spells it.
  JsonWriter& number(double v) {
    separate();
    appendJsonNumber(*out_, v);
    return done();
  }

  /// Already-serialized JSON as the next value, written as it is (the
  /// caller guarantees it is well-formed): fixed fragments in one append.
  JsonWriter& json(std::string_view text) { return raw(text); }

  /// [1,2,3]
  JsonWriter& integers(const std::vector<int64_t>& values);
  /// ["a","b"]
  JsonWriter& strings(const std::vector<std::string>& values);

  /// The text so far.
  const std::string& text() const { return *out_; }

 private:
  // A comma before every value or key but the first of its container.
  void separate() {
    if (needComma_) out_->push_back(',');
  }
  // The comma if due, `s` quoted and `suffix` (unless 0) in one append,
  // when `s` is short and needs no escape; false (nothing written) otherwise.
  bool plainString(std::string_view s, char suffix);
  JsonWriter& done() {
    needComma_ = true;
    return *this;
  }
  JsonWriter& raw(std::string_view token) {
    if (needComma_ && token.size() < 64) {  // the comma and the token in one append
      char buf[64];
      buf[0] = ',';
      std::memcpy(buf + 1, token.data(), token.size());
      out_->append(buf, token.size() + 1);
      return done();
    }
    separate();
    out_->append(token);
    return done();
  }
  JsonWriter& open(char c) {
    const char both[2] = {',', c};
    out_->append(needComma_ ? both : both + 1, needComma_ ? 2 : 1);
    needComma_ = false;
    return *this;
  }
  JsonWriter& close(char c) {
    out_->push_back(c);
    return done();
  }

  std::string* out_;
  // True after a complete value or a closed container: the next key or
  // value needs a comma. False at the start of a container and after a key.
  bool needComma_ = false;
};

// ---- implementation (header-only) -----------------------------------------
//
//   appendJsonString: a"b<LF><0x01><0xFF> -> "a\"b\n\u0001\xEF\xBF\xBD" (U+FFFD)
//   appendJsonNumber: 1e14 -> 100000000000000.0, 1e15 -> 1e+15, 1e-5 -> 1e-05
//
// Strings are copied in runs between the bytes that need attention (quote,
// backslash, control, non-ASCII); numbers take std::to_chars's shortest
// round-trip digits laid out as nlohmann's serializer lays out its own.
namespace json_detail {

// The length of the well-formed UTF-8 sequence starting at s[i] (a byte
// >= 0x80), or 0 with `skip` set to the length of its longest prefix that
// could start one (at least 1): that prefix is what U+FFFD replaces, the
// same recovery as nlohmann's replace handler (Unicode's "maximal subpart").
inline size_t utf8Sequence(std::string_view s, size_t i, size_t& skip) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c == 0xE0) {
    need = 2;
    lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    need = 2;
  } else if (c == 0xED) {  // no surrogates
    need = 2;
    hi = 0x9F;
  } else if (c == 0xF0) {
    need = 3;
    lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    need = 3;
  } else if (c == 0xF4) {  // nothing above U+10FFFF
    need = 3;
    hi = 0x8F;
  } else {
    skip = 1;
    return 0;
  }
  for (size_t j = 1; j <= need; ++j) {
    if (i + j >= s.size()) {
      skip = j;
      return 0;
    }
    auto b = static_cast<unsigned char>(s[i + j]);
    if (b < lo || b > hi) {
      skip = j;
      return 0;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

// True when none of the 8 bytes at `p` needs attention in a string: no
// control byte, quote, backslash or non-ASCII byte (exact zero-byte tests).
inline bool plainWord(const char* p) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  uint64_t x = 0;
  std::memcpy(&x, p, 8);
  auto hasZero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  uint64_t bad = x & kHigh;           // non-ASCII
  bad |= (x - kOnes * 0x20) & kHigh;  // < 0x20 (exact once non-ASCII is ruled out)
  bad |= hasZero(x ^ (kOnes * '"'));
  bad |= hasZero(x ^ (kOnes * '\\'));
  return bad == 0;
}

// True for a byte copied as it is: printable ASCII but quote and backslash.
inline bool plainByte(char ch) {
  auto c = static_cast<unsigned char>(ch);
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

// The length of the prefix of `s` made of plain bytes.
inline size_t plainPrefix(std::string_view s) {
  size_t i = 0;
  while (i + 8 <= s.size() && plainWord(s.data() + i)) i += 8;
  while (i < s.size() && plainByte(s[i])) ++i;
  return i;
}

// The escape of ASCII byte `c` that needs one (quote, backslash, control).
inline void appendEscape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\r':
      out += "\\r";
      return;
    default:
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
  }
}

}  // namespace json_detail

inline void appendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  size_t start = 0;                        // first byte not yet copied
  size_t i = json_detail::plainPrefix(s);  // bytes before it need no escape
  while (i < s.size()) {
    // Skip 8 plain bytes at a time.
    while (i + 8 <= s.size() && json_detail::plainWord(s.data() + i)) i += 8;
    if (i == s.size()) break;
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c < 0x80) {
      out.append(s.data() + start, i - start);
      json_detail::appendEscape(out, c);
      start = ++i;
      continue;
    }
    size_t skip = 0;
    if (size_t n = json_detail::utf8Sequence(s, i, skip); n > 0) {
      i += n;
      continue;
    }
    out.append(s.data() + start, i - start);
    out += "\xEF\xBF\xBD";
    i += skip;
    start = i;
  }
  out.append(s.data() + start, s.size() - start);
  out.push_back('"');
}

inline void appendJsonNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  if (v == 0) {
    out += std::signbit(v) ? "-0.0" : "0.0";
    return;
  }
  // Shortest round-trip digits d.ddde±x; v = digits * 10^(n - k).
  char sci[32];
  auto [end, ec] = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  SPMD_CHECK(ec == std::errc());
  const char* p = sci;
  if (*p == '-') {
    out.push_back('-');
    ++p;
  }
  char digits[24];
  int k = 0;
  for (; *p != 'e'; ++p)
    if (*p != '.') digits[k++] = *p;
  ++p;  // 'e'
  bool negExp = *p == '-';
  int exp10 = 0;
  for (++p; p < end; ++p) exp10 = exp10 * 10 + (*p - '0');
  int n = (negExp ? -exp10 : exp10) + 1;  // position of the decimal point
  constexpr int kMaxExp = 15;             // nlohmann: digits10 of double
  constexpr int kMinExp = -4;
  if (k <= n && n <= kMaxExp) {  // 1234000.0
    out.append(digits, static_cast<size_t>(k));
    out.append(static_cast<size_t>(n - k), '0');
    out += ".0";
  } else if (0 < n && n <= kMaxExp) {  // 12.34
    out.append(digits, static_cast<size_t>(n));
    out.push_back('.');
    out.append(digits + n, static_cast<size_t>(k - n));
  } else if (kMinExp < n && n <= 0) {  // 0.001234
    out += "0.";
    out.append(static_cast<size_t>(-n), '0');
    out.append(digits, static_cast<size_t>(k));
  } else {  // 1.234e+20, 1e-05
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out.append(digits + 1, static_cast<size_t>(k - 1));
    }
    int e = n - 1;
    out += e < 0 ? "e-" : "e+";
    if (e < 0) e = -e;
    if (e < 10) out.push_back('0');
    char buf[8];
    auto r = std::to_chars(buf, buf + sizeof buf, e);
    out.append(buf, r.ptr);
  }
}

inline bool JsonWriter::plainString(std::string_view s, char suffix) {
  constexpr size_t kMax = 96;  // longer strings take appendJsonString's runs
  if (s.size() > kMax || json_detail::plainPrefix(s) != s.size()) return false;
  char buf[kMax + 4];
  size_t n = 0;
  if (needComma_) buf[n++] = ',';
  buf[n++] = '"';
  std::memcpy(buf + n, s.data(), s.size());
  n += s.size();
  buf[n++] = '"';
  if (suffix != 0) buf[n++] = suffix;
  out_->append(buf, n);
  return true;
}

inline JsonWriter& JsonWriter::integer(int64_t v) {
  char buf[24];
  buf[0] = ',';
  auto r = std::to_chars(buf + 1, buf + sizeof buf, v);
  const char* from = needComma_ ? buf : buf + 1;
  out_->append(from, static_cast<size_t>(r.ptr - from));
  return done();
}

inline JsonWriter& JsonWriter::unsignedInteger(uint64_t v) {
  char buf[24];
  buf[0] = ',';
  auto r = std::to_chars(buf + 1, buf + sizeof buf, v);
  const char* from = needComma_ ? buf : buf + 1;
  out_->append(from, static_cast<size_t>(r.ptr - from));
  return done();
}

inline JsonWriter& JsonWriter::integers(const std::vector<int64_t>& values) {
  beginArray();
  for (int64_t v : values) integer(v);
  return endArray();
}

inline JsonWriter& JsonWriter::strings(const std::vector<std::string>& values) {
  beginArray();
  for (const auto& s : values) string(s);
  return endArray();
}

}  // namespace spmd::serialize
