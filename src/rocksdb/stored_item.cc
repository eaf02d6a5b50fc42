#include "rocksdb/stored_item.h"

#include <algorithm>
#include <variant>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
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

Status CheckStorageFits(const Metadata& metadata, uint64_t stored_bytes,
                        const CommittedCheckpoint::Sources& sources) {
  // In 128 bits: a forged entry's length and piece count are any uint64.
  unsigned __int128 payload = 0;
  unsigned __int128 pieces = 0;
  const MetadataIndex* largest = nullptr;
  format::StorageInfo largest_info;
  // Payload referenced in each other column family.
  std::map<std::string_view, unsigned __int128> referenced;
  for (const auto& [index, value] : metadata.storage_data) {
    Result<format::StorageInfo> info = format::DecodeStorageInfo(value);
    if (!info.ok()) continue;
    pieces += info->num_pieces;
    // The least a piece of `length` payload bytes stores.
    const uint64_t ratio = info->compressed ? format::kMaxCompressionRatio : 1;
    auto least = [ratio](unsigned __int128 length) {
      return (length + ratio - 1) / ratio;
    };
    unsigned __int128 own = info->length;
    for (uint32_t p = 0; p < info->piece_sources.size(); ++p) {
      if (info->piece_sources[p] == 0) continue;
      const uint64_t length = info->PieceLength(p);
      own -= length;
      // The name outlives `info`: the source's map key holds it.
      auto source = sources.find(*info->SourceOf(p));
      if (source == sources.end()) continue;  // A read of it fails.
      referenced[source->first] += least(length);
    }
    payload += least(own);
    if (largest == nullptr || info->length > largest_info.length) {
      largest = &index;
      largest_info = std::move(info).value();
    }
  }
  auto text = [](unsigned __int128 n) {
    return n > UINT64_MAX ? std::string("over 2^64")
                          : std::to_string(static_cast<uint64_t>(n));
  };
  for (const auto& [name, bytes] : referenced) {
    const uint64_t there = sources.find(name)->second.stored_bytes;
    if (bytes > there) {
      return Status::Corruption("its metadata claims " + text(bytes) +
                                " bytes of pieces in column family " +
                                Quote(name) + ", which holds only " +
                                std::to_string(there) +
                                " bytes: it is forged or damaged");
    }
  }
  const unsigned __int128 needed =
      std::max(payload, pieces * format::kMinStoredPieceBytes);
  if (needed <= stored_bytes) return Status::OK();
  return Status::Corruption(
      "its metadata claims " + text(payload) + " bytes in " + text(pieces) +
      " pieces (item " + Quote(largest->ToString()) + " alone " +
      std::to_string(largest_info.length) + " bytes in " +
      std::to_string(largest_info.num_pieces) +
      " pieces), but the checkpoint holds only " +
      std::to_string(stored_bytes) + " bytes: it is forged or damaged");
}

Result<Metadata> ReadCheckpointMetadata(StoreImpl& store,
                                        const CommittedCheckpoint& c) {
  std::string value;
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  rocksdb::Status s = store.db()->Get(
      ro, c.cf.get(),
      rocksdb::Slice(keys::kMetadataKey.data(), keys::kMetadataKey.size()),
      &value);
  if (s.IsNotFound()) {
    return Status::Corruption("the catalog lists it but its metadata key " +
                              std::string(keys::kMetadataKey) + " is missing");
  }
  if (!s.ok()) return FromRocksDB(s, "reading metadata");
  const uint64_t sum = format::Xxh3(value);
  if (sum != c.info.metadata_checksum) {
    return Status::Corruption("metadata checksum mismatch (catalog records " +
                              std::to_string(c.info.metadata_checksum) +
                              ", value hashes to " + std::to_string(sum) + ")");
  }
  // It says "metadata: " when it fails.
  ROCKSDCP_ASSIGN_OR_RETURN(
      Metadata metadata, format::DecodeMetadata(value, {PieceBytes(c, value)}));
  ROCKSDCP_RETURN_IF_ERROR(
      CheckStorageFits(metadata, PieceBytes(c, value), c.sources));
  return metadata;
}

Status VerifyPieceValue(const rocksdb::Status& s, std::string_view value,
                        std::string_view key, const MetadataIndex& index,
                        const StoredItem& item, uint32_t p,
                        format::PieceDecodeBuffer* buffer,
                        format::DecodedPiece* out) {
  if (s.IsNotFound()) {
    return Status::Corruption("key " + Quote(key) + " is missing");
  }
  if (s.IsPathNotFound()) {
    // A file of the store is gone: damage, not a failing disk.
    return Status::Corruption("reading key " + Quote(key) + ": " +
                              s.ToString());
  }
  if (s.IsCorruption()) {
    // RocksDB's block checksum, or its checks of the block's structure.
    return Status::Corruption("reading key " + Quote(key) + ": " +
                              s.ToString() +
                              " (the store's file holding the piece is "
                              "damaged; \"rocksdcp verify\" lists every "
                              "damaged piece)");
  }
  if (!s.ok()) return FromRocksDB(s, "reading key " + Quote(key));
  ROCKSDCP_ASSIGN_OR_RETURN(
      *out, format::DecodePiece(value, key, buffer, item.info.PieceLength(p)));
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
  const uint64_t length = item.info.PieceLength(p);
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

namespace rocksdcp {

Status VerifyPieceOrReference(StoreImpl& store, const CommittedCheckpoint& c,
                              const rocksdb::ReadOptions& ro,
                              const rocksdb::Status& s, std::string_view value,
                              std::string_view key, const MetadataIndex& index,
                              const StoredItem& item, uint32_t p,
                              rocksdb::PinnableSlice* target,
                              format::PieceDecodeBuffer* buffer,
                              format::DecodedPiece* out) {
  const std::string* source = item.info.SourceOf(p);
  if (!s.ok() || !format::IsPieceRef(value)) {
    // The piece itself. Where the metadata says another column family
    // holds it, a Materialize put it here (and was cut short before it
    // rewrote the metadata): it verifies under its key all the same.
    return VerifyPieceValue(s, value, key, index, item, p, buffer, out);
  }
  ROCKSDCP_ASSIGN_OR_RETURN(format::PieceRef ref,
                            format::DecodePieceRef(value));
  if (source == nullptr) {
    return Status::Corruption(
        "key " + Quote(key) + " holds a reference to column family " +
        Quote(ref.column_family) +
        ", but the metadata says the checkpoint holds the piece itself");
  }
  if (ref.column_family != *source) {
    return Status::Corruption("the piece's reference names column family " +
                              Quote(ref.column_family) +
                              ", but the metadata says " + Quote(*source) +
                              " holds it");
  }
  if (ref.key != key) {
    return Status::Corruption("the piece's reference names key " +
                              Quote(ref.key) + ", not its own");
  }
  const uint64_t length = item.info.PieceLength(p);
  if (ref.byte_length != length || ref.hash != item.info.piece_hashes[p]) {
    return Status::Corruption("the piece's reference records " +
                              std::to_string(ref.byte_length) +
                              " bytes and a hash other than the metadata's " +
                              std::to_string(length) + " bytes and hash");
  }
  return ReadReferencedPiece(store, c, ro, key, index, item, p, target, buffer,
                             out);
}

Status ReadReferencedPiece(StoreImpl& store, const CommittedCheckpoint& c,
                           const rocksdb::ReadOptions& ro, std::string_view key,
                           const MetadataIndex& index, const StoredItem& item,
                           uint32_t p, rocksdb::PinnableSlice* target,
                           format::PieceDecodeBuffer* buffer,
                           format::DecodedPiece* out) {
  const std::string& source = *item.info.SourceOf(p);
  auto held = c.sources.find(source);
  if (held == c.sources.end()) {
    return Status::Corruption("the piece is a reference to column family " +
                              Quote(source) +
                              ", which the store does not hold");
  }
  target->Reset();
  const rocksdb::Status got =
      store.db()->Get(ro, held->second.cf.get(),
                      rocksdb::Slice(key.data(), key.size()), target);
  const std::string_view there(target->data(), target->size());
  if (got.ok() && format::IsPieceRef(there)) {
    return Status::Corruption(
        "the piece is a reference to column family " + Quote(source) +
        ", which holds another reference there: references are one level "
        "deep");
  }
  const std::string in_source =
      "in column family " + Quote(source) + ", which it references";
  ROCKSDCP_RETURN_IF_ERROR(
      VerifyPieceValue(got, there, key, index, item, p, buffer, out)
          .WithContext(in_source));
  // The piece's own XXH3 binds it to its key, not to a checkpoint: another
  // checkpoint's column family holds a sound piece under the same key. The
  // storage info's XXH3-128 of the bytes saved tells them apart.
  if (p >= item.info.piece_hashes.size() ||
      format::Xxh3_128(out->data, out->size) != item.info.piece_hashes[p]) {
    return Status::Corruption(
        "the piece " + in_source +
        " is not the one saved: its bytes' XXH3-128 differs from the "
        "storage info's (another checkpoint's piece under the same key, or "
        "a forged store)");
  }
  return Status::OK();
}

}  // namespace rocksdcp
