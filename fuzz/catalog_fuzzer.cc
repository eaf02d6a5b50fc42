// Fuzzes catalog-entry and StorageInfo decoding (src/rocksdb/catalog_codec):
// the values of "checkpoint/<id>" in the default column family, and of each
// item in Metadata::storage_data. Every input goes to both decoders.
//
// Each decode runs where libFuzzer puts the input and at a misaligned
// address; the two must agree. An accepted value must survive re-encoding
// unchanged, and yield what a reader derives from it: the catalog key of
// the id, and every piece's byte range of a StorageInfo.

#include <algorithm>
#include <string>

#include "fuzz_util.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"

namespace rocksdcp::fuzz {
namespace {

bool SameEntry(const CheckpointInfo& a, const CheckpointInfo& b) {
  return a.id == b.id && a.column_family == b.column_family &&
         a.state == b.state && a.created_unix_micros == b.created_unix_micros &&
         a.bytes == b.bytes && a.items == b.items &&
         a.world_size == b.world_size &&
         a.metadata_checksum == b.metadata_checksum;
}

bool SameInfo(const format::StorageInfo& a, const format::StorageInfo& b) {
  return a.kind == b.kind && a.length == b.length &&
         a.num_pieces == b.num_pieces && a.piece_bytes == b.piece_bytes &&
         a.file == b.file && a.piece_hashes == b.piece_hashes;
}

// What the store relies on: it lists checkpoints by parsing catalog keys.
void CheckEntry(const CheckpointInfo& entry) {
  FUZZ_CHECK(!entry.id.empty() && !entry.column_family.empty());
  const Result<std::string> id =
      keys::ParseCatalogKey(keys::CatalogKey(entry.id));
  FUZZ_CHECK_OK(id);
  FUZZ_CHECK(*id == entry.id);
}

// What a reader relies on: it reads piece p at byte p * piece_bytes, for
// min(piece_bytes, length - offset) bytes, so the last piece must start
// inside the item (or be the one empty piece) and end at its end.
void CheckInfo(const format::StorageInfo& info) {
  FUZZ_CHECK(info.piece_bytes > 0 && info.num_pieces >= 1);
  const unsigned __int128 last_offset =
      static_cast<unsigned __int128>(info.num_pieces - 1) * info.piece_bytes;
  FUZZ_CHECK(last_offset < info.length ||
             (info.length == 0 && info.num_pieces == 1));
  const uint64_t last_length =
      info.length == 0 ? 0
                       : std::min<uint64_t>(
                             info.piece_bytes,
                             info.length - static_cast<uint64_t>(last_offset));
  FUZZ_CHECK(last_offset + last_length == info.length);
}

}  // namespace
}  // namespace rocksdcp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocksdcp;
  const std::string_view input = fuzz::AsChars(data, size);
  fuzz::CheckRoundTrip<CheckpointInfo>(input, format::DecodeCatalogEntry,
                                       format::EncodeCatalogEntry,
                                       fuzz::SameEntry, fuzz::CheckEntry);
  // With its piece hashes: what Verify and DiffCheckpoints decode.
  fuzz::CheckRoundTrip<format::StorageInfo>(
      input,
      [](std::string_view v) {
        return format::DecodeStorageInfo(v, format::PieceHashes::kRead);
      },
      format::EncodeStorageInfo, fuzz::SameInfo, fuzz::CheckInfo);
  return 0;
}
