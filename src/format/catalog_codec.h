// Encoding and verified decoding of CatalogEntry and StorageInfo values
// (schema/checkpoint.fbs).

#ifndef ROCKSDCP_SRC_FORMAT_CATALOG_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_CATALOG_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/piece_codec.h"
#include "rocksdcp/rocksdb_store.h"
#include "rocksdcp/status.h"

namespace rocksdcp::format {

inline constexpr char kCatalogIdentifier[] = "RDCC";
inline constexpr char kStorageInfoIdentifier[] = "RDCS";
// The StorageInfo version that requires pieces bound to their keys.
inline constexpr uint16_t kBoundStorageInfoFormatVersion = 2;

std::string EncodeCatalogEntry(const CheckpointInfo& info);
// Corruption if the value fails the Verifier, has the wrong identifier, an
// unknown state, or lacks the id or column family.
Result<CheckpointInfo> DecodeCatalogEntry(std::string_view value);

// Where and how one item is stored (Metadata::storage_data value).
struct StorageInfo {
  ItemKind kind = ItemKind::kTensor;
  uint64_t length = 0;
  uint32_t num_pieces = 1;
  uint64_t piece_bytes = 0;
  // The staging SST file that carries the item: set in WriteResults, empty
  // in committed metadata.
  std::string file;
  // The storage info's format version, which says what its pieces must
  // be: kBoundStorageInfoFormatVersion (written now) requires pieces bound
  // to their keys (piece format 2), so a piece rewritten as an unbound
  // version 1 piece is refused; version 1 (older stores) accepts either.
  // Encoding always writes the current version.
  uint16_t format_version = kBoundStorageInfoFormatVersion;
  // None, or one per piece: the XXH3-128 of its payload. Decoded only on
  // request (PieceHashes::kRead): a load has no use for them.
  std::vector<Hash128> piece_hashes;
};

std::string EncodeStorageInfo(const StorageInfo& info);
// Corruption unless the value verifies and is self-consistent:
// num_pieces == max(1, ceil(length / piece_bytes)), piece_bytes > 0.
// With kRead, also its piece hashes: num_pieces of them, or none if the
// item was saved before they were recorded; Corruption if it records
// another number of them.
enum class PieceHashes { kSkip, kRead };
Result<StorageInfo> DecodeStorageInfo(std::string_view value,
                                      PieceHashes hashes = PieceHashes::kSkip);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_CATALOG_CODEC_H_
