// Base64 (RFC 4648, standard alphabet, padded), for byte items that a
// safetensors header can only hold as JSON strings.

#ifndef ROCKSDCP_TOOLS_BASE64_H_
#define ROCKSDCP_TOOLS_BASE64_H_

#include <optional>
#include <string>
#include <string_view>

namespace rocksdcp::tools {

std::string Base64Encode(std::string_view in);

// Strict: padded, no whitespace, no bits set past the data. nullopt for
// anything else.
std::optional<std::string> Base64Decode(std::string_view in);

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_BASE64_H_
