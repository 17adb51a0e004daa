// Pickle reader and writer (see Pickle.h). The reader is Python's
// Unpickler.load loop over a bounds-checked cursor: a value stack, a stack
// of MARK positions (no pop may cross the innermost mark), and a memo.
#include "io/Pickle.h"

#include <bit>
#include <unordered_map>
#include <unordered_set>

namespace spmd::io {
namespace {

using Kind = PyValue::Kind;

constexpr size_t kMaxValues = size_t{1} << 24;
constexpr int kMaxDepth = 200;
constexpr size_t kMaxVisits = size_t{1} << 25;  // cycle checks, all inserts together

PyRef make(Kind k) {
  auto v = std::make_shared<PyValue>();
  v->kind = k;
  return v;
}

class Reader {
 public:
  Reader(std::string_view bytes, std::string where) : in_(bytes), where_(std::move(where)) {}

  Expected<PyRef> run() {
    while (true) {
      if (pos_ >= in_.size()) return fail("no STOP opcode before the end");
      start_ = pos_;
      auto op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') {
        if (stack_.size() != 1 || !marks_.empty())
          return fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
        return stack_.back();
      }
      SPMD_RETURN_IF_ERROR(step(op));
    }
  }

 private:
  Status fail(const std::string& what) const {
    return Status::error(where_ + ": not a pickle this reader accepts: " + what + " at byte " +
                         std::to_string(start_));
  }

  Expected<std::string_view> take(uint64_t n) {
    if (n > in_.size() - pos_) return fail("a read past the end of the data");
    std::string_view s = in_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  // An unsigned little-endian integer of `n` bytes.
  Expected<uint64_t> uint(int n) {
    SPMD_ASSIGN_OR_RETURN(std::string_view s, take(static_cast<uint64_t>(n)));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<size_t>(i)]);
    return v;
  }

  Expected<std::string_view> line() {
    size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) return fail("a text argument without its newline");
    std::string_view s = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  Status push(PyRef v) {
    if (++made_ > kMaxValues) return fail("more than 16 million values");
    stack_.push_back(std::move(v));
    return Status::ok();
  }

  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  Expected<PyRef> pop() {
    if (stack_.size() <= floor()) return fail("stack underflow");
    PyRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }

  Expected<PyRef> top() {
    if (stack_.size() <= floor()) return fail("stack underflow");
    return stack_.back();
  }

  // The values since the innermost MARK, which is dropped.
  Expected<std::vector<PyRef>> popMark() {
    if (marks_.empty()) return fail("no MARK to pop to");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> out(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                           std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return out;
  }

  Status pushInt(std::string_view digits) {
    int64_t v = 0;
    bool neg = !digits.empty() && digits[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == digits.size() || digits.size() > 19 + i) return fail("a malformed or too large text integer");
    for (; i < digits.size(); ++i) {
      if (digits[i] < '0' || digits[i] > '9') return fail("a malformed text integer");
      v = v * 10 + (digits[i] - '0');
    }
    return push(PyValue::ofInt(neg ? -v : v));
  }

  // LONG1/LONG4: `n` bytes of two's complement, little-endian.
  Status pushLong(uint64_t n) {
    if (n > 8) return fail("an integer beyond 64 bits");
    SPMD_ASSIGN_OR_RETURN(std::string_view s, take(n));
    uint64_t v = 0;
    for (size_t i = s.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(s[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(s[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    return push(PyValue::ofInt(static_cast<int64_t>(v)));
  }

  Status pushString(Kind kind, int lengthBytes) {
    SPMD_ASSIGN_OR_RETURN(uint64_t n, uint(lengthBytes));
    SPMD_ASSIGN_OR_RETURN(std::string_view s, take(n));
    return push(kind == Kind::Str ? PyValue::str(std::string(s)) : PyValue::bytes(std::string(s)));
  }

  Status put(uint64_t key) {
    SPMD_ASSIGN_OR_RETURN(PyRef v, top());
    if (memo_.size() >= kMaxValues) return fail("a memo of more than 16 million values");
    memo_[key] = std::move(v);
    return Status::ok();
  }

  Status get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return fail("a memo key (" + std::to_string(key) + ") never stored");
    return push(it->second);
  }

  Expected<uint64_t> textKey() {
    SPMD_ASSIGN_OR_RETURN(std::string_view s, line());
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos)
      return fail("a malformed memo key");
    return std::stoull(std::string(s));
  }

  Status tuple(size_t n) {
    if (stack_.size() < floor() + n) return fail("stack underflow");
    std::vector<PyRef> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return push(PyValue::tuple(std::move(items)));
  }

  // REDUCE / NEWOBJ: a call of a class or function named by a global.
  Status call(bool newobj) {
    SPMD_ASSIGN_OR_RETURN(PyRef args, pop());
    SPMD_ASSIGN_OR_RETURN(PyRef cls, pop());
    if (cls->kind != Kind::Global) return fail("a call of something other than a global");
    if (args->kind != Kind::Tuple) return fail("call arguments that are not a tuple");
    return push(PyValue::object(cls->text, cls->name, args->items, newobj));
  }

  Status global(std::string module, std::string name) {
    if (module.empty() || name.empty()) return fail("an empty global name");
    return push(PyValue::global(std::move(module), std::move(name)));
  }

  // Errors when inserting `values` into `target` would make a cycle (a
  // shared_ptr cycle would leak; DCP's pickles have none). Each check walks
  // what is inserted; all walks together are capped.
  Status acyclic(const PyValue* target, const std::vector<PyRef>& values) {
    std::unordered_set<const PyValue*> seen;
    std::vector<const PyValue*> todo;
    todo.reserve(values.size());
    for (const PyRef& v : values) todo.push_back(v.get());
    while (!todo.empty()) {
      const PyValue* v = todo.back();
      todo.pop_back();
      if (v == target) return fail("a value that contains itself");
      if (!seen.insert(v).second) continue;
      if (++visits_ > kMaxVisits) return fail("too many shared references");
      for (const PyRef& i : v->items) todo.push_back(i.get());
      for (const auto& [k, x] : v->entries) {
        todo.push_back(k.get());
        todo.push_back(x.get());
      }
      if (v->state) todo.push_back(v->state.get());
    }
    return Status::ok();
  }

  Status setItems(std::vector<PyRef> kv) {
    SPMD_ASSIGN_OR_RETURN(PyRef d, top());
    if (d->kind != Kind::Dict) return fail("SETITEM(S) on something other than a dict");
    if (kv.size() % 2) return fail("SETITEMS with an odd number of values");
    SPMD_RETURN_IF_ERROR(acyclic(d.get(), kv));
    for (size_t i = 0; i < kv.size(); i += 2) d->entries.emplace_back(kv[i], kv[i + 1]);
    return Status::ok();
  }

  Status append(std::vector<PyRef> items) {
    SPMD_ASSIGN_OR_RETURN(PyRef l, top());
    if (l->kind != Kind::List) return fail("APPEND(S) on something other than a list");
    SPMD_RETURN_IF_ERROR(acyclic(l.get(), items));
    l->items.insert(l->items.end(), items.begin(), items.end());
    return Status::ok();
  }

  Status build() {
    SPMD_ASSIGN_OR_RETURN(PyRef state, pop());
    SPMD_ASSIGN_OR_RETURN(PyRef obj, top());
    if (obj->kind != Kind::Object) return fail("BUILD on something other than an object");
    SPMD_RETURN_IF_ERROR(acyclic(obj.get(), {state}));
    obj->state = std::move(state);
    return Status::ok();
  }

  Status step(uint8_t op);       // scalars, strings, framing
  Status structure(uint8_t op);  // containers, globals, calls
  Status stackOrMemo(uint8_t op);

  std::string_view in_;
  std::string where_;
  size_t pos_ = 0, start_ = 0, made_ = 0, visits_ = 0;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyRef> memo_;
};

Status Reader::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      SPMD_ASSIGN_OR_RETURN(uint64_t v, uint(1));
      return v <= 5 ? Status::ok() : fail("protocol " + std::to_string(v));
    }
    case 0x95:
      return uint(8).status();  // FRAME: a hint only
    case '(':
      marks_.push_back(stack_.size());
      return Status::ok();
    case 'N':
      return push(PyValue::none());
    case 0x88:
      return push(PyValue::ofBool(true));
    case 0x89:
      return push(PyValue::ofBool(false));
    case 'K': {
      SPMD_ASSIGN_OR_RETURN(uint64_t v, uint(1));
      return push(PyValue::ofInt(static_cast<int64_t>(v)));
    }
    case 'M': {
      SPMD_ASSIGN_OR_RETURN(uint64_t v, uint(2));
      return push(PyValue::ofInt(static_cast<int64_t>(v)));
    }
    case 'J': {
      SPMD_ASSIGN_OR_RETURN(uint64_t v, uint(4));
      return push(PyValue::ofInt(static_cast<int32_t>(static_cast<uint32_t>(v))));
    }
    case 0x8a: {
      SPMD_ASSIGN_OR_RETURN(uint64_t n, uint(1));
      return pushLong(n);
    }
    case 0x8b: {
      SPMD_ASSIGN_OR_RETURN(uint64_t n, uint(4));
      return pushLong(n);
    }
    case 'I':
    case 'L': {
      SPMD_ASSIGN_OR_RETURN(std::string_view s, line());
      if (op == 'L' && !s.empty() && s.back() == 'L') s.remove_suffix(1);
      if (op == 'I' && (s == "00" || s == "01")) return push(PyValue::ofBool(s == "01"));
      return pushInt(s);
    }
    case 'G': {
      SPMD_ASSIGN_OR_RETURN(std::string_view s, take(8));
      uint64_t bits = 0;
      for (char c : s) bits = (bits << 8) | static_cast<uint8_t>(c);
      return push(PyValue::ofFloat(std::bit_cast<double>(bits)));
    }
    case 'X':
      return pushString(Kind::Str, 4);
    case 0x8c:
      return pushString(Kind::Str, 1);
    case 0x8d:
      return pushString(Kind::Str, 8);
    case 'B':
      return pushString(Kind::Bytes, 4);
    case 'C':
      return pushString(Kind::Bytes, 1);
    case 0x8e:
      return pushString(Kind::Bytes, 8);
    default:
      return structure(op);
  }
}

Status Reader::structure(uint8_t op) {
  switch (op) {
    case ')':
      return push(PyValue::tuple({}));
    case 0x85:
      return tuple(1);
    case 0x86:
      return tuple(2);
    case 0x87:
      return tuple(3);
    case 't': {
      SPMD_ASSIGN_OR_RETURN(auto items, popMark());
      return push(PyValue::tuple(std::move(items)));
    }
    case ']':
      return push(PyValue::list({}));
    case 'l': {
      SPMD_ASSIGN_OR_RETURN(auto items, popMark());
      return push(PyValue::list(std::move(items)));
    }
    case '}':
      return push(PyValue::dict());
    case 'd': {
      SPMD_ASSIGN_OR_RETURN(auto kv, popMark());
      SPMD_RETURN_IF_ERROR(push(PyValue::dict()));
      return setItems(std::move(kv));
    }
    case 's': {
      SPMD_ASSIGN_OR_RETURN(PyRef v, pop());
      SPMD_ASSIGN_OR_RETURN(PyRef k, pop());
      return setItems({k, v});
    }
    case 'u': {
      SPMD_ASSIGN_OR_RETURN(auto kv, popMark());
      return setItems(std::move(kv));
    }
    case 'a': {
      SPMD_ASSIGN_OR_RETURN(PyRef v, pop());
      return append({v});
    }
    case 'e': {
      SPMD_ASSIGN_OR_RETURN(auto items, popMark());
      return append(std::move(items));
    }
    case 'c': {
      SPMD_ASSIGN_OR_RETURN(std::string_view module, line());
      SPMD_ASSIGN_OR_RETURN(std::string_view name, line());
      return global(std::string(module), std::string(name));
    }
    case 0x93: {  // STACK_GLOBAL
      SPMD_ASSIGN_OR_RETURN(PyRef name, pop());
      SPMD_ASSIGN_OR_RETURN(PyRef module, pop());
      if (name->kind != Kind::Str || module->kind != Kind::Str) return fail("STACK_GLOBAL of non-strings");
      return global(module->text, name->text);
    }
    case 'R':
      return call(false);
    case 0x81:
      return call(true);
    case 'b':
      return build();
    default:
      return stackOrMemo(op);
  }
}

Status Reader::stackOrMemo(uint8_t op) {
  switch (op) {
    case '0':
      return pop().status();
    case '1':
      return popMark().status();
    case '2': {
      SPMD_ASSIGN_OR_RETURN(PyRef v, top());
      return push(v);
    }
    case 0x94:
      return put(memo_.size());
    case 'q': {
      SPMD_ASSIGN_OR_RETURN(uint64_t k, uint(1));
      return put(k);
    }
    case 'r': {
      SPMD_ASSIGN_OR_RETURN(uint64_t k, uint(4));
      return put(k);
    }
    case 'p': {
      SPMD_ASSIGN_OR_RETURN(uint64_t k, textKey());
      return put(k);
    }
    case 'h': {
      SPMD_ASSIGN_OR_RETURN(uint64_t k, uint(1));
      return get(k);
    }
    case 'j': {
      SPMD_ASSIGN_OR_RETURN(uint64_t k, uint(4));
      return get(k);
    }
    case 'g': {
      SPMD_ASSIGN_OR_RETURN(uint64_t k, textKey());
      return get(k);
    }
    default: {
      static const char* hex = "0123456789abcdef";
      return fail(std::string("opcode 0x") + hex[op >> 4] + hex[op & 15] +
                  " (persistent ids, sets, extensions and buffers are not read)");
    }
  }
}

}  // namespace

PyRef PyValue::none() { return make(Kind::None); }
PyRef PyValue::ofBool(bool v) {
  PyRef r = make(Kind::Bool);
  r->boolean = v;
  return r;
}
PyRef PyValue::ofInt(int64_t v) {
  PyRef r = make(Kind::Int);
  r->integer = v;
  return r;
}
PyRef PyValue::ofFloat(double v) {
  PyRef r = make(Kind::Float);
  r->real = v;
  return r;
}
PyRef PyValue::str(std::string v) {
  PyRef r = make(Kind::Str);
  r->text = std::move(v);
  return r;
}
PyRef PyValue::bytes(std::string v) {
  PyRef r = make(Kind::Bytes);
  r->text = std::move(v);
  return r;
}
PyRef PyValue::tuple(std::vector<PyRef> v) {
  PyRef r = make(Kind::Tuple);
  r->items = std::move(v);
  return r;
}
PyRef PyValue::list(std::vector<PyRef> v) {
  PyRef r = make(Kind::List);
  r->items = std::move(v);
  return r;
}
PyRef PyValue::dict(std::vector<std::pair<PyRef, PyRef>> v) {
  PyRef r = make(Kind::Dict);
  r->entries = std::move(v);
  return r;
}
PyRef PyValue::global(std::string module, std::string name) {
  PyRef r = make(Kind::Global);
  r->text = std::move(module);
  r->name = std::move(name);
  return r;
}
PyRef PyValue::object(std::string module, std::string name, std::vector<PyRef> args, bool newobj,
                      PyRef state) {
  PyRef r = make(Kind::Object);
  r->text = std::move(module);
  r->name = std::move(name);
  r->items = std::move(args);
  r->newobj = newobj;
  r->state = std::move(state);
  return r;
}

bool PyValue::isObject(std::string_view module, std::string_view cls) const {
  return kind == Kind::Object && text == module && name == cls;
}

PyRef PyValue::get(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::Str && k->text == key) return v;
  return nullptr;
}

Expected<PyRef> readPickle(std::string_view bytes, const std::string& where) {
  return Reader(bytes, where).run();
}

}  // namespace spmd::io
