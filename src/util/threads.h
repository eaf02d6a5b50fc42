// Running one body per index on threads of its own.

#ifndef ROCKSDCP_SRC_UTIL_THREADS_H_
#define ROCKSDCP_SRC_UTIL_THREADS_H_

#include <cstddef>
#include <functional>

namespace rocksdcp::util {

// Runs body(0) .. body(n - 1) and returns once every one has: each i >= 1
// on a thread of its own, 0 on the calling thread, and then, on the calling
// thread too, each one whose thread could not be started (the system's
// limit on threads). Returns how many threads ran bodies, the caller's
// included. `body` must not throw.
size_t RunOnThreads(size_t n, const std::function<void(size_t)>& body);

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_THREADS_H_
