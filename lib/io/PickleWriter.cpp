// Pickle writer and structural equality (see Pickle.h); the reader is in
// Pickle.cpp.
#include <bit>

#include "io/Pickle.h"

namespace spmd::io {
namespace {

using Kind = PyValue::Kind;

constexpr int kMaxDepth = 200;

// Writer: protocol 4 opcodes (no FRAME, which is optional), no memo.
class Writer {
 public:
  Status value(const PyValue& v, int depth) {
    if (depth > kMaxDepth) return Status::error("cannot pickle a value nested deeper than 200 (a cycle?)");
    switch (v.kind) {
      case Kind::None:
        out_ += 'N';
        return Status::ok();
      case Kind::Bool:
        out_ += static_cast<char>(v.boolean ? 0x88 : 0x89);
        return Status::ok();
      case Kind::Int:
        integer(v.integer);
        return Status::ok();
      case Kind::Float: {
        out_ += 'G';
        auto bits = std::bit_cast<uint64_t>(v.real);
        for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
        return Status::ok();
      }
      case Kind::Str:
      case Kind::Bytes:
        out_ += v.kind == Kind::Str ? 'X' : 'B';
        little(v.text.size(), 4);
        out_ += v.text;
        return Status::ok();
      case Kind::Tuple:
        return tuple(v.items, depth);
      case Kind::List:
        out_ += ']';
        return v.items.empty() ? Status::ok() : marked(v.items, 'e', depth);
      case Kind::Dict:
        return dict(v, depth);
      case Kind::Global:
        global(v);
        return Status::ok();
      case Kind::Object:
        global(v);
        SPMD_RETURN_IF_ERROR(tuple(v.items, depth));
        out_ += v.newobj ? static_cast<char>(0x81) : 'R';
        if (!v.state) return Status::ok();
        SPMD_RETURN_IF_ERROR(value(*v.state, depth + 1));
        out_ += 'b';
        return Status::ok();
    }
    return Status::ok();
  }

  std::string out_ = "\x80\x04";

 private:
  void little(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }

  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      out_ += 'K';
      little(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      out_ += 'M';
      little(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      little(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      out_ += static_cast<char>(0x8a);
      out_ += static_cast<char>(8);
      little(static_cast<uint64_t>(v), 8);
    }
  }

  // STACK_GLOBAL: names may hold any character (GLOBAL's lines could not hold a newline).
  void global(const PyValue& v) {
    for (const std::string* s : {&v.text, &v.name}) {
      out_ += 'X';
      little(s->size(), 4);
      out_ += *s;
    }
    out_ += static_cast<char>(0x93);
  }

  Status marked(const std::vector<PyRef>& items, char close, int depth) {
    out_ += '(';
    for (const PyRef& i : items) SPMD_RETURN_IF_ERROR(value(*i, depth + 1));
    out_ += close;
    return Status::ok();
  }

  Status tuple(const std::vector<PyRef>& items, int depth) {
    if (items.empty() || items.size() > 3) {
      if (items.empty()) out_ += ')';
      return items.empty() ? Status::ok() : marked(items, 't', depth);
    }
    for (const PyRef& i : items) SPMD_RETURN_IF_ERROR(value(*i, depth + 1));
    out_ += static_cast<char>(0x84 + items.size());
    return Status::ok();
  }

  Status dict(const PyValue& v, int depth) {
    out_ += '}';
    if (v.entries.empty()) return Status::ok();
    out_ += '(';
    for (const auto& [k, x] : v.entries) {
      SPMD_RETURN_IF_ERROR(value(*k, depth + 1));
      SPMD_RETURN_IF_ERROR(value(*x, depth + 1));
    }
    out_ += 'u';
    return Status::ok();
  }
};

bool same(const PyValue& a, const PyValue& b, int depth) {
  if (depth > kMaxDepth || a.kind != b.kind || a.boolean != b.boolean || a.integer != b.integer ||
      std::bit_cast<uint64_t>(a.real) != std::bit_cast<uint64_t>(b.real) || a.text != b.text ||
      a.name != b.name || a.newobj != b.newobj || a.items.size() != b.items.size() ||
      a.entries.size() != b.entries.size() || !a.state != !b.state)
    return false;
  for (size_t i = 0; i < a.items.size(); ++i)
    if (!same(*a.items[i], *b.items[i], depth + 1)) return false;
  for (size_t i = 0; i < a.entries.size(); ++i)
    if (!same(*a.entries[i].first, *b.entries[i].first, depth + 1) ||
        !same(*a.entries[i].second, *b.entries[i].second, depth + 1))
      return false;
  return !a.state || same(*a.state, *b.state, depth + 1);
}

}  // namespace

Expected<std::string> writePickle(const PyValue& value) {
  Writer w;
  SPMD_RETURN_IF_ERROR(w.value(value, 0));
  w.out_ += '.';
  return std::move(w.out_);
}

bool samePyValue(const PyValue& a, const PyValue& b) { return same(a, b, 0); }

}  // namespace spmd::io
