#include "format/catalog_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "format/fb_util.h"
#include "keys/keys.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::format {

namespace {

constexpr uint16_t kCatalogFormatVersion = 1;
constexpr uint16_t kStorageInfoFormatVersion = kBoundStorageInfoFormatVersion;

}  // namespace

std::string EncodeCatalogEntry(const CheckpointInfo& info) {
  flatbuffers::FlatBufferBuilder fbb(256);
  const auto id = fbb.CreateString(info.id);
  const auto column_family = fbb.CreateString(info.column_family);
  fbb.Finish(
      fb::CreateCatalogEntry(fbb, kCatalogFormatVersion, id, column_family,
                             static_cast<fb::CheckpointState>(info.state),
                             info.created_unix_micros, info.bytes, info.items,
                             info.world_size, info.metadata_checksum),
      kCatalogIdentifier);
  return Finished(fbb);
}

Result<CheckpointInfo> DecodeCatalogEntry(std::string_view value) {
  const std::string what = "catalog entry";
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::CatalogEntry* e,
      VerifiedRoot<fb::CatalogEntry>(aligned, kCatalogIdentifier, what));
  if (e->format_version() != kCatalogFormatVersion) {
    return Status::Corruption(what + ": unsupported format_version " +
                              std::to_string(e->format_version()));
  }
  if (e->checkpoint_id() == nullptr || e->checkpoint_id()->size() == 0) {
    return Status::Corruption(what + ": no checkpoint id");
  }
  CheckpointInfo info;
  info.id = e->checkpoint_id()->str();
  if (e->column_family() == nullptr || e->column_family()->size() == 0) {
    return Status::Corruption(what + " of checkpoint \"" +
                              keys::EscapeFqn(info.id) +
                              "\": no column family");
  }
  info.column_family = e->column_family()->str();
  if (e->state() != fb::CheckpointState::Committed) {
    return Status::Corruption(what + " of checkpoint \"" +
                              keys::EscapeFqn(info.id) + "\": unknown state " +
                              std::to_string(static_cast<int>(e->state())));
  }
  info.state = CheckpointState::kCommitted;
  info.created_unix_micros = e->created_unix_micros();
  info.bytes = e->total_bytes();
  info.items = e->num_items();
  info.world_size = e->world_size();
  info.metadata_checksum = e->metadata_xxh3();
  return info;
}

std::string EncodeStorageInfo(const StorageInfo& info) {
  flatbuffers::FlatBufferBuilder fbb(128);
  // Left out when empty, as it is in every committed item.
  const auto file = info.file.empty()
                        ? flatbuffers::Offset<flatbuffers::String>()
                        : fbb.CreateString(info.file);
  flatbuffers::Offset<flatbuffers::Vector<const fb::PieceHash*>> hashes;
  if (!info.piece_hashes.empty()) {
    // Written in place: no vector of an item's hashes besides its own.
    fb::PieceHash* out = nullptr;
    hashes =
        fbb.CreateUninitializedVectorOfStructs(info.piece_hashes.size(), &out);
    for (const Hash128& p : info.piece_hashes) *out++ = {p.low, p.high};
  }
  fbb.Finish(
      fb::CreateStorageInfo(fbb, kStorageInfoFormatVersion,
                            static_cast<fb::ItemKind>(info.kind), info.length,
                            info.num_pieces, info.piece_bytes, file, hashes),
      kStorageInfoIdentifier);
  return Finished(fbb);
}

Result<StorageInfo> DecodeStorageInfo(std::string_view value,
                                      PieceHashes hashes) {
  const std::string what = "storage info";
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::StorageInfo* s,
      VerifiedRoot<fb::StorageInfo>(aligned, kStorageInfoIdentifier, what));
  // Version 1: written before pieces were bound to their keys.
  if (s->format_version() != kStorageInfoFormatVersion &&
      s->format_version() != 1) {
    return Status::Corruption(what + ": unsupported format_version " +
                              std::to_string(s->format_version()));
  }
  StorageInfo info;
  info.format_version = s->format_version();
  switch (s->kind()) {
    case fb::ItemKind::Tensor:
      info.kind = ItemKind::kTensor;
      break;
    case fb::ItemKind::Bytes:
      info.kind = ItemKind::kBytes;
      break;
    default:
      return Status::Corruption(what + ": unknown item kind " +
                                std::to_string(static_cast<int>(s->kind())));
  }
  info.length = s->length();
  info.num_pieces = s->num_pieces();
  info.piece_bytes = s->piece_bytes();
  if (s->file() != nullptr) info.file = s->file()->str();
  if (info.piece_bytes == 0) {
    return Status::Corruption(what + ": piece_bytes is 0");
  }
  // A reader derives every piece's key and byte range from these three
  // numbers, so they must agree; an empty item still has one (empty) piece.
  const uint64_t expected =
      std::max<uint64_t>(1, info.length / info.piece_bytes +
                                (info.length % info.piece_bytes != 0));
  if (info.num_pieces != expected) {
    return Status::Corruption(
        what + ": num_pieces is " + std::to_string(info.num_pieces) + " but " +
        std::to_string(info.length) + " bytes in pieces of " +
        std::to_string(info.piece_bytes) + " make " + std::to_string(expected));
  }
  if (hashes == PieceHashes::kRead && s->piece_hashes() != nullptr) {
    const auto* h = s->piece_hashes();
    if (h->size() != info.num_pieces) {
      return Status::Corruption(what + ": " + std::to_string(h->size()) +
                                " piece hashes for " +
                                std::to_string(info.num_pieces) + " pieces");
    }
    // Copied out byte-wise: FlatBuffers' verifier checks the vector's
    // length field but not that its 8-byte structs are aligned, so a
    // forged value may place them anywhere.
    const auto* bytes = reinterpret_cast<const uint8_t*>(h->Data());
    info.piece_hashes.resize(h->size());
    for (size_t i = 0; i < h->size(); ++i, bytes += sizeof(fb::PieceHash)) {
      uint64_t low, high;
      std::memcpy(&low, bytes, sizeof(low));
      std::memcpy(&high, bytes + sizeof(low), sizeof(high));
      info.piece_hashes[i] = {flatbuffers::EndianScalar(low),
                              flatbuffers::EndianScalar(high)};
    }
  }
  return info;
}

}  // namespace rocksdcp::format
