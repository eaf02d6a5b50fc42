#include "rocksdb/catalog_codec.h"

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
// A catalog entry of a checkpoint that references other column families.
constexpr uint16_t kReferencingCatalogFormatVersion = 2;
constexpr uint16_t kPieceRefFormatVersion = 1;

flatbuffers::Offset<
    flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>
CreateStrings(flatbuffers::FlatBufferBuilder& fbb,
              const std::vector<std::string>& strings) {
  if (strings.empty()) return 0;
  return fbb.CreateVectorOfStrings(strings);
}

// The strings of `v`, each non-empty; Corruption naming `what` otherwise.
Status DecodeNames(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v,
    const std::string& what, std::vector<std::string>* out) {
  if (v == nullptr) return Status::OK();
  out->reserve(v->size());
  for (const flatbuffers::String* name : *v) {
    if (name == nullptr || name->size() == 0) {
      return Status::Corruption(what + ": an empty column family name");
    }
    out->push_back(name->str());
  }
  return Status::OK();
}

// True if `value` is long enough to carry a root and its identifier, and
// carries `identifier` (4 characters).
bool HasIdentifier(std::string_view value, const char* identifier) {
  return value.size() >= 8 &&
         value.substr(4, 4) == std::string_view(identifier, 4);
}

}  // namespace

std::string EncodeCatalogEntry(const CheckpointInfo& info) {
  flatbuffers::FlatBufferBuilder fbb(256);
  const auto id = fbb.CreateString(info.id);
  const auto column_family = fbb.CreateString(info.column_family);
  const auto referenced = CreateStrings(fbb, info.referenced_column_families);
  const bool refs = !info.referenced_column_families.empty();
  fbb.Finish(
      fb::CreateCatalogEntry(
          fbb, refs ? kReferencingCatalogFormatVersion : kCatalogFormatVersion,
          id, column_family, static_cast<fb::CheckpointState>(info.state),
          info.created_unix_micros, info.bytes, info.items, info.world_size,
          info.metadata_checksum, referenced, refs ? info.referenced_bytes : 0),
      kCatalogIdentifier);
  return Finished(fbb);
}

Result<CheckpointInfo> DecodeCatalogEntry(std::string_view value) {
  const std::string what = "catalog entry";
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::CatalogEntry* e,
      VerifiedRoot<fb::CatalogEntry>(aligned, kCatalogIdentifier, what));
  if (e->format_version() != kCatalogFormatVersion &&
      e->format_version() != kReferencingCatalogFormatVersion) {
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
  if (e->format_version() == kReferencingCatalogFormatVersion) {
    const std::string entry =
        what + " of checkpoint \"" + keys::EscapeFqn(info.id) + "\"";
    ROCKSDCP_RETURN_IF_ERROR(DecodeNames(e->referenced_column_families(), entry,
                                         &info.referenced_column_families));
    for (const std::string& cf : info.referenced_column_families) {
      if (cf == info.column_family) {
        return Status::Corruption(entry + " references its own column family");
      }
    }
    info.referenced_bytes = e->referenced_bytes();
    if (info.referenced_bytes > info.bytes) {
      return Status::Corruption(entry + " references " +
                                std::to_string(info.referenced_bytes) +
                                " bytes of its " + std::to_string(info.bytes));
    }
  }
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
  const auto offsets =
      info.piece_offsets.empty()
          ? flatbuffers::Offset<flatbuffers::Vector<uint64_t>>()
          : fbb.CreateVector(info.piece_offsets);
  const bool refs = !info.sources.empty();
  const auto source_files =
      refs && !offsets.IsNull() && !info.source_file_first_key_xxh3.empty()
          ? fbb.CreateVector(info.source_file_first_key_xxh3)
          : flatbuffers::Offset<flatbuffers::Vector<uint64_t>>();
  const auto sources = CreateStrings(fbb, info.sources);
  const auto piece_sources =
      refs ? fbb.CreateVector(info.piece_sources)
           : flatbuffers::Offset<flatbuffers::Vector<uint32_t>>();
  fbb.Finish(fb::CreateStorageInfo(
                 fbb,
                 refs ? kReferencingStorageInfoFormatVersion
                      : kBoundStorageInfoFormatVersion,
                 static_cast<fb::ItemKind>(info.kind), info.length,
                 info.num_pieces, info.piece_bytes, file, hashes, sources,
                 piece_sources, info.compressed, offsets,
                 offsets.IsNull() ? 0 : info.file_first_key_xxh3, source_files),
             kStorageInfoIdentifier);
  return Finished(fbb);
}

namespace {

Result<ItemKind> DecodeItemKind(const fb::StorageInfo& s,
                                const std::string& what) {
  switch (s.kind()) {
    case fb::ItemKind::Tensor:
      return ItemKind::kTensor;
    case fb::ItemKind::Bytes:
      return ItemKind::kBytes;
    default:
      return Status::Corruption(what + ": unknown item kind " +
                                std::to_string(static_cast<int>(s.kind())));
  }
}

// Corruption unless `info`'s length, piece_bytes and num_pieces agree: a
// reader derives every piece's key and byte range from these three
// numbers. An empty item still has one (empty) piece.
Status CheckPieceCount(const StorageInfo& info, const std::string& what) {
  if (info.piece_bytes == 0) {
    return Status::Corruption(what + ": piece_bytes is 0");
  }
  if (info.piece_bytes > kMaxPieceBytes) {
    return Status::Corruption(
        what + ": piece_bytes is " + std::to_string(info.piece_bytes) +
        ", more than any writer writes (" + std::to_string(kMaxPieceBytes) +
        "): it is forged or damaged");
  }
  const uint64_t expected =
      std::max<uint64_t>(1, info.length / info.piece_bytes +
                                (info.length % info.piece_bytes != 0));
  if (info.num_pieces != expected) {
    return Status::Corruption(
        what + ": num_pieces is " + std::to_string(info.num_pieces) + " but " +
        std::to_string(info.length) + " bytes in pieces of " +
        std::to_string(info.piece_bytes) + " make " + std::to_string(expected));
  }
  return Status::OK();
}

// An item with references: the column families its pieces are in
// (info->sources) and each piece's, 0 for its own, 1 for the first source.
Status DecodePieceSources(const fb::StorageInfo& s, const std::string& what,
                          StorageInfo* info) {
  ROCKSDCP_RETURN_IF_ERROR(DecodeNames(s.sources(), what, &info->sources));
  const auto* ps = s.piece_sources();
  if (ps->size() != info->num_pieces) {
    return Status::Corruption(what + ": " + std::to_string(ps->size()) +
                              " piece sources for " +
                              std::to_string(info->num_pieces) + " pieces");
  }
  std::vector<bool> used(info->sources.size());
  info->piece_sources.resize(ps->size());
  for (size_t i = 0; i < ps->size(); ++i) {
    const uint32_t src = ps->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (src > info->sources.size()) {
      return Status::Corruption(what + ": piece " + std::to_string(i) +
                                " names source " + std::to_string(src) +
                                " of " + std::to_string(info->sources.size()));
    }
    if (src > 0) used[src - 1] = true;
    info->piece_sources[i] = src;
  }
  if (std::find(used.begin(), used.end(), false) != used.end()) {
    return Status::Corruption(what + ": a source no piece is in");
  }
  return Status::OK();
}

// Each piece's offset in its file, and the files' first keys' hashes.
Status DecodePieceOffsets(const fb::StorageInfo& s, const std::string& what,
                          StorageInfo* info) {
  const auto* offsets = s.piece_offsets();
  if (offsets->size() != info->num_pieces || s.piece_hashes() == nullptr) {
    return Status::Corruption(
        what + ": " + std::to_string(offsets->size()) + " piece offsets for " +
        std::to_string(info->num_pieces) + " pieces" +
        (s.piece_hashes() == nullptr ? ", without hashes" : ""));
  }
  // Copied out byte-wise, as the hashes are (DecodePieceHashes).
  info->piece_offsets = ReadScalars(offsets);
  info->file_first_key_xxh3 = s.file_first_key_xxh3();
  if (const auto* files = s.source_file_first_key_xxh3()) {
    if (files->size() != info->sources.size()) {
      return Status::Corruption(
          what + ": " + std::to_string(files->size()) + " source files for " +
          std::to_string(info->sources.size()) + " sources");
    }
    info->source_file_first_key_xxh3 = ReadScalars(files);
  }
  return Status::OK();
}

// Each piece's XXH3-128. REQUIRES: s.piece_hashes() is not null.
Status DecodePieceHashes(const fb::StorageInfo& s, const std::string& what,
                         StorageInfo* info) {
  const auto* h = s.piece_hashes();
  if (h->size() != info->num_pieces) {
    return Status::Corruption(what + ": " + std::to_string(h->size()) +
                              " piece hashes for " +
                              std::to_string(info->num_pieces) + " pieces");
  }
  // Copied out byte-wise: FlatBuffers' verifier checks the vector's
  // length field but not that its 8-byte structs are aligned, so a
  // forged value may place them anywhere.
  const auto* bytes = reinterpret_cast<const uint8_t*>(h->Data());
  info->piece_hashes.resize(h->size());
  for (size_t i = 0; i < h->size(); ++i, bytes += sizeof(fb::PieceHash)) {
    uint64_t low, high;
    std::memcpy(&low, bytes, sizeof(low));
    std::memcpy(&high, bytes + sizeof(low), sizeof(high));
    info->piece_hashes[i] = {flatbuffers::EndianScalar(low),
                             flatbuffers::EndianScalar(high)};
  }
  return Status::OK();
}

}  // namespace

Result<StorageInfo> DecodeStorageInfo(std::string_view value,
                                      PieceHashes hashes) {
  const std::string what = "storage info";
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::StorageInfo* s,
      VerifiedRoot<fb::StorageInfo>(aligned, kStorageInfoIdentifier, what));
  // Version 1: written before pieces were bound to their keys; 3: an item
  // with references.
  if (s->format_version() != kBoundStorageInfoFormatVersion &&
      s->format_version() != kReferencingStorageInfoFormatVersion &&
      s->format_version() != 1) {
    return Status::Corruption(what + ": unsupported format_version " +
                              std::to_string(s->format_version()));
  }
  StorageInfo info;
  info.format_version = s->format_version();
  ROCKSDCP_ASSIGN_OR_RETURN(info.kind, DecodeItemKind(*s, what));
  info.length = s->length();
  info.num_pieces = s->num_pieces();
  info.piece_bytes = s->piece_bytes();
  info.compressed = s->compressed();
  if (s->file() != nullptr) info.file = s->file()->str();
  ROCKSDCP_RETURN_IF_ERROR(CheckPieceCount(info, what));
  const bool refs = info.format_version == kReferencingStorageInfoFormatVersion;
  if (refs != (s->sources() != nullptr) ||
      refs != (s->piece_sources() != nullptr) ||
      (refs && s->piece_hashes() == nullptr)) {
    return Status::Corruption(
        what + ": version " + std::to_string(info.format_version) +
        (refs ? " needs" : " has no") + " piece sources and hashes");
  }
  if (refs) ROCKSDCP_RETURN_IF_ERROR(DecodePieceSources(*s, what, &info));
  const bool offsets = s->piece_offsets() != nullptr;
  if (offsets) ROCKSDCP_RETURN_IF_ERROR(DecodePieceOffsets(*s, what, &info));
  if ((hashes == PieceHashes::kRead || refs || offsets) &&
      s->piece_hashes() != nullptr) {
    ROCKSDCP_RETURN_IF_ERROR(DecodePieceHashes(*s, what, &info));
  }
  return info;
}

std::string EncodePieceRef(const PieceRef& ref) {
  flatbuffers::FlatBufferBuilder fbb(128 + ref.key.size() +
                                     ref.column_family.size());
  const auto cf = fbb.CreateString(ref.column_family);
  const auto key = fbb.CreateVector(
      reinterpret_cast<const uint8_t*>(ref.key.data()), ref.key.size());
  const fb::PieceHash hash(ref.hash.low, ref.hash.high);
  fbb.Finish(fb::CreatePieceRef(fbb, kPieceRefFormatVersion, cf, key,
                                ref.byte_length, &hash),
             kPieceRefIdentifier);
  return Finished(fbb);
}

bool IsPieceRef(std::string_view value) {
  return HasIdentifier(value, kPieceRefIdentifier);
}

Result<PieceRef> DecodePieceRef(std::string_view value) {
  const std::string what = "piece reference";
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::PieceRef* r,
      VerifiedRoot<fb::PieceRef>(aligned, kPieceRefIdentifier, what));
  if (r->format_version() != kPieceRefFormatVersion) {
    return Status::Corruption(what + ": unsupported format_version " +
                              std::to_string(r->format_version()));
  }
  if (r->column_family() == nullptr || r->column_family()->size() == 0 ||
      r->key() == nullptr || r->hash() == nullptr) {
    return Status::Corruption(what + ": no column family, key or hash");
  }
  PieceRef ref;
  ref.column_family = r->column_family()->str();
  ref.key.assign(reinterpret_cast<const char*>(r->key()->data()),
                 r->key()->size());
  ref.byte_length = r->byte_length();
  // Aligned: AlignedBytes holds the value at an 8-byte boundary, and the
  // verifier checks a struct field's alignment within it.
  ref.hash = {r->hash()->low(), r->hash()->high()};
  return ref;
}

std::string EncodeRankPlan(const RankPlan& plan) {
  flatbuffers::FlatBufferBuilder fbb(256);
  std::vector<flatbuffers::Offset<fb::StorageDataEntry>> items;
  items.reserve(plan.base_items.size());
  for (const auto& [index, info] : plan.base_items) {
    const auto idx = CreateIndex(fbb, index);
    const std::string value = EncodeStorageInfo(info);
    const auto bytes = fbb.CreateVector(
        reinterpret_cast<const uint8_t*>(value.data()), value.size());
    items.push_back(fb::CreateStorageDataEntry(fbb, idx, bytes));
  }
  const auto prefix = fbb.CreateString(plan.file_prefix);
  const auto base = fbb.CreateString(plan.base_checkpoint_id);
  const auto entries = fbb.CreateVector(items);
  const auto save_id = fbb.CreateString(plan.save_id);
  fbb.Finish(fb::CreateRankPlan(fbb, prefix, base, entries, save_id),
             kRankPlanIdentifier);
  return Finished(fbb);
}

bool IsRankPlan(std::string_view value) {
  return HasIdentifier(value, kRankPlanIdentifier);
}

Result<RankPlan> DecodeRankPlan(std::string_view value) {
  const std::string what = "rank plan";
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::RankPlan* r,
      VerifiedRoot<fb::RankPlan>(aligned, kRankPlanIdentifier, what));
  RankPlan plan;
  if (r->file_prefix() != nullptr) plan.file_prefix = r->file_prefix()->str();
  if (r->base_checkpoint_id() != nullptr) {
    plan.base_checkpoint_id = r->base_checkpoint_id()->str();
  }
  if (r->save_id() != nullptr) plan.save_id = r->save_id()->str();
  if (r->base_items() != nullptr) {
    for (const fb::StorageDataEntry* e : *r->base_items()) {
      ROCKSDCP_ASSIGN_OR_RETURN(MetadataIndex index, DecodeIndex(*e->index()));
      const auto* info = e->info();
      ROCKSDCP_ASSIGN_OR_RETURN(
          StorageInfo decoded,
          DecodeStorageInfo(
              info == nullptr ? std::string_view()
                              : std::string_view(
                                    reinterpret_cast<const char*>(info->data()),
                                    info->size()),
              PieceHashes::kRead));
      plan.base_items.emplace(std::move(index), std::move(decoded));
    }
  }
  return plan;
}

}  // namespace rocksdcp::format
