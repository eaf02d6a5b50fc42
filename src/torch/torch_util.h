// Small helpers of the LibTorch adapter: LibTorch throws, rocksdcp returns
// a Status, and this is where one becomes the other.

#ifndef ROCKSDCP_SRC_TORCH_TORCH_UTIL_H_
#define ROCKSDCP_SRC_TORCH_TORCH_UTIL_H_

#include <c10/core/Layout.h>
#include <torch/version.h>

#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "rocksdcp/status.h"

// True when built against LibTorch MAJOR.MINOR or newer: for the few APIs
// that differ between LibTorch 1.13 (Debian's libtorch-dev) and 2.x (the
// PyPI wheel's), where no type can tell them apart.
#define ROCKSDCP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||           \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace rocksdcp::torch {

// "LibTorch 1.13": the LibTorch built against, for messages.
inline std::string LibTorchName() {
  return "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
         std::to_string(TORCH_VERSION_MINOR);
}

// "Sparse", "Mkldnn", ...: LibTorch's name of a layout.
inline std::string LayoutName(c10::Layout layout) {
  std::ostringstream out;
  out << layout;
  return out.str();
}

// The first line of a LibTorch exception's message: c10::Error appends a
// C++ backtrace that says nothing to a trainer.
inline std::string FirstLine(const char* what) {
  std::string_view s(what);
  return std::string(s.substr(0, s.find('\n')));
}

// Runs `fn` (which returns a Status) and turns whatever LibTorch throws
// into a Status of `code` whose message starts with `context`, or
// ResourceExhausted when memory ran out. Nothing LibTorch throws crosses
// rocksdcp's API.
template <typename Fn>
Status CatchTorch(StatusCode code, std::string_view context, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(std::string(context) + ": out of memory");
  } catch (const std::exception& e) {
    return Status(code, std::string(context) + ": " + FirstLine(e.what()));
  }
}

}  // namespace rocksdcp::torch

#endif  // ROCKSDCP_SRC_TORCH_TORCH_UTIL_H_
