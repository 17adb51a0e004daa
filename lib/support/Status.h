// Status and Expected<T>: the error currency of every spmdc library.
//
//   Expected<Graph> g = readGraph(path);
//   if (!g) return g.status().withContext(path);   // "model.pt2: <what>"
//   SPMD_ASSIGN_OR_RETURN(auto archive, openArchive(path));
//   SPMD_RETURN_IF_ERROR(validate(*archive));
//
// Library code never throws; exceptions from dependencies are caught at the
// library boundary and turned into a Status. Broken internal invariants abort
// through SPMD_CHECK with file:line.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace spmd {

/// The outcome of an operation: OK, or an error with a one-line message.
class [[nodiscard]] Status {
 public:
  /// An OK status.
  Status() = default;
  /// An OK status (reads better at call sites than `Status()`).
  static Status ok() { return Status(); }
  /// An error carrying `message` (no trailing newline, no "error:" prefix).
  static Status error(std::string message) {
    Status s;
    s.message_ = std::make_shared<std::string>(std::move(message));
    return s;
  }

  /// True when no error occurred.
  bool isOk() const { return message_ == nullptr; }
  /// The error text; empty for OK.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }
  /// A copy whose message reads "<prefix>: <message>"; OK stays OK.
  Status withContext(const std::string& prefix) const {
    if (isOk()) return *this;
    return error(prefix + ": " + *message_);
  }

 private:
  std::shared_ptr<const std::string> message_;
};

/// Either a value of type T or an error Status.
/// The caller's file and line, taken as a defaulted argument (what
/// std::source_location does; Debian 12's clang 14 lacks it on libstdc++,
/// and GCC and clang both have these builtins).
struct SourceLocation {
  static constexpr SourceLocation current(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
  const char* file;
  int line;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  /// Holds a value.
  Expected(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// Holds an error; `status` must not be OK (else aborts naming the caller's line).
  Expected(Status status,  // NOLINT(google-explicit-constructor)
           SourceLocation where = SourceLocation::current())
      : v_(std::move(status)) {
    if (std::get<Status>(v_).isOk()) abortAt(where, "Expected built from OK Status");
  }

  /// True when a value is held.
  bool hasValue() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return hasValue(); }
  /// The error (OK when a value is held).
  Status status() const { return hasValue() ? Status::ok() : std::get<Status>(v_); }

  /// The value; when an error is held, aborts with the caller's file:line
  /// and the error. (Operators cannot take a location: `*e` and `e->`
  /// report this header's line, with the error text.)
  T& value(SourceLocation where = SourceLocation::current()) & {
    check(where);
    return std::get<T>(v_);
  }
  const T& value(SourceLocation where = SourceLocation::current()) const& {
    check(where);
    return std::get<T>(v_);
  }
  T&& value(SourceLocation where = SourceLocation::current()) && {
    check(where);
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  [[noreturn]] static void abortInvariant(const char* file, int line, const char* what);

 private:
  [[noreturn]] static void abortAt(const SourceLocation& where, const char* what) {
    abortInvariant(where.file, where.line, what);
  }
  void check(const SourceLocation& where) const {
    if (!hasValue()) abortAt(where, std::get<Status>(v_).message().c_str());
  }
  std::variant<T, Status> v_;
};

/// Aborts the process with "file:line: invariant violated: what".
[[noreturn]] void abortWithLocation(const char* file, int line, const char* what);

template <typename T>
void Expected<T>::abortInvariant(const char* file, int line, const char* what) {
  abortWithLocation(file, line, what);
}

}  // namespace spmd

#define SPMD_CONCAT_INNER_(a, b) a##b
#define SPMD_CONCAT_(a, b) SPMD_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function when it is an error.
#define SPMD_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::spmd::Status spmd_status_ = (expr);          \
    if (!spmd_status_.isOk()) return spmd_status_; \
  } while (0)

// `lhs` may be a declaration ("auto x"), so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SPMD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.hasValue()) return tmp.status();         \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

/// Evaluates an Expected `expr`; on error returns its Status, else assigns
/// the value to `lhs` (which may be a declaration).
#define SPMD_ASSIGN_OR_RETURN(lhs, expr) \
  SPMD_ASSIGN_OR_RETURN_IMPL_(SPMD_CONCAT_(spmd_expected_, __LINE__), lhs, expr)

/// Aborts with file:line when an internal invariant does not hold.
#define SPMD_CHECK(cond)                                               \
  do {                                                                 \
    if (!(cond)) ::spmd::abortWithLocation(__FILE__, __LINE__, #cond); \
  } while (0)
