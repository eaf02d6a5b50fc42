#include "base64.h"

#include <cstdint>
#include <cstring>

namespace rocksdcp::tools {

namespace {

constexpr char kBase64Chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += kBase64Chars[(v >> 18) & 63];
    out += kBase64Chars[(v >> 12) & 63];
    out += i + 1 < in.size() ? kBase64Chars[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kBase64Chars[v & 63] : '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char ch = in[i + k];
      const char* p = ch == '\0' ? nullptr : std::strchr(kBase64Chars, ch);
      if (ch == '=' && i + 4 == in.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (p == nullptr || pad > 0) return std::nullopt;
      v = (v << 6) | static_cast<uint32_t>(p - kBase64Chars);
    }
    if ((pad == 2 && (v & 0xffff) != 0) || (pad == 1 && (v & 0xff) != 0)) {
      return std::nullopt;
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

}  // namespace rocksdcp::tools
