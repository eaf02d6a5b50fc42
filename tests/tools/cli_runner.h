// Runs the rocksdcp CLI as a subprocess for the tests in tests/tools/cli_*:
// exit code, stdout and stderr, and --json output checked to be valid JSON
// by Python's strict parser and read back.

#ifndef ROCKSDCP_TESTS_TOOLS_CLI_RUNNER_H_
#define ROCKSDCP_TESTS_TOOLS_CLI_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "json.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {

// A read-only view of a node of a parsed JSON document (tools/json.h) that
// keeps the document alive; a missing member or a wrong type reads as null,
// an empty array, "<not a string>" or -1, so that a test's expectation
// fails, not the test binary.
class Json {
 public:
  Json() = default;
  Json(std::shared_ptr<const tools::Json> root, const tools::Json* node)
      : root_(std::move(root)), node_(node) {}

  bool is_null() const;
  Json operator[](const std::string& key) const;
  std::vector<Json> arr() const;
  std::string str() const;
  double num() const;  // Non-negative integers only (all the CLI prints).
  bool boolean() const;

 private:
  std::shared_ptr<const tools::Json> root_;
  const tools::Json* node_ = nullptr;
};

struct CliRun {
  int exit_code = -1;  // -1 if a signal ended the run.
  int signal = 0;      // The signal that ended it, if one did.
  std::string out;
  std::string err;
  Json json;  // stdout parsed, when the run was asked for --json.
};

inline constexpr int kUsage = 2;
inline constexpr int kFailed = 1;
inline constexpr int kCorrupt = 3;

class CliTest : public StoreTest {
 protected:
  // Runs the CLI with `args`, stdout and stderr into files (not a
  // terminal), or stdout into `stdout_path` when given.
  CliRun Run(const std::vector<std::string>& args,
             const std::string& stdout_path = "");
  // Run runs the CLI as this user (real and effective; needs root), or as
  // the test's own when -1.
  int run_as_uid_ = -1;
  // Runs the CLI with stdout a pipe whose read end is already closed.
  CliRun RunIntoClosedPipe(const std::vector<std::string>& args);
  // Runs with --json appended; the output must be valid JSON (UTF-8
  // included) to Python's json module and to tools/json.h.
  CliRun RunJson(std::vector<std::string> args);
  // Runs the CLI with stderr on a pseudo-terminal; returns what it wrote
  // there (stdout goes to /dev/null). The run must succeed.
  std::string RunWithTerminalStderr(const std::vector<std::string>& args);

  // Saves ExampleStateDict(1), (2), ... as `ids`, in pieces of 4 KiB.
  void SaveExamples(const std::vector<std::string>& ids);
  // `rocksdcp ls --json`'s ids.
  std::vector<std::string> ListedIds();
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_TOOLS_CLI_RUNNER_H_
