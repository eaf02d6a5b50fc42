#include "util/text.h"

#include <cstdint>
#include <random>

namespace rocksdcp::util {

std::string ShapeString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  s += "]";
  return s;
}

std::string RandomHex(int bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  std::string out;
  out.reserve(2 * bytes);
  for (int i = 0; i < bytes; ++i) {
    const auto b = static_cast<uint8_t>(gen());
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace rocksdcp::util
