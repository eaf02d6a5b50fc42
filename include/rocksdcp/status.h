// Status and Result<T>: how every fallible rocksdcp call reports failure.
//
// rocksdcp never throws across its API. A call that can fail returns a
// Status (success or a code plus a message) or a Result<T> (a value or a
// non-OK Status). Both are [[nodiscard]]: dropping one is a compile warning.
// To drop an error on purpose, say so with `.IgnoreError()`, which is easy to
// grep for.
//
// Thread safety: a Status or Result is a plain value. Distinct objects may be
// used from distinct threads; one object needs external synchronization.

#ifndef ROCKSDCP_STATUS_H_
#define ROCKSDCP_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rocksdcp {

// The category of a failure. Callers branch on the code; people read the
// message.
enum class StatusCode : int {
  kOk = 0,
  // The named checkpoint, item (fqn) or store does not exist.
  kNotFound = 1,
  // Stored bytes failed verification: checksum, FlatBuffers verifier, size.
  kCorruption = 2,
  // The request is malformed: bad id, wrong dtype or shape, bad plan.
  kInvalidArgument = 3,
  // The operating system or RocksDB failed to read or write.
  kIOError = 4,
  // The thing to create exists already (saving an existing checkpoint id
  // without overwrite).
  kAlreadyExists = 5,
  // Someone else holds it: the store is locked by another process, or the
  // same checkpoint id is being saved by another writer.
  kBusy = 6,
  // A call was made out of order or on an object in the wrong state.
  kFailedPrecondition = 7,
  // The operation is valid but this build or backend does not support it.
  kNotSupported = 8,
  // A step of a checkpoint failed on one or more ranks; the message names
  // them.
  kAborted = 9,
  // A bug in rocksdcp. Please report it.
  kInternal = 10,
  // Memory ran out: the operation stopped there, and nothing committed
  // changed. The message says what it was doing and how much it asked for.
  kResourceExhausted = 11,
};

// The largest StatusCode value.
inline constexpr StatusCode kLastStatusCode = StatusCode::kResourceExhausted;

// Returns a stable, human-readable name such as "NotFound".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status OK() { return Status(); }
  static Status NotFound(std::string msg) {
    return Status(StatusCode::kNotFound, std::move(msg));
  }
  static Status Corruption(std::string msg) {
    return Status(StatusCode::kCorruption, std::move(msg));
  }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status IOError(std::string msg) {
    return Status(StatusCode::kIOError, std::move(msg));
  }
  static Status AlreadyExists(std::string msg) {
    return Status(StatusCode::kAlreadyExists, std::move(msg));
  }
  static Status Busy(std::string msg) {
    return Status(StatusCode::kBusy, std::move(msg));
  }
  static Status FailedPrecondition(std::string msg) {
    return Status(StatusCode::kFailedPrecondition, std::move(msg));
  }
  static Status NotSupported(std::string msg) {
    return Status(StatusCode::kNotSupported, std::move(msg));
  }
  static Status Aborted(std::string msg) {
    return Status(StatusCode::kAborted, std::move(msg));
  }
  static Status Internal(std::string msg) {
    return Status(StatusCode::kInternal, std::move(msg));
  }
  static Status ResourceExhausted(std::string msg) {
    return Status(StatusCode::kResourceExhausted, std::move(msg));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsCorruption() const { return code_ == StatusCode::kCorruption; }
  bool IsInvalidArgument() const {
    return code_ == StatusCode::kInvalidArgument;
  }
  bool IsIOError() const { return code_ == StatusCode::kIOError; }
  bool IsAlreadyExists() const { return code_ == StatusCode::kAlreadyExists; }
  bool IsBusy() const { return code_ == StatusCode::kBusy; }
  bool IsFailedPrecondition() const {
    return code_ == StatusCode::kFailedPrecondition;
  }
  bool IsNotSupported() const { return code_ == StatusCode::kNotSupported; }
  bool IsAborted() const { return code_ == StatusCode::kAborted; }
  bool IsResourceExhausted() const {
    return code_ == StatusCode::kResourceExhausted;
  }

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const;

  // "OK", or "<CodeName>: <message>".
  std::string ToString() const;

  // Drops this status on purpose. Use it where an error can't change what
  // happens next (cleanup after another failure), so the choice is visible.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

// A value of type T, or the Status that explains why there is none.
//
// REQUIRES: a Result is never constructed from an OK Status (that would be a
// Result with neither value nor error; it is turned into kInternal).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : rep_(std::in_place_index<0>, std::move(value)) {}
  Result(Status status) : rep_(std::in_place_index<1>, std::move(status)) {
    if (std::get<1>(rep_).ok()) {
      rep_.template emplace<1>(Status::Internal(
          "Result constructed from an OK Status without a value"));
    }
  }

  bool ok() const { return rep_.index() == 0; }

  // The error, or OK when there is a value.
  Status status() const { return ok() ? Status::OK() : std::get<1>(rep_); }

  // REQUIRES: ok().
  T& value() & {
    assert(ok());
    return std::get<0>(rep_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(rep_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(rep_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  void IgnoreError() const {}

 private:
  std::variant<T, Status> rep_;
};

}  // namespace rocksdcp

#define ROCKSDCP_CONCAT_INNER_(a, b) a##b
#define ROCKSDCP_CONCAT_(a, b) ROCKSDCP_CONCAT_INNER_(a, b)

// Evaluates `expr` (a Status); returns it from the enclosing function if it
// is not OK.
#define ROCKSDCP_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::rocksdcp::Status rocksdcp_status_ = (expr);        \
    if (!rocksdcp_status_.ok()) return rocksdcp_status_; \
  } while (0)

// Evaluates `rexpr` (a Result<T>); on error returns its Status, otherwise
// moves the value into `lhs`, which may be a declaration (`auto x`).
#define ROCKSDCP_ASSIGN_OR_RETURN(lhs, rexpr) \
  ROCKSDCP_ASSIGN_OR_RETURN_IMPL_(            \
      ROCKSDCP_CONCAT_(rocksdcp_result_, __LINE__), lhs, rexpr)

#define ROCKSDCP_ASSIGN_OR_RETURN_IMPL_(result, lhs, rexpr) \
  auto result = (rexpr);                                    \
  if (!result.ok()) return result.status();                 \
  lhs = std::move(result).value()

#endif  // ROCKSDCP_STATUS_H_
