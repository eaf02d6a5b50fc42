// Encoding and verified decoding of CatalogEntry and StorageInfo values
// (schema/checkpoint.fbs): the RocksDB backend's own values, so they live
// with it, in the codecs' namespace.

#ifndef ROCKSDCP_SRC_ROCKSDB_CATALOG_CODEC_H_
#define ROCKSDCP_SRC_ROCKSDB_CATALOG_CODEC_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "format/piece_codec.h"
#include "rocksdcp/status.h"
#include "rocksdcp/store_reports.h"

namespace rocksdcp::format {

inline constexpr char kCatalogIdentifier[] = "RDCC";
inline constexpr char kStorageInfoIdentifier[] = "RDCS";
inline constexpr char kPieceRefIdentifier[] = "RDCR";
inline constexpr char kRankPlanIdentifier[] = "RDCB";
// The StorageInfo version that requires pieces bound to their keys.
inline constexpr uint16_t kBoundStorageInfoFormatVersion = 2;
// The StorageInfo version of an item some of whose pieces are references.
inline constexpr uint16_t kReferencingStorageInfoFormatVersion = 3;

// The largest piece a writer writes (RocksDBWriterOptions::max_piece_bytes
// is at most this): a StorageInfo whose pieces are larger is forged, and a
// reader that believed it would decode pieces of any size.
inline constexpr uint64_t kMaxPieceBytes = 1ull << 30;

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
  // None, or one per piece: the XXH3-128 of its payload. Decoded on
  // request (PieceHashes::kRead), and whenever the item has references.
  std::vector<Hash128> piece_hashes;
  // Incremental saves: the other column families holding some of its
  // pieces, and per piece 0 (the checkpoint's own) or i + 1 (sources[i]).
  // Both empty when every piece is the checkpoint's own. Encoding writes
  // kReferencingStorageInfoFormatVersion when sources is not empty.
  std::vector<std::string> sources;
  std::vector<uint32_t> piece_sources;
  // Some of its pieces (its own, or those `sources` hold) may be
  // compressed: they store at least 1 / format::kMaxCompressionRatio of
  // their payload, not all of it.
  bool compressed = false;
  // None, or one per piece: where its payload starts in the SST file that
  // holds the item, or 0 where that is not recorded
  // (schema/checkpoint.fbs). Decoded with the piece hashes, whatever
  // PieceHashes says: a reader needs both to read a piece in place.
  std::vector<uint64_t> piece_offsets;
  // With piece_offsets: the XXH3-64 of the first key of that file; 0 if
  // not recorded.
  uint64_t file_first_key_xxh3 = 0;
  // With piece_offsets and sources: per source, the same for the file of
  // that column family holding the item's pieces there (0: not recorded).
  std::vector<uint64_t> source_file_first_key_xxh3;

  // The payload bytes of piece `p`: piece_bytes, or what is left of
  // length for the last piece.
  // REQUIRES: p < num_pieces, of a decoded (self-consistent) info.
  uint64_t PieceLength(uint32_t p) const {
    return std::min(piece_bytes, length - uint64_t{p} * piece_bytes);
  }

  // The column family that holds piece `p` (its sources entry), or
  // nullptr for the checkpoint's own.
  const std::string* SourceOf(uint32_t p) const {
    if (piece_sources.empty() || piece_sources[p] == 0) return nullptr;
    return &sources[piece_sources[p] - 1];
  }
};

std::string EncodeStorageInfo(const StorageInfo& info);
// Corruption unless the value verifies and is self-consistent:
// num_pieces == max(1, ceil(length / piece_bytes)), piece_bytes > 0.
// With kRead, also its piece hashes: num_pieces of them, or none if the
// item was saved before they were recorded; Corruption if it records
// another number of them. Sources are always decoded and checked: a
// version 3 item has num_pieces piece hashes and piece sources, each
// source at most sources.size(), each source a non-empty name used by
// some piece; other versions have none.
enum class PieceHashes { kSkip, kRead };
Result<StorageInfo> DecodeStorageInfo(std::string_view value,
                                      PieceHashes hashes = PieceHashes::kSkip);

// A PieceRef value (schema/checkpoint.fbs).
struct PieceRef {
  std::string column_family;
  std::string key;
  uint64_t byte_length = 0;
  Hash128 hash;
};

std::string EncodePieceRef(const PieceRef& ref);
// True if `value` carries the PieceRef identifier (it may still be
// malformed: DecodePieceRef says).
bool IsPieceRef(std::string_view value);
// Corruption unless the value verifies, has the identifier and a known
// version, and names a column family and key.
Result<PieceRef> DecodePieceRef(std::string_view value);

// A rank's SavePlan::storage_data (RankPlan in schema/checkpoint.fbs).
struct RankPlan {
  std::string file_prefix;
  // Incremental saves: the base, and its storage info of the items this
  // rank writes, each with every piece's source named (none is 0).
  std::string base_checkpoint_id;
  std::map<MetadataIndex, StorageInfo> base_items;
  // The coordinator's save id, which the checkpoint records (empty in a
  // plan from before it was sent).
  std::string save_id;
};

std::string EncodeRankPlan(const RankPlan& plan);
// True if `value` carries the RankPlan identifier (a plan's storage_data
// from before it did is the file prefix alone).
bool IsRankPlan(std::string_view value);
// Corruption unless it verifies and every item decodes (with hashes).
Result<RankPlan> DecodeRankPlan(std::string_view value);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_ROCKSDB_CATALOG_CODEC_H_
