// Store::Verify: checks committed checkpoints exactly as a load does, and
// reports every problem instead of stopping at the first.
//
// A checkpoint is checked in three steps: its catalog entry (it decodes,
// names this id and a column family the store has), its metadata (present,
// hashing to the checksum the entry records, decoding), then every piece of
// every item the metadata lists, in key order, with the reader's own checks
// (LookupStoredItem, VerifyPieceValue). A checkpoint whose catalog entry or
// metadata is unusable is reported as such and its pieces are not read:
// without the metadata nothing says what they should hold.
//
// Damage is a finding; an error that says the store cannot be read at all
// (an I/O error other than a missing file) ends Verify with that error, as
// the report would otherwise claim checks that never ran.

#include <rocksdb/db.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/reader.h"
#include "rocksdb/rocksdb_status.h"
#include "rocksdb/store_impl.h"
#include "util/chunk_check.h"
#include "util/text.h"

namespace rocksdcp {

using util::Quote;

namespace {

// True if `s` says the bytes on disk are damaged (a block checksum that
// does not match, a malformed or truncated file, a file that is gone), as
// opposed to the disk failing to read them.
bool IsDamage(const rocksdb::Status& s) {
  return s.IsCorruption() || s.IsPathNotFound() || s.IsIncomplete();
}

// One checkpoint to verify, pinned so that it stays readable meanwhile.
struct Target {
  std::string id;
  // Set if the catalog entry resolved to a column family.
  std::optional<CommittedCheckpoint> checkpoint;
  // Why not, if it did not.
  Status lookup;
};

// One item of a checkpoint, in the order its pieces are read.
struct ItemToCheck {
  std::string first_key;
  const MetadataIndex* index = nullptr;
  Result<StoredItem> item = Status::Internal("not looked up");
};

class StoreVerifier {
 public:
  StoreVerifier(StoreImpl* store, const VerifyOptions& options)
      : store_(store), options_(options) {}

  Result<VerifyReport> Run() {
    ROCKSDCP_ASSIGN_OR_RETURN(std::vector<Target> targets, Targets());
    for (const Target& t : targets) {
      if (t.checkpoint) {
        progress_.bytes_total += t.checkpoint->info.bytes;
        progress_.items_total += t.checkpoint->info.items;
      }
    }
    // Once for the store: a catalog of n entries is scanned once, not n
    // times.
    ROCKSDCP_ASSIGN_OR_RETURN(const auto ids_by_cf,
                              store_->IdsByColumnFamily());
    VerifyReport report;
    report.checkpoints.reserve(targets.size());
    for (const Target& t : targets) {
      report_ = &report.checkpoints.emplace_back();
      report_->checkpoint_id = t.id;
      id_ = t.id;
      damaged_.clear();
      if (!t.checkpoint) {
        Problem(std::nullopt, std::nullopt, t.lookup);
        continue;
      }
      const std::string& cf = t.checkpoint->info.column_family;
      const auto sharing_it = ids_by_cf.find(cf);
      if (sharing_it != ids_by_cf.end() && sharing_it->second.size() > 1) {
        const std::vector<std::string>& sharing = sharing_it->second;
        Problem(
            std::nullopt, std::nullopt,
            Status::Corruption(Where() + ": " +
                               SharedColumnFamilyProblem(t.id, cf, sharing)));
      }
      ROCKSDCP_RETURN_IF_ERROR(VerifyCheckpoint(*t.checkpoint));
    }
    value_.Reset();
    return report;
  }

 private:
  std::string Where() const {
    return "verify of checkpoint " + Quote(id_) + " in store " +
           Quote(store_->path());
  }
  std::string ItemWhere(const MetadataIndex& index) const {
    return Where() + ", item " + Quote(index.ToString());
  }

  // The checkpoints named, or every one the catalog lists, each resolved
  // through the catalog as a load resolves it.
  Result<std::vector<Target>> Targets() {
    std::vector<std::string> ids = options_.checkpoint_ids;
    const bool named = !ids.empty();
    if (!named) {
      ROCKSDCP_ASSIGN_OR_RETURN(ids, CatalogIds());
    }
    std::vector<Target> targets;
    for (std::string& id : ids) {
      Target t;
      Status valid = keys::ValidateCheckpointId(id);
      t.id = std::move(id);
      if (!valid.ok()) {
        if (named) return valid;
        // Only a damaged catalog holds a key no save could have written.
        t.lookup =
            Status::Corruption("the catalog of store " + Quote(store_->path()) +
                               " lists an invalid id: " + valid.message());
        targets.push_back(std::move(t));
        continue;
      }
      auto c = store_->LookupCommitted(t.id);
      if (c.ok()) {
        t.checkpoint = std::move(c).value();
      } else if (c.status().IsNotFound()) {
        // Named: the caller asked for what is not there. Listed: deleted
        // since the catalog was read, which is no damage.
        if (named) return c.status();
        continue;
      } else if (c.status().IsCorruption()) {
        t.lookup = c.status();  // A finding: the entry is damaged.
      } else {
        return c.status();
      }
      targets.push_back(std::move(t));
    }
    return targets;
  }

  // Every id with a catalog key, whatever its entry holds.
  Result<std::vector<std::string>> CatalogIds() {
    rocksdb::DB* db = store_->db();
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(ro, db->DefaultColumnFamily()));
    const std::string prefix(keys::kCatalogPrefix);
    std::vector<std::string> ids;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
         it->Next()) {
      ids.push_back(it->key().ToString().substr(prefix.size()));
    }
    if (!it->status().ok()) {
      return FromRocksDB(
          it->status(),
          "verify of store " + Quote(store_->path()) + ": reading the catalog");
    }
    return ids;
  }

  // Records a problem, or only counts it once max_problems are listed. A
  // problem of an item is also summed up in damaged_items either way, so
  // that every damaged item is named whatever the cap.
  void Problem(std::optional<MetadataIndex> item, std::optional<uint32_t> piece,
               Status status) {
    if (item) DamagedItemProblem(item->fqn, piece.has_value(), status);
    if (report_->problems.size() >= options_.max_problems) {
      ++report_->unlisted_problems;
      return;
    }
    report_->problems.push_back(
        {id_, std::move(item), piece, std::move(status)});
  }

  void DamagedItemProblem(const std::string& fqn, bool piece,
                          const Status& status) {
    // By fqn, not by last entry: a tensor's chunks are adjacent in key
    // order, but metadata that is damaged can list an fqn twice, once as
    // a byte item and once as a tensor, with other items between them.
    auto [it, added] = damaged_.try_emplace(fqn, report_->damaged_items.size());
    if (added) report_->damaged_items.push_back({fqn, 0, 0, status});
    DamagedItem& d = report_->damaged_items[it->second];
    ++d.problems;
    if (piece) ++d.bad_pieces;
  }

  void Advance(uint64_t bytes, uint64_t items) {
    progress_.bytes_done += bytes;
    progress_.items_done += items;
    if (options_.progress) options_.progress(progress_);
  }

  Status VerifyCheckpoint(const CommittedCheckpoint& c) {
    const CheckpointInfo& info = c.info;
    std::optional<Metadata> metadata;
    ROCKSDCP_RETURN_IF_ERROR(ReadMetadata(c, &metadata));
    if (!metadata) {
      // Nothing says what its pieces hold: none is read.
      progress_.bytes_total -= info.bytes;
      progress_.items_total -= info.items;
      Advance(0, 0);
      return Status::OK();
    }

    // Look every item up first: the totals the catalog recorded are then
    // checked, and the progress corrected, before any piece is read.
    std::vector<ItemToCheck> items;
    items.reserve(metadata->storage_data.size());
    uint64_t bytes = 0;
    bool all_known = true;
    ChunkFinder chunks;
    for (const auto& stored : metadata->storage_data) {
      const MetadataIndex& index = stored.first;
      ItemToCheck& item = items.emplace_back();
      item.first_key = keys::PieceKey(index, 0);
      item.index = &index;
      item.item = LookupStoredItem(*metadata, index, index.offset.has_value(),
                                   chunks, format::PieceHashes::kRead);
      if (item.item.ok()) {
        bytes += item.item->info.length;
      } else {
        all_known = false;
      }
    }
    std::sort(items.begin(), items.end(),
              [](const ItemToCheck& a, const ItemToCheck& b) {
                return a.first_key < b.first_key;
              });
    if (items.size() != info.items || (all_known && bytes != info.bytes)) {
      Problem(
          std::nullopt, std::nullopt,
          Status::Corruption(
              Where() + ": its catalog entry records " +
              std::to_string(info.items) + " items of " +
              std::to_string(info.bytes) + " bytes, its metadata lists " +
              std::to_string(items.size()) + " items" +
              (all_known ? " of " + std::to_string(bytes) + " bytes" : "")));
    }
    CheckItemsAsALoadWould(*metadata);
    progress_.items_total += items.size();
    progress_.items_total -= info.items;
    progress_.bytes_total += bytes;
    progress_.bytes_total -= info.bytes;

    for (ItemToCheck& item : items) {
      ROCKSDCP_RETURN_IF_ERROR(VerifyItem(c, item));
    }
    return Status::OK();
  }

  // What a load checks of each item the metadata lists before it reads a
  // piece, which the pieces' own checks can't show: a tensor's chunks must
  // tile it (no overlap, no hole), and every chunk and byte item needs a
  // storage entry saying where its pieces are.
  void CheckItemsAsALoadWould(const Metadata& metadata) {
    for (const auto& [fqn, item] : metadata.state_dict_metadata) {
      const auto* tensor = std::get_if<TensorStorageMetadata>(&item);
      if (tensor == nullptr) {
        MissingStorage(metadata, MetadataIndex(fqn));
        continue;
      }
      if (std::string tiling =
              util::ChunkTilingProblem(tensor->size, tensor->chunks);
          !tiling.empty()) {
        Problem(
            MetadataIndex(fqn), std::nullopt,
            Status::Corruption(ItemWhere(MetadataIndex(fqn)) + ": " + tiling));
        continue;  // Its chunks can't be told apart by offset.
      }
      for (const ChunkStorageMetadata& chunk : tensor->chunks) {
        MissingStorage(metadata, MetadataIndex(fqn, chunk.offsets));
      }
    }
  }

  void MissingStorage(const Metadata& metadata, const MetadataIndex& index) {
    if (metadata.storage_data.count(index) > 0) return;
    Problem(index, std::nullopt,
            Status::Corruption(ItemWhere(index) +
                               ": the metadata records no storage for it"));
  }

  // Sets `*metadata` if the metadata value can be used to check pieces:
  // it is there and decodes. A checksum that does not match the catalog
  // entry is reported, but the pieces are still checked against metadata
  // that decodes, since the damage may be in the entry.
  Status ReadMetadata(const CommittedCheckpoint& c,
                      std::optional<Metadata>* metadata) {
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;
    std::string value;
    const rocksdb::Status s = store_->db()->Get(
        ro, c.cf.get(),
        rocksdb::Slice(keys::kMetadataKey.data(), keys::kMetadataKey.size()),
        &value);
    if (s.IsNotFound()) {
      Problem(std::nullopt, std::nullopt,
              Status::Corruption(
                  Where() + ": the catalog lists it but its metadata key " +
                  std::string(keys::kMetadataKey) + " is missing"));
      return Status::OK();
    }
    if (!s.ok()) {
      Status read = FromRocksDB(s, Where() + ": reading metadata");
      if (!IsDamage(s)) return read;
      Problem(std::nullopt, std::nullopt, Status::Corruption(read.message()));
      return Status::OK();
    }
    const uint64_t sum = format::Xxh3(value);
    if (sum != c.info.metadata_checksum) {
      Problem(std::nullopt, std::nullopt,
              Status::Corruption(
                  Where() + ": metadata checksum mismatch (catalog records " +
                  std::to_string(c.info.metadata_checksum) +
                  ", value hashes to " + std::to_string(sum) + ")"));
    }
    auto decoded = format::DecodeMetadata(value, {PieceBytes(c, value)});
    if (!decoded.ok()) {
      Problem(std::nullopt, std::nullopt,
              decoded.status().WithContext(Where()));  // It says "metadata: ".
      return Status::OK();
    }
    // Claims that don't fit are not checked piece by piece: that would
    // take time in proportion to the claim, not to the store.
    if (Status fits =
            CheckStorageFits(*decoded, PieceBytes(c, value), c.sources);
        !fits.ok()) {
      Problem(std::nullopt, std::nullopt, fits.WithContext(Where()));
      return Status::OK();
    }
    *metadata = std::move(decoded).value();
    return Status::OK();
  }

  Status VerifyItem(const CommittedCheckpoint& c, const ItemToCheck& item) {
    const MetadataIndex& index = *item.index;
    if (!item.item.ok()) {
      Problem(index, std::nullopt,
              item.item.status().WithContext(ItemWhere(index)));
      ++report_->items_checked;
      Advance(0, 1);
      return Status::OK();
    }
    const StoredItem& stored = *item.item;
    // The pieces' payload hashes, if the item was saved with them: each
    // must be its piece's, since diffs (and incremental saves) trust them.
    const std::vector<format::Hash128>* piece_hashes =
        stored.info.piece_hashes.empty() ? nullptr : &stored.info.piece_hashes;
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;
    // fill_cache stays on, as for loads: only a block read through the
    // cache is handed out in place (else RocksDB copies the piece out of
    // it), a piece larger than the cache passes through it into the
    // store's buffer pool, and small items sharing a block read it once.
    for (uint32_t p = 0; p < stored.info.num_pieces; ++p) {
      key_ = p == 0 ? item.first_key : keys::PieceKey(index, p);
      value_.Reset();
      const rocksdb::Status s =
          store_->db()->Get(ro, c.cf.get(), key_, &value_);
      const uint64_t length = stored.info.PieceLength(p);
      if (!s.ok() && !s.IsNotFound() && !IsDamage(s)) {
        return FromRocksDB(s, PieceWhere(index, stored, p));
      }
      format::DecodedPiece piece;
      Status verified = VerifyPieceOrReference(
          *store_, c, ro, s, std::string_view(value_.data(), value_.size()),
          key_, index, stored, p, &referenced_, &decoded_, &piece);
      if (!verified.ok()) {
        // A file that is gone reads as an I/O error; here it is damage.
        Problem(
            index, p,
            Status::Corruption(
                verified.WithContext(PieceWhere(index, stored, p)).message()));
      } else if (piece_hashes != nullptr &&
                 format::Xxh3_128(piece.data, piece.size) !=
                     (*piece_hashes)[p]) {
        Problem(index, p,
                Status::Corruption(
                    PieceWhere(index, stored, p) +
                    ": its payload does not hash to the XXH3-128 its storage "
                    "info records for it"));
      }
      ++report_->pieces_checked;
      report_->bytes_checked += length;
      Advance(length, p + 1 == stored.info.num_pieces ? 1 : 0);
    }
    ++report_->items_checked;
    return Status::OK();
  }

  std::string PieceWhere(const MetadataIndex& index, const StoredItem& item,
                         uint32_t p) const {
    return ItemWhere(index) + ", piece " + std::to_string(p) + " of " +
           std::to_string(item.info.num_pieces);
  }

  StoreImpl* const store_;
  const VerifyOptions& options_;
  Progress progress_;
  // The checkpoint being verified, and its report.
  std::string id_;
  CheckpointVerifyReport* report_ = nullptr;
  // Its damaged items' fqns, to their index in report_->damaged_items.
  std::unordered_map<std::string, size_t> damaged_;
  // Reused for every piece: one piece's block is held at a time.
  std::string key_;
  rocksdb::PinnableSlice value_;
  rocksdb::PinnableSlice referenced_;
  format::PieceDecodeBuffer decoded_;  // Compressed pieces decode here.
};

}  // namespace

Result<VerifyReport> StoreImpl::Verify(const VerifyOptions& options) {
  ROCKSDCP_RETURN_IF_ERROR(NeedDB("verify"));
  try {
    return StoreVerifier(this, options).Run();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("verify of store " + Quote(path_) +
                                     ": out of memory");
  }
}

}  // namespace rocksdcp
