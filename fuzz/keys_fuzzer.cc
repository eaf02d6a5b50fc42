// Fuzzes the key grammar (src/keys, schema/README.md "Keys"): piece keys,
// escaped fqns and catalog keys, parsed from keys found in a store (ldb
// scans, GC, verify) and built from fqns a user chose.
//
// The grammar is canonical, so whatever parses must print back to the same
// bytes; and whatever an fqn holds, its escaped form must parse back to it
// and contain none of the bytes the grammar reserves.

#include <string>
#include <vector>

#include "fuzz_util.h"
#include "keys/keys.h"

namespace rocksdcp::fuzz {
namespace {

bool IsPlain(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c >= 0x21 && c <= 0x7e && c != '@' && c != '#';
}

// The input as a key found in a store.
void ParseAsKey(std::string_view input) {
  const Result<keys::ParsedPieceKey> parsed = keys::ParsePieceKey(input);
  if (parsed.ok()) {
    FUZZ_CHECK(keys::PieceKey(parsed->index, parsed->piece) == input);
  }
  const Result<std::string> fqn = keys::UnescapeFqn(input);
  if (fqn.ok()) FUZZ_CHECK(keys::EscapeFqn(*fqn) == input);
  const Result<std::string> id = keys::ParseCatalogKey(input);
  if (id.ok()) FUZZ_CHECK(keys::CatalogKey(*id) == input);
}

// The input as an fqn a user chose, with offsets and a piece number taken
// from its first bytes.
void BuildFromFqn(std::string_view input) {
  const std::string escaped = keys::EscapeFqn(input);
  for (char c : escaped) FUZZ_CHECK(IsPlain(c));
  const Result<std::string> unescaped = keys::UnescapeFqn(escaped);
  FUZZ_CHECK_OK(unescaped);
  FUZZ_CHECK(*unescaped == input);

  std::vector<int64_t> offsets;
  for (size_t i = 0; i < input.size() && i < 3; ++i) {
    offsets.push_back(static_cast<unsigned char>(input[i]) * 1000003LL);
  }
  const uint32_t piece = static_cast<uint32_t>(input.size()) * 2654435761u;
  const MetadataIndex indexes[] = {MetadataIndex(std::string(input)),
                                   MetadataIndex(std::string(input), offsets)};
  for (const MetadataIndex& index : indexes) {
    const std::string key = keys::PieceKey(index, piece);
    const Result<keys::ParsedPieceKey> parsed = keys::ParsePieceKey(key);
    FUZZ_CHECK_OK(parsed);
    FUZZ_CHECK(parsed->index == index && parsed->piece == piece);
    FUZZ_CHECK(key != keys::kMetadataKey);
  }
}

}  // namespace
}  // namespace rocksdcp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = rocksdcp::fuzz::AsChars(data, size);
  rocksdcp::fuzz::ParseAsKey(input);
  rocksdcp::fuzz::BuildFromFqn(input);
  return 0;
}
