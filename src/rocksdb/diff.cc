// DiffCheckpoints: two checkpoints compared item by item from the piece
// hashes their storage infos record (schema/README.md), reading their
// metadata values and no piece. One item's decoded storage infos are held
// at a time.

#include "rocksdcp/diff.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "rocksdb/catalog_codec.h"
#include "rocksdb/stored_item.h"
#include "util/text.h"

namespace rocksdcp {
namespace {

using util::Quote;

Result<Metadata> ReadMetadataOf(Store& store, std::string_view id) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
  ROCKSDCP_RETURN_IF_ERROR(reader->Reset(id));
  return reader->ReadMetadata();
}

// An item's storage infos with their piece hashes, by chunk offsets (none
// for a byte item). The reader checked that they fit in the store.
using Entries = std::map<std::vector<int64_t>, format::StorageInfo>;

// One checkpoint's metadata, and the finder of its chunks.
struct Side {
  std::string_view id;
  Metadata metadata;
  ChunkFinder chunks;
};

Result<Entries> EntriesOf(Side& side, const std::string& fqn,
                          const StorageMetadata& item) {
  Entries out;
  auto add = [&](const MetadataIndex& index, bool tensor) -> Status {
    auto stored = LookupStoredItem(side.metadata, index, tensor, side.chunks,
                                   format::PieceHashes::kRead);
    if (!stored.ok()) {
      return stored.status().WithContext("checkpoint " + Quote(side.id) +
                                         ", item " + Quote(index.ToString()));
    }
    out.emplace(index.offset.value_or(std::vector<int64_t>{}),
                std::move(stored->info));
    return Status::OK();
  };
  if (const auto* t = std::get_if<TensorStorageMetadata>(&item)) {
    for (const ChunkStorageMetadata& chunk : t->chunks) {
      ROCKSDCP_RETURN_IF_ERROR(add(MetadataIndex(fqn, chunk.offsets), true));
    }
  } else {
    ROCKSDCP_RETURN_IF_ERROR(add(MetadataIndex(fqn), false));
  }
  return out;
}

void CountAll(const Entries& entries, ItemDiff* d) {
  for (const auto& [offsets, info] : entries) {
    d->pieces += info.num_pieces;
    d->bytes += info.length;
  }
}

bool SameShape(const StorageMetadata& a, const StorageMetadata& b) {
  const auto* ta = std::get_if<TensorStorageMetadata>(&a);
  const auto* tb = std::get_if<TensorStorageMetadata>(&b);
  if ((ta == nullptr) != (tb == nullptr)) return false;
  return ta == nullptr ||
         (ta->properties.dtype == tb->properties.dtype && ta->size == tb->size);
}

bool SameChunks(const StorageMetadata& a, const StorageMetadata& b) {
  const auto* ta = std::get_if<TensorStorageMetadata>(&a);
  const auto* tb = std::get_if<TensorStorageMetadata>(&b);
  if (ta == nullptr) return true;  // A byte item is one entry either way.
  auto layout = [](const TensorStorageMetadata& t) {
    std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> s;
    for (const ChunkStorageMetadata& c : t.chunks)
      s.emplace(c.offsets, c.sizes);
    return s;
  };
  return layout(*ta) == layout(*tb);
}

// `d` for an item in both checkpoints, of the same shape and chunks.
void ComparePieces(const Entries& from, const Entries& to, ItemDiff* d) {
  for (const auto& [offsets, b] : to) {
    auto it = from.find(offsets);
    if (it == from.end()) {
      d->change = ItemChange::kIncomparable;
      return;
    }
    const format::StorageInfo& a = it->second;
    if (a.length != b.length) {
      // Only a byte item can change size with its shape the same: all of
      // it changed.
      d->changed_pieces += b.num_pieces;
      d->changed_bytes += b.length;
      continue;
    }
    // Pieces compare when they cover the same bytes: one piece each, or
    // pieces of one size.
    const bool same_pieces =
        a.num_pieces == b.num_pieces &&
        (b.num_pieces == 1 || a.piece_bytes == b.piece_bytes);
    if (!same_pieces || a.piece_hashes.empty() || b.piece_hashes.empty()) {
      d->change = ItemChange::kIncomparable;
      return;
    }
    for (uint32_t p = 0; p < b.num_pieces; ++p) {
      if (a.piece_hashes[p] == b.piece_hashes[p]) continue;
      const uint64_t offset = uint64_t{p} * b.piece_bytes;
      ++d->changed_pieces;
      d->changed_bytes += std::min(b.piece_bytes, b.length - offset);
    }
  }
  d->change =
      d->changed_pieces > 0 ? ItemChange::kChanged : ItemChange::kUnchanged;
}

Result<ItemDiff> DiffItem(Side& from, Side& to, const std::string& fqn) {
  ItemDiff d;
  d.fqn = fqn;
  auto a = from.metadata.state_dict_metadata.find(fqn);
  auto b = to.metadata.state_dict_metadata.find(fqn);
  const bool in_from = a != from.metadata.state_dict_metadata.end();
  if (b == to.metadata.state_dict_metadata.end()) {
    ROCKSDCP_ASSIGN_OR_RETURN(Entries ea, EntriesOf(from, fqn, a->second));
    d.change = ItemChange::kRemoved;
    CountAll(ea, &d);
    return d;
  }
  ROCKSDCP_ASSIGN_OR_RETURN(Entries eb, EntriesOf(to, fqn, b->second));
  CountAll(eb, &d);
  if (!in_from || !SameShape(a->second, b->second)) {
    d.change = in_from ? ItemChange::kReshaped : ItemChange::kAdded;
    d.changed_pieces = d.pieces;
    d.changed_bytes = d.bytes;
    return d;
  }
  if (!SameChunks(a->second, b->second)) {
    d.change = ItemChange::kIncomparable;
    return d;
  }
  ROCKSDCP_ASSIGN_OR_RETURN(Entries ea, EntriesOf(from, fqn, a->second));
  ComparePieces(ea, eb, &d);
  if (d.change == ItemChange::kIncomparable) {
    d.changed_pieces = 0;
    d.changed_bytes = 0;
  }
  return d;
}

}  // namespace

std::string_view ItemChangeName(ItemChange change) {
  switch (change) {
    case ItemChange::kUnchanged:
      return "unchanged";
    case ItemChange::kChanged:
      return "changed";
    case ItemChange::kAdded:
      return "added";
    case ItemChange::kRemoved:
      return "removed";
    case ItemChange::kReshaped:
      return "reshaped";
    case ItemChange::kIncomparable:
      return "incomparable";
  }
  return "unknown";
}

Result<CheckpointDiff> DiffCheckpoints(Store& store, std::string_view from,
                                       std::string_view to) {
  const std::string where = "diff of checkpoints " + Quote(from) + " and " +
                            Quote(to) + " in store " + Quote(store.path());
  Side a{from, {}, {}}, b{to, {}, {}};
  for (Side* side : {&a, &b}) {
    auto metadata = ReadMetadataOf(store, side->id);
    if (!metadata.ok()) return metadata.status().WithContext(where);
    side->metadata = std::move(metadata).value();
  }
  CheckpointDiff diff;
  diff.from = std::string(from);
  diff.to = std::string(to);
  // One item's storage infos at a time; the fqns in order, each once.
  std::set<std::string_view> fqns;
  for (const Side* side : {&a, &b}) {
    for (const auto& [fqn, item] : side->metadata.state_dict_metadata) {
      fqns.insert(fqn);
    }
  }
  diff.items.reserve(fqns.size());
  for (std::string_view fqn : fqns) {
    auto d = DiffItem(a, b, std::string(fqn));
    if (!d.ok()) return d.status().WithContext(where);
    diff.items.push_back(std::move(d).value());
  }
  return diff;
}

}  // namespace rocksdcp
