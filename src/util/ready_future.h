// A std::future that already holds its value: what a step that ran
// synchronously returns through an interface that promises a future.

#ifndef ROCKSDCP_SRC_UTIL_READY_FUTURE_H_
#define ROCKSDCP_SRC_UTIL_READY_FUTURE_H_

#include <future>
#include <utility>

namespace rocksdcp::util {

template <typename T>
std::future<T> ReadyFuture(T value) {
  std::promise<T> promise;
  promise.set_value(std::move(value));
  return promise.get_future();
}

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_READY_FUTURE_H_
