// Small text helpers shared by the store, its writer and its reader.

#ifndef ROCKSDCP_SRC_UTIL_TEXT_H_
#define ROCKSDCP_SRC_UTIL_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdcp::util {

// 's' as it appears in error messages: 'checkpoint-id'.
inline std::string Quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// "[1, 2, 3]": a shape or offsets, in error messages.
std::string ShapeString(const std::vector<int64_t>& v);

// `bytes` random bytes as lowercase hex: save and load ids, which only need
// to be unique, not secret.
std::string RandomHex(int bytes);

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_TEXT_H_
