#include "util/threads.h"

#include <system_error>
#include <thread>
#include <vector>

namespace rocksdcp::util {

size_t RunOnThreads(size_t n, const std::function<void(size_t)>& body) {
  if (n == 0) return 0;
  std::vector<std::thread> threads;
  threads.reserve(n - 1);
  std::vector<size_t> inline_bodies;
  for (size_t i = 1; i < n; ++i) {
    try {
      threads.emplace_back(body, i);
    } catch (const std::system_error&) {
      inline_bodies.push_back(i);  // No thread to be had: run it here.
    }
  }
  body(0);
  for (size_t i : inline_bodies) body(i);
  for (std::thread& t : threads) t.join();
  return threads.size() + 1;
}

}  // namespace rocksdcp::util
