// Shared test helpers: tensors with their own storage, ranks on threads,
// docs/errors.md's rows, and a fresh temp directory per test. The Status
// matchers (StatusIs, IsOk, ASSERT_OK...) are rocksdcp::testing's
// (rocksdcp/testing/status_matchers.h).

#ifndef ROCKSDCP_TESTS_TEST_UTIL_H_
#define ROCKSDCP_TESTS_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "rocksdcp/collective.h"
#include "rocksdcp/status.h"
#include "rocksdcp/tensor.h"
#include "rocksdcp/testing/ranks.h"
#include "rocksdcp/testing/status_matchers.h"
#include "rocksdcp/testing/tensors.h"
#include "util/ready_future.h"

namespace rocksdcp::testing {

using ::rocksdcp::util::ReadyFuture;

// Whether this build runs under a sanitizer: ROCKSDCP_SANITIZE set, which
// defines ROCKSDCP_SANITIZED for the tests (GCC and clang name their
// sanitizers' macros differently). Such builds run several times slower
// and look for memory and thread errors, which a sample of an exhaustive
// sweep shows as well as all of it: sweeps test every
// kSanitizerSweepDivisor-th point there.
#ifdef ROCKSDCP_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
inline constexpr uint64_t kSanitizerSweepDivisor = 4;

// A contiguous tensor with its own storage.
struct OwnedTensor {
  std::vector<uint8_t> bytes;
  TensorView view;
};

// Deterministic, seed-dependent contents.
OwnedTensor RandomTensor(DType dtype, std::vector<int64_t> sizes,
                         uint64_t seed);
OwnedTensor ZeroTensor(DType dtype, std::vector<int64_t> sizes);
std::string RandomBytes(size_t n, uint64_t seed);

// Equal dtype, sizes and elements (through both views' strides).
::testing::AssertionResult SameTensor(const TensorView& a, const TensorView& b);

// One row of docs/errors.md's tables: | `name` | situation | Code | `message` |
struct ErrorDocRow {
  std::string code;
  std::string message;
};

// The rows of the error document at `path` whose names start with
// `name_prefix`, by name. A row named twice fails the calling test.
std::map<std::string, ErrorDocRow> ReadErrorDoc(const std::string& path,
                                                const std::string& name_prefix);

// Checks that `got` (a scenario's code and message) is what row `name` of
// `doc` says; with ROCKSDCP_PRINT_ERRORS set, prints the row as the code
// words it, to paste into the document.
::testing::AssertionResult IsDocumentedError(
    const std::map<std::string, ErrorDocRow>& doc, const std::string& name,
    const ErrorDocRow& got);

// The file descriptors this process holds open now.
uint64_t OpenFileDescriptors();

// A row name as a test name: "id-empty" -> "id_empty".
std::string ErrorRowTestName(const ::testing::TestParamInfo<const char*>& info);

// A directory made fresh for one test under testing::TempDir(), removed
// with everything in it when the object goes away.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name, as a string.
  std::string Sub(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_TEST_UTIL_H_
