#include "keys/keys.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

namespace rocksdcp::keys {

namespace {

constexpr char kUpperHex[] = "0123456789ABCDEF";
constexpr char kLowerHex[] = "0123456789abcdef";

// A key can be as long as an fqn; error messages quote at most this much.
constexpr size_t kMaxQuotedBytes = 200;

bool NeedsEscape(unsigned char c) {
  return c < 0x21 || c > 0x7e || c == '@' || c == '#' || c == '%';
}

// Uppercase only: each fqn has exactly one escaped form, so a lookup by
// PieceKey() can't miss a key written with different hex case.
int UpperHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// `bytes` in double quotes, safe to print whatever it holds: the key may
// come from a damaged store, and an error message must not carry raw
// control bytes to a terminal or log.
std::string Quote(std::string_view bytes) {
  std::string out = "\"";
  const size_t n = std::min(bytes.size(), kMaxQuotedBytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c <= 0x7e) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kLowerHex[c >> 4];
      out += kLowerHex[c & 0xf];
    }
  }
  out += '"';
  if (n < bytes.size()) {
    out += "... (" + std::to_string(bytes.size()) + " bytes)";
  }
  return out;
}

Status BadKey(std::string_view key, std::string_view why) {
  return Status::Corruption("malformed piece key " + Quote(key) + ": " +
                            std::string(why));
}

// Parses a canonical non-negative decimal: digits only, no sign, no leading
// zero, at most INT64_MAX. Canonical so that a parsed key re-encodes to
// itself.
bool ParseOffset(std::string_view s, int64_t* out) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string EscapeFqn(std::string_view fqn) {
  std::string out;
  out.reserve(fqn.size());
  for (char ch : fqn) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (NeedsEscape(c)) {
      out += '%';
      out += kUpperHex[c >> 4];
      out += kUpperHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

Result<std::string> UnescapeFqn(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(escaped[i]);
    if (c == '%') {
      const int hi =
          i + 1 < escaped.size() ? UpperHexValue(escaped[i + 1]) : -1;
      const int lo =
          i + 2 < escaped.size() ? UpperHexValue(escaped[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return Status::Corruption("escaped fqn " + Quote(escaped) +
                                  ": '%' at byte " + std::to_string(i) +
                                  " is not followed by two uppercase hex "
                                  "digits");
      }
      const unsigned char decoded = static_cast<unsigned char>(hi << 4 | lo);
      // "%41" for "A" would give one fqn two keys.
      if (!NeedsEscape(decoded)) {
        return Status::Corruption("escaped fqn " + Quote(escaped) +
                                  ": needless escape at byte " +
                                  std::to_string(i));
      }
      out += static_cast<char>(decoded);
      i += 2;
    } else if (NeedsEscape(c)) {
      return Status::Corruption("escaped fqn " + Quote(escaped) +
                                ": unescaped byte at " + std::to_string(i));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string PieceKey(const MetadataIndex& index, uint32_t piece) {
  std::string key = EscapeFqn(index.fqn);
  if (index.offset) {
    key += '@';
    for (size_t i = 0; i < index.offset->size(); ++i) {
      if (i > 0) key += ',';
      key += std::to_string((*index.offset)[i]);
    }
  }
  // Fixed width, so that RocksDB's bytewise order is numeric order and an
  // item's pieces are read back in sequence.
  key += '#';
  key.append(kPieceDigits, '0');
  SetKeyPiece(&key, piece);
  return key;
}

void SetKeyPiece(std::string* key, uint32_t piece) {
  char* digits = key->data() + key->size() - kPieceDigits;
  for (size_t i = 0; i < kPieceDigits; ++i) {
    digits[i] = kLowerHex[(piece >> (4 * (kPieceDigits - 1 - i))) & 0xf];
  }
}

Result<ParsedPieceKey> ParsePieceKey(std::string_view key) {
  // Neither '@' nor '#' survives escaping, so the first of them ends the fqn.
  const size_t fqn_end = key.find_first_of("@#");
  if (fqn_end == std::string_view::npos) return BadKey(key, "no '#'");

  ParsedPieceKey parsed;
  Result<std::string> fqn = UnescapeFqn(key.substr(0, fqn_end));
  if (!fqn.ok()) return BadKey(key, fqn.status().message());
  parsed.index.fqn = std::move(fqn).value();

  size_t hash = fqn_end;
  if (key[fqn_end] == '@') {
    hash = key.find('#', fqn_end + 1);
    if (hash == std::string_view::npos) return BadKey(key, "no '#'");
    std::string_view offsets = key.substr(fqn_end + 1, hash - fqn_end - 1);
    std::vector<int64_t> parsed_offsets;
    // An empty list is a 0-d tensor's chunk.
    while (!offsets.empty()) {
      const size_t comma = offsets.find(',');
      const std::string_view field = offsets.substr(0, comma);
      int64_t value = 0;
      if (!ParseOffset(field, &value)) {
        return BadKey(key, "offset " + Quote(field) +
                               " is not a non-negative decimal integer");
      }
      parsed_offsets.push_back(value);
      if (comma == std::string_view::npos) break;
      offsets.remove_prefix(comma + 1);
      if (offsets.empty()) return BadKey(key, "trailing ',' in offsets");
    }
    parsed.index.offset = std::move(parsed_offsets);
  }

  const std::string_view piece = key.substr(hash + 1);
  if (piece.size() != 8) {
    return BadKey(key, "piece is not 8 lowercase hex digits");
  }
  for (char c : piece) {
    const int v = LowerHexValue(c);
    if (v < 0) return BadKey(key, "piece is not 8 lowercase hex digits");
    parsed.piece = parsed.piece << 4 | static_cast<uint32_t>(v);
  }
  return parsed;
}

Status ValidateCheckpointId(std::string_view id) {
  if (id.empty()) {
    return Status::InvalidArgument("checkpoint id is empty");
  }
  if (id.size() > kMaxCheckpointIdBytes) {
    return Status::InvalidArgument(
        "checkpoint id '" + std::string(id.substr(0, 32)) + "...' is " +
        std::to_string(id.size()) + " bytes; the limit is " +
        std::to_string(kMaxCheckpointIdBytes));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", c);
      return Status::InvalidArgument(
          "checkpoint id contains control character " + std::string(hex) +
          " at byte " + std::to_string(i));
    }
  }
  if (id == "default") {
    return Status::InvalidArgument(
        "checkpoint id 'default' is reserved: it is RocksDB's default column "
        "family, which holds the store's catalog");
  }
  return Status::OK();
}

std::string CatalogKey(std::string_view checkpoint_id) {
  std::string key(kCatalogPrefix);
  key += checkpoint_id;
  return key;
}

Result<std::string> ParseCatalogKey(std::string_view key) {
  if (key.size() <= kCatalogPrefix.size() ||
      key.substr(0, kCatalogPrefix.size()) != kCatalogPrefix) {
    return Status::Corruption("malformed catalog key " + Quote(key) +
                              ": expected \"" + std::string(kCatalogPrefix) +
                              "<checkpoint id>\"");
  }
  return std::string(key.substr(kCatalogPrefix.size()));
}

}  // namespace rocksdcp::keys
