#include "test_util.h"

#include <stdlib.h>

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
