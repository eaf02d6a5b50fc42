#include "rocksdb/stored_item.h"

#include <algorithm>
#include <variant>

#include "format/metadata_codec.h"
#include "rocksdb/rocksdb_status.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

const ChunkStorageMetadata* ChunkFinder::Find(
    const TensorStorageMetadata& tensor, const MetadataIndex& index) {
  if (!index.offset) return nullptr;
  if (index.index && *index.index >= 0 &&
      static_cast<size_t>(*index.index) < tensor.chunks.size() &&
      tensor.chunks[*index.index].offsets == *index.offset) {
    return &tensor.chunks[*index.index];
  }
  auto [it, built] = by_offsets_.try_emplace(&tensor);
  if (built) {
    // The last chunk at given offsets, as a scan would find it (Load and
    // Verify refuse overlapping chunks anyway).
    for (const ChunkStorageMetadata& c : tensor.chunks)
      it->second[c.offsets] = &c;
  }
  auto found = it->second.find(*index.offset);
  return found == it->second.end() ? nullptr : found->second;
}

Result<StoredItem> LookupStoredItem(const Metadata& metadata,
                                    const MetadataIndex& index, bool tensor,
                                    ChunkFinder& chunks,
                                    format::PieceHashes hashes) {
  auto it = metadata.storage_data.find(index);
  if (it == metadata.storage_data.end()) {
    return Status::Corruption("the metadata records no storage for it");
  }
  StoredItem item;
  ROCKSDCP_ASSIGN_OR_RETURN(item.info,
                            format::DecodeStorageInfo(it->second, hashes));
  const auto want =
      tensor ? format::ItemKind::kTensor : format::ItemKind::kBytes;
  if (item.info.kind != want) {
    return Status::Corruption(
        std::string("stored as ") + (tensor ? "bytes" : "a tensor") +
        " but planned as " + (tensor ? "a tensor" : "bytes"));
  }
  if (!tensor) return item;

  auto sd = metadata.state_dict_metadata.find(index.fqn);
  const auto* tm = sd == metadata.state_dict_metadata.end()
                       ? nullptr
                       : std::get_if<TensorStorageMetadata>(&sd->second);
  if (tm == nullptr || !index.offset) {
    return Status::Corruption("the metadata has no tensor of that name");
  }
  const ChunkStorageMetadata* chunk = chunks.Find(*tm, index);
  if (chunk == nullptr) {
    return Status::Corruption("the metadata has no chunk at that offset");
  }
  item.dtype = tm->properties.dtype;
  item.chunk_sizes = chunk->sizes;
  const uint64_t elem = DTypeSize(item.dtype);
  uint64_t numel = 1;
  for (int64_t s : chunk->sizes) numel *= static_cast<uint64_t>(s);
  if (item.info.length != numel * elem || item.info.piece_bytes % elem != 0) {
    return Status::Corruption(
        "storage info (" + std::to_string(item.info.length) +
        " bytes in pieces of " + std::to_string(item.info.piece_bytes) +
        ") does not match the chunk's " + std::to_string(numel) + " x " +
        std::to_string(elem) + "-byte elements");
  }
  return item;
}

Result<uint64_t> StoredItemBytes(const Metadata& metadata,
                                 const MetadataIndex& index) {
  ChunkFinder chunks;  // Unused: a byte item has no chunks.
  auto item = LookupStoredItem(metadata, index, /*tensor=*/false, chunks);
  if (!item.ok()) {
    return item.status().WithContext("item " + Quote(index.ToString()));
  }
  return item->info.length;
}

Status CheckStorageFits(const Metadata& metadata, uint64_t stored_bytes) {
  // In 128 bits: a forged entry's length and piece count are any uint64.
  unsigned __int128 payload = 0;
  unsigned __int128 pieces = 0;
  const MetadataIndex* largest = nullptr;
  format::StorageInfo largest_info;
  for (const auto& [index, value] : metadata.storage_data) {
    Result<format::StorageInfo> info = format::DecodeStorageInfo(value);
    if (!info.ok()) continue;
    payload += info->length;
    pieces += info->num_pieces;
    if (largest == nullptr || info->length > largest_info.length) {
      largest = &index;
      largest_info = *info;
    }
  }
  const unsigned __int128 needed =
      std::max(payload, pieces * format::kMinStoredPieceBytes);
  if (needed <= stored_bytes) return Status::OK();
  auto text = [](unsigned __int128 n) {
    return n > UINT64_MAX ? std::string("over 2^64")
                          : std::to_string(static_cast<uint64_t>(n));
  };
  return Status::Corruption(
      "its metadata claims " + text(payload) + " bytes in " + text(pieces) +
      " pieces (item " + Quote(largest->ToString()) + " alone " +
      std::to_string(largest_info.length) + " bytes in " +
      std::to_string(largest_info.num_pieces) +
      " pieces), but the checkpoint holds only " +
      std::to_string(stored_bytes) + " bytes: it is forged or damaged");
}

Status VerifyPieceValue(const rocksdb::Status& s, std::string_view value,
                        std::string_view key, const MetadataIndex& index,
                        const StoredItem& item, uint32_t p,
                        format::DecodedPiece* out) {
  if (s.IsNotFound()) {
    return Status::Corruption("key " + Quote(key) + " is missing");
  }
  if (s.IsPathNotFound()) {
    // A file of the store is gone: damage, not a failing disk.
    return Status::Corruption("reading key " + Quote(key) + ": " +
                              s.ToString());
  }
  if (!s.ok()) return FromRocksDB(s, "reading key " + Quote(key));
  ROCKSDCP_ASSIGN_OR_RETURN(*out, format::DecodePiece(value, key));
  if (item.info.format_version >= format::kBoundStorageInfoFormatVersion &&
      out->format_version < format::kPieceFormatVersion) {
    // An unbound piece verifies under any key: one moved here from another
    // item, and rewritten in the old format, would pass.
    return Status::Corruption(
        "the piece has format version " + std::to_string(out->format_version) +
        ", not bound to its key, but its item was saved with pieces bound "
        "to their keys (storage info version " +
        std::to_string(item.info.format_version) + ")");
  }
  const format::PieceHeader& h = out->header;
  const uint64_t offset = uint64_t{p} * item.info.piece_bytes;
  const uint64_t length =
      std::min(item.info.piece_bytes, item.info.length - offset);
  const bool tensor = item.info.kind == format::ItemKind::kTensor;
  const bool matches = h.kind == item.info.kind && h.piece == p &&
                       h.num_pieces == item.info.num_pieces &&
                       h.byte_offset == offset && h.byte_length == length &&
                       (!tensor || (h.dtype == item.dtype && index.offset &&
                                    h.chunk_offsets == *index.offset &&
                                    h.chunk_sizes == item.chunk_sizes));
  if (!matches) {
    return Status::Corruption(
        "the piece's header does not match the metadata (piece " +
        std::to_string(h.piece) + "/" + std::to_string(h.num_pieces) +
        ", bytes " + std::to_string(h.byte_offset) + "+" +
        std::to_string(h.byte_length) + ", expected " + std::to_string(p) +
        "/" + std::to_string(item.info.num_pieces) + ", bytes " +
        std::to_string(offset) + "+" + std::to_string(length) + ")");
  }
  return Status::OK();
}

}  // namespace rocksdcp
