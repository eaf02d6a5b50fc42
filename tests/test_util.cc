#include "test_util.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <system_error>
#include <thread>
#include <vector>

namespace rocksdcp::testing {

void RunRanks(int world_size, int coordinator,
              const std::function<void(int, Collective&)>& body) {
  auto group = ThreadCollective::Group(world_size, coordinator);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] { body(r, *group[r]); });
  }
  for (auto& t : threads) t.join();
}

std::map<std::string, ErrorDocRow> ReadErrorDoc(
    const std::string& path, const std::string& name_prefix) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  const std::regex row(R"(^\| `([a-z0-9-]+)` \|[^|]*\| (\w+) \| `(.*)` \|$)");
  std::map<std::string, ErrorDocRow> rows;
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, row) &&
        m[1].str().rfind(name_prefix, 0) == 0) {
      EXPECT_TRUE(rows.count(m[1]) == 0) << "row " << m[1] << " twice";
      rows[m[1]] = {m[2], m[3]};
    }
  }
  return rows;
}

::testing::AssertionResult IsDocumentedError(
    const std::map<std::string, ErrorDocRow>& doc, const std::string& name,
    const ErrorDocRow& got) {
  if (std::getenv("ROCKSDCP_PRINT_ERRORS") != nullptr) {
    std::cout << "| `" << name << "` | | " << got.code << " | `"
              << got.message << "` |\n";
  }
  if (got.code == "OK") {
    return ::testing::AssertionFailure() << name << " did not fail";
  }
  auto it = doc.find(name);
  if (it == doc.end()) {
    return ::testing::AssertionFailure()
           << "docs/errors.md has no row `" << name << "`";
  }
  if (got.code != it->second.code || got.message != it->second.message) {
    return ::testing::AssertionFailure()
           << "row `" << name << "` documents\n  " << it->second.code << ": "
           << it->second.message << "\nbut the code says\n  " << got.code
           << ": " << got.message;
  }
  return ::testing::AssertionSuccess();
}

std::string ErrorRowTestName(
    const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

ScopedTempDir::ScopedTempDir() {
  std::string pattern = ::testing::TempDir() + "rocksdcp-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  char* made = mkdtemp(buf.data());
  EXPECT_NE(made, nullptr) << "mkdtemp(" << pattern << ") failed";
  path_ = made ? std::filesystem::path(made) : std::filesystem::path();
}

ScopedTempDir::~ScopedTempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace rocksdcp::testing
