// Helpers shared by the fuzz targets (see README.md).
//
// A target fails by aborting, which libFuzzer reports as a crash and saves
// the input for. Besides what ASan and UBSan catch, the targets check the
// invariants a reader relies on after a successful decode.

#ifndef ROCKSDCP_FUZZ_FUZZ_UTIL_H_
#define ROCKSDCP_FUZZ_FUZZ_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "rocksdcp/status.h"

namespace rocksdcp::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* what,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed %s\n", file, line, what,
               detail.c_str());
  std::abort();
}

// Aborts (a libFuzzer crash) unless `cond` holds.
#define FUZZ_CHECK(cond)                                                \
  do {                                                                  \
    if (!(cond)) ::rocksdcp::fuzz::Fail(__FILE__, __LINE__, #cond, ""); \
  } while (0)

// Aborts unless `result` is OK, printing its status.
#define FUZZ_CHECK_OK(result)                                      \
  do {                                                             \
    if (!(result).ok()) {                                          \
      ::rocksdcp::fuzz::Fail(__FILE__, __LINE__, #result " is OK", \
                             (result).status().ToString());        \
    }                                                              \
  } while (0)

inline std::string_view AsChars(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A copy of the input one byte past an 8-byte boundary. libFuzzer's input
// is aligned, but RocksDB returns a value wherever it sits in its block,
// so each decoder also runs here, where UBSan catches any read that
// assumes alignment. The copy ends where its allocation does, so ASan
// still catches a read one byte past it.
class Misaligned {
 public:
  // operator new[] returns 16-byte aligned memory.
  explicit Misaligned(std::string_view input)
      : buffer_(new char[input.size() + 1]),
        view_(buffer_.get() + 1, input.size()) {
    if (!input.empty())
      std::memcpy(buffer_.get() + 1, input.data(), input.size());
  }
  std::string_view view() const { return view_; }

 private:
  std::unique_ptr<char[]> buffer_;
  std::string_view view_;
};

// Aborts unless two decodes of the same bytes agree: both OK with equal
// values (`equal`), or both failing with the same status.
template <typename T, typename Equal>
void CheckSameOutcome(const Result<T>& a, const Result<T>& b, Equal equal) {
  FUZZ_CHECK(a.ok() == b.ok());
  if (a.ok()) {
    FUZZ_CHECK(equal(*a, *b));
  } else {
    FUZZ_CHECK(a.status() == b.status());
  }
}

// The round trip every value fuzzer makes: decodes `input` where it lies
// and misaligned, which must agree; for an accepted value runs `check`
// (what a reader relies on), then re-encodes it, which must decode to an
// equal value and be a fixed point of decode and encode.
template <typename T, typename Decode, typename Encode, typename Equal,
          typename Check>
void CheckRoundTrip(std::string_view input, Decode decode, Encode encode,
                    Equal equal, Check check) {
  const Misaligned misaligned(input);
  const Result<T> value = decode(input);
  CheckSameOutcome(value, decode(misaligned.view()), equal);
  if (!value.ok()) return;
  check(*value);
  const std::string encoded = encode(*value);
  const Result<T> again = decode(encoded);
  FUZZ_CHECK_OK(again);
  FUZZ_CHECK(equal(*value, *again));
  FUZZ_CHECK(encode(*again) == encoded);
}

}  // namespace rocksdcp::fuzz

#endif  // ROCKSDCP_FUZZ_FUZZ_UTIL_H_
