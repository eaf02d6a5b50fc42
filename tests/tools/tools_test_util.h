// Helpers of the tests of tools/: files, and the independent readers the
// CLI's output is checked with (NumPy, tests/tools/read_safetensors.py).

#ifndef ROCKSDCP_TESTS_TOOLS_TOOLS_TEST_UTIL_H_
#define ROCKSDCP_TESTS_TOOLS_TOOLS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "json.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::tools {

// The contiguous bytes of a tensor (test_util.h).
using ::rocksdcp::testing::TensorBytes;

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);
// The names in `dir`, sorted.
std::vector<std::string> ListDir(const std::string& dir);

// Runs Debian's python3 (where apt's NumPy is) with `args`; its stdout in
// *out. The exit status, or -1 if python3 could not run.
int RunPython(const std::vector<std::string>& args, std::string* out);
bool HaveNumpy();

// tests/tools/read_safetensors.py on `path`, its report parsed into *report
// (see the script). Fails naming what the reader refused.
::testing::AssertionResult ReadSafetensors(const std::string& path,
                                           Json* report);

// A member of a parsed JSON object, or nullptr.
const Json* Member(const Json& object, std::string_view key);

class ToolsTest : public ::rocksdcp::testing::StoreTest {
 protected:
  // A path in the test's temp dir.
  std::string Out(const std::string& name) const { return dir_.Sub(name); }
};

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TESTS_TOOLS_TOOLS_TEST_UTIL_H_
