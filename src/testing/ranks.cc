#include "rocksdcp/testing/ranks.h"

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

}  // namespace rocksdcp::testing
