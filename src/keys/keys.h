// The key grammar of a rocksdcp store (schema/README.md, "Keys").
//
//   item key     = fqn-escaped [ "@" offsets ] "#" piece
//   offsets      = [ int { "," int } ]          ; decimal, no sign for >= 0
//   piece        = 8 lowercase hex digits
//   metadata key = "__metadata__"
//   catalog key  = "checkpoint/" checkpoint-id   ; in the default CF
//
// fqn-escaped is the fqn with '@', '#', '%' and every byte outside
// 0x21..0x7e written as "%XX" (uppercase hex), so keys print cleanly in ldb.
// A byte item has no "@"; a tensor chunk always has one (a 0-d tensor's is
// "@" with no offsets). The metadata key has no "#", so it can't clash with
// an item key.

#ifndef ROCKSDCP_SRC_KEYS_KEYS_H_
#define ROCKSDCP_SRC_KEYS_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"

namespace rocksdcp::keys {

inline constexpr std::string_view kMetadataKey = "__metadata__";
inline constexpr std::string_view kCatalogPrefix = "checkpoint/";

std::string EscapeFqn(std::string_view fqn);
// Corruption if `escaped` has a malformed escape or a byte that should have
// been escaped.
Result<std::string> UnescapeFqn(std::string_view escaped);

// The key of piece `piece` of item `index` (index.index is ignored).
std::string PieceKey(const MetadataIndex& index, uint32_t piece);
// Makes `key`, a key PieceKey returned, the key of piece `piece` of the
// same item: the keys of one item differ only in their last digits.
inline constexpr size_t kPieceDigits = 8;
void SetKeyPiece(std::string* key, uint32_t piece);

struct ParsedPieceKey {
  MetadataIndex index;
  uint32_t piece = 0;
};
// Corruption naming the key if it does not follow the grammar.
Result<ParsedPieceKey> ParsePieceKey(std::string_view key);

// OK for checkpoint ids of 1..kMaxCheckpointIdBytes bytes, without control
// characters (bytes < 0x20 or 0x7f), but "default" (RocksDB's own column
// family, the catalog); InvalidArgument saying which rule `id` breaks.
// Every id a catalog key or column family name is made of passes it.
inline constexpr size_t kMaxCheckpointIdBytes = 128;
Status ValidateCheckpointId(std::string_view id);

std::string CatalogKey(std::string_view checkpoint_id);
// The checkpoint id of a catalog key; Corruption if the prefix is missing.
Result<std::string> ParseCatalogKey(std::string_view key);

}  // namespace rocksdcp::keys

#endif  // ROCKSDCP_SRC_KEYS_KEYS_H_
