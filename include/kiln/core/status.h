// Status and Result<T>: how every fallible kiln call reports failure.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

/// Broad category of a failure; the message carries the detail.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  ///< input that does not fit what was asked (user error)
  kNotFound,         ///< a named thing that does not exist
  kParseError,       ///< malformed text or bytes
  kIoError,          ///< the file system refused
  kUnsupported,      ///< valid input that kiln cannot handle (yet)
  kOutOfRange,       ///< a size, count or offset past a limit
  kResourceExhausted,  ///< memory (or another resource) that the machine or a limit cannot give
  kInternal,         ///< a broken kiln invariant
  kInvalidProgram,   ///< a program file that is malformed (ExecuTorch's InvalidProgram)
  kDelegateFailed,   ///< a delegate's init or execute failed (ExecuTorch's DelegateInvalidHandle)
};

/// Name of a status code, e.g. "invalid argument".
const char* status_code_name(StatusCode code);

/// Success, or a code and a message naming what failed and where.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  /// The success value.
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Prefixes the message with context ("while reading X: ...").
  Status with_context(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, fmt::format("{}: {}", context, message_));
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Builds a failed Status with a fmt-formatted message.
template <typename... Args>
Status make_error(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status parse_error(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kParseError, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status unsupported(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kUnsupported, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status io_error(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kIoError, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status out_of_range(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kOutOfRange, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status resource_exhausted(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kResourceExhausted, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status internal_error(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(format, std::forward<Args>(args)...));
}

/// A value of type T, or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(data_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  /// The failure; only valid when !ok().
  const Status& status() const { return std::get<Status>(data_); }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

/// Returns the Status from the enclosing function if `expr` failed.
#define KILN_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::kiln::Status kiln_status_ = (expr);         \
    if (!kiln_status_.ok()) return kiln_status_;  \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

/// `KILN_ASSIGN_OR_RETURN(auto x, f());` declares x from a Result or returns its Status.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_result_, __LINE__), lhs, expr)

/// Aborts on a broken kiln invariant (never on user input).
#define KILN_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) ::kiln::detail::check_failed(#cond, __FILE__, __LINE__);                  \
  } while (0)

namespace kiln::detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line);
}  // namespace kiln::detail
