#include "rocksdb/sst_vet.h"

#include <lz4.h>
#include <snappy.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>

namespace rocksdcp {
namespace {

// RocksDB 7.8's table/format.h. The footer is the file's last bytes:
//   legacy (format_version 0): metaindex handle, index handle (padded to 40
//     bytes), fixed64 magic                                      = 48 bytes
//   versioned: checksum type (1 byte), the two handles (40), fixed32
//     format_version, fixed64 magic                              = 53 bytes
// A block is its contents, then a trailer: compression type (1 byte) and
// checksum (4). A handle (varint64 offset, varint64 size) covers contents.
constexpr uint64_t kBlockTrailerSize = 5;
constexpr uint64_t kBlockBasedTableMagic = 0x88e241b785f4cff7ull;
constexpr uint64_t kLegacyBlockBasedTableMagic = 0xdb4775248b80fb57ull;
constexpr uint64_t kPlainTableMagic = 0x8242229663bf9564ull;
constexpr uint64_t kLegacyPlainTableMagic = 0x4f3418eb7a8f13b8ull;
constexpr uint64_t kCuckooTableMagic = 0x926789d0c5f17873ull;
constexpr size_t kLegacyFooterSize = 48;
constexpr size_t kFooterSize = 53;
constexpr size_t kFooterHandlesSize = 40;
constexpr uint32_t kLatestFormatVersion = 5;
constexpr uint8_t kMaxChecksumType = 4;  // kXXH3
// block.cc: a block larger than this has no data-block hash index, and its
// last fixed32 is the restart count whole.
constexpr size_t kMaxBlockSizeSupportedByHashIndex = 1u << 16;
// Data blocks are read through a window this large: a small block's
// neighbours come with it, and a large block's trailer read brings the
// next block's first bytes.
constexpr size_t kWindowBytes = 64u << 10;

// include/rocksdb/compression_type.h
enum : uint8_t {
  kNoCompression = 0x0,
  kSnappyCompression = 0x1,
  kZlibCompression = 0x2,
  kBZip2Compression = 0x3,
  kLZ4Compression = 0x4,
  kLZ4HCCompression = 0x5,
  kXpressCompression = 0x6,
  kZSTD = 0x7,
  kZSTDNotFinalCompression = 0x40,
};

// rocksdb::IndexType (include/rocksdb/table.h)
enum : uint32_t {
  kBinarySearch = 0,
  kHashSearch = 1,
  kTwoLevelIndexSearch = 2,
  kBinarySearchWithFirstKey = 3,
};

uint32_t DecodeFixed32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 |
         uint32_t{b[3]} << 24;
}

uint64_t DecodeFixed64(const char* p) {
  return uint64_t{DecodeFixed32(p)} | uint64_t{DecodeFixed32(p + 4)} << 32;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Reads varints and bytes from a buffer, never past its end. Varints that
// overflow their type are refused (RocksDB drops the extra bits).
class Cursor {
 public:
  explicit Cursor(std::string_view s)
      : p_(s.data()), end_(s.data() + s.size()) {}

  bool Varint32(uint32_t* v) {
    uint64_t x;
    if (!Varint(5, &x) || x > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool Varint64(uint64_t* v) { return Varint(10, v); }
  bool Bytes(size_t n, std::string_view* out) {
    if (n > left()) return false;
    *out = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  const char* pos() const { return p_; }

 private:
  bool Varint(int max_bytes, uint64_t* v) {
    uint64_t result = 0;
    for (int i = 0; i < max_bytes && p_ < end_; ++i) {
      const uint64_t byte = static_cast<unsigned char>(*p_++);
      if (i == 9 && byte > 1) return false;
      result |= (byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return false;
  }

  const char* p_;
  const char* end_;
};

struct Handle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

bool DecodeHandle(Cursor& c, Handle* h) {
  return c.Varint64(&h->offset) && c.Varint64(&h->size);
}

// One entry of a block (table/block_based/block_builder.cc):
//   varint32 shared, varint32 non_shared, [varint32 value_length,]
//   key bytes [shared, shared + non_shared), value
// value_length is absent in delta-encoded index blocks; there `value` runs
// to the restart array and the caller says where it ends (EndValue).
struct Entry {
  uint32_t shared = 0;
  std::string_view key_delta;
  std::string_view value;
};

// Walks a block's entries in order, checking its restart array (fixed32
// offsets, then a fixed32 count) against them: every restart point must be
// an entry whose key shares nothing, so that RocksDB, seeking from any
// restart point, decodes the very entries walked here. Errors are
// descriptions; the caller names the block.
class BlockWalker {
 public:
  std::string Open(std::string_view block) {
    block_ = block;
    if (block.size() < 4) return "is too short for its restart count";
    num_restarts_ = DecodeFixed32(block.data() + block.size() - 4);
    // Only data blocks carry a hash index (the count's top bit), and they
    // are never parsed here.
    if (block.size() <= kMaxBlockSizeSupportedByHashIndex &&
        (num_restarts_ >> 31) != 0) {
      return "has a data block hash index, which only data blocks may have";
    }
    const uint64_t restart_bytes = (uint64_t{num_restarts_} + 1) * 4;
    if (restart_bytes > block.size()) {
      return "claims " + std::to_string(num_restarts_) + " restart points in " +
             std::to_string(block.size()) + " bytes";
    }
    entries_end_ = block.size() - restart_bytes;
    if (entries_end_ == 0) {
      // An empty block, as BlockBuilder writes it: one restart point at 0.
      if (num_restarts_ > 1 || (num_restarts_ == 1 && RestartAt(0) != 0)) {
        return "has restart points but no entries";
      }
      next_restart_ = num_restarts_;
    } else if (num_restarts_ == 0 || RestartAt(0) != 0) {
      return "does not restart at its first entry";
    }
    return "";
  }

  bool AtEnd() const { return pos_ == entries_end_; }

  std::string Next(bool has_value_length, Entry* e) {
    const size_t offset = pos_;
    bool at_restart = false;
    if (next_restart_ < num_restarts_) {
      const uint32_t restart = RestartAt(next_restart_);
      if (restart < offset) return BadRestart(restart);
      at_restart = restart == offset;
      if (at_restart) ++next_restart_;
    }
    Cursor c(block_.substr(pos_, entries_end_ - pos_));
    uint32_t non_shared = 0;
    uint32_t value_length = 0;
    if (!c.Varint32(&e->shared) || !c.Varint32(&non_shared) ||
        (has_value_length && !c.Varint32(&value_length))) {
      return "has a truncated entry at offset " + std::to_string(offset);
    }
    if (e->shared > key_size_ || (at_restart && e->shared != 0)) {
      return "has an entry at offset " + std::to_string(offset) + " sharing " +
             std::to_string(e->shared) + " bytes of a " +
             std::to_string(key_size_) + "-byte key" +
             (at_restart ? " at a restart point" : "");
    }
    if (!c.Bytes(non_shared, &e->key_delta) ||
        (has_value_length && !c.Bytes(value_length, &e->value))) {
      return "has an entry at offset " + std::to_string(offset) +
             " running past its entries";
    }
    key_size_ = uint64_t{e->shared} + non_shared;
    if (has_value_length) {
      pos_ = static_cast<size_t>(c.pos() - block_.data());
    } else {
      e->value = std::string_view(c.pos(), c.left());
      pos_ = entries_end_ - c.left();
    }
    return "";
  }

  // Delta-encoded index entries: the value took `n` bytes.
  void EndValue(size_t n) { pos_ += n; }

  std::string Finish() const {
    if (next_restart_ < num_restarts_) {
      return BadRestart(RestartAt(next_restart_));
    }
    return "";
  }

 private:
  uint32_t RestartAt(uint32_t i) const {
    return DecodeFixed32(block_.data() + entries_end_ + 4 * uint64_t{i});
  }
  static std::string BadRestart(uint32_t restart) {
    return "has a restart point at offset " + std::to_string(restart) +
           " that is not at an entry";
  }

  std::string_view block_;
  size_t entries_end_ = 0;
  size_t pos_ = 0;
  uint32_t num_restarts_ = 0;
  uint32_t next_restart_ = 0;
  uint64_t key_size_ = 0;
};

class Vetter {
 public:
  // With a `layout`, data blocks are listed there rather than vetted.
  Vetter(rocksdb::FSRandomAccessFile& file, uint64_t file_size,
         const SstVetLimits& limits, const std::string& name, SstLayout* layout)
      : file_(file),
        file_size_(file_size),
        limits_(limits),
        name_(name),
        budget_(limits.max_parsed_bytes),
        layout_(layout) {}

  Status Run() {
    Handle metaindex;
    Handle index;
    ROCKSDCP_RETURN_IF_ERROR(ReadFooter(&metaindex, &index));
    if (layout_ != nullptr) layout_->format_version = format_version_;
    std::string block;
    ROCKSDCP_RETURN_IF_ERROR(ReadParsedBlock(metaindex, "metaindex", &block));
    Handle properties;
    bool has_properties = false;
    ROCKSDCP_RETURN_IF_ERROR(
        VetMetaBlocks(metaindex, block, &properties, &has_properties));
    // Without properties RocksDB reads a binary-search index of full values.
    uint32_t index_type = kBinarySearch;
    if (has_properties) {
      ROCKSDCP_RETURN_IF_ERROR(ReadProperties(properties, &index_type));
    }
    switch (index_type) {
      case kBinarySearch:
      case kHashSearch:  // its index block is a binary-search one
        return VetIndex(index, "index", /*partitioned=*/false);
      case kTwoLevelIndexSearch:
        return VetIndex(index, "top-level index", /*partitioned=*/true);
      case kBinarySearchWithFirstKey:
        return Status::NotSupported(
            Prefix() + "index type kBinarySearchWithFirstKey is not supported");
      default:
        return Bad("unknown index type " + std::to_string(index_type));
    }
  }

 private:
  std::string Prefix() const { return "sst " + name_ + ": "; }
  Status Bad(const std::string& what) const {
    return Status::Corruption(Prefix() + what);
  }
  static std::string At(const std::string& what, const Handle& h) {
    return what + " block at offset " + std::to_string(h.offset);
  }

  Status Read(uint64_t offset, size_t n, std::string* out) {
    out->resize(n);
    rocksdb::Slice result;
    const rocksdb::IOStatus s = file_.Read(offset, n, rocksdb::IOOptions(),
                                           &result, out->data(), nullptr);
    if (!s.ok()) {
      return Status::IOError(Prefix() + "reading " + std::to_string(n) +
                             " bytes at offset " + std::to_string(offset) +
                             ": " + s.ToString());
    }
    if (result.size() != n) {
      return Bad("truncated: " + std::to_string(n) + " bytes at offset " +
                 std::to_string(offset) + " read as " +
                 std::to_string(result.size()));
    }
    if (result.data() != out->data()) {
      std::memmove(out->data(), result.data(), n);
    }
    return Status::OK();
  }

  Status ReadFooter(Handle* metaindex, Handle* index) {
    if (file_size_ < kLegacyFooterSize) {
      return Bad("the file's " + std::to_string(file_size_) +
                 " bytes are too few for an SST file's footer");
    }
    const size_t tail_size =
        static_cast<size_t>(std::min<uint64_t>(file_size_, kFooterSize));
    std::string tail;
    ROCKSDCP_RETURN_IF_ERROR(Read(file_size_ - tail_size, tail_size, &tail));
    const uint64_t magic = DecodeFixed64(tail.data() + tail_size - 8);
    std::string_view handles;
    if (magic == kLegacyBlockBasedTableMagic) {
      format_version_ = 0;
      data_end_ = file_size_ - kLegacyFooterSize;
      handles = std::string_view(tail).substr(tail_size - kLegacyFooterSize,
                                              kFooterHandlesSize);
    } else if (magic == kBlockBasedTableMagic) {
      if (tail_size < kFooterSize) {
        return Bad("the file's " + std::to_string(file_size_) +
                   " bytes are too few for its footer");
      }
      format_version_ = DecodeFixed32(tail.data() + tail_size - 12);
      if (format_version_ > kLatestFormatVersion) {
        return Bad("unsupported format_version " +
                   std::to_string(format_version_) +
                   " (RocksDB 7.8 writes at most " +
                   std::to_string(kLatestFormatVersion) + ")");
      }
      const auto checksum = static_cast<uint8_t>(tail[0]);
      if (checksum > kMaxChecksumType) {
        return Bad("unknown checksum type " + std::to_string(checksum));
      }
      data_end_ = file_size_ - kFooterSize;
      handles = std::string_view(tail).substr(1, kFooterHandlesSize);
    } else if (magic == kPlainTableMagic || magic == kLegacyPlainTableMagic ||
               magic == kCuckooTableMagic) {
      return Status::NotSupported(
          Prefix() + "a plain or cuckoo table, not a block-based table");
    } else {
      return Bad("bad magic number " + Hex(magic) + ": not an SST file");
    }
    Cursor c(handles);
    if (!DecodeHandle(c, metaindex) || !DecodeHandle(c, index)) {
      return Bad("the footer's block handles are malformed");
    }
    ROCKSDCP_RETURN_IF_ERROR(CheckInFile(*metaindex, "metaindex"));
    return CheckInFile(*index, "index");
  }

  Status CheckInFile(const Handle& h, const std::string& what) const {
    if (h.size > data_end_ || h.offset > data_end_ - h.size ||
        data_end_ - h.size - h.offset < kBlockTrailerSize) {
      return Bad(At(what, h) + " (" + std::to_string(h.size) +
                 " bytes and its trailer) ends past the file's blocks, which "
                 "end at " +
                 std::to_string(data_end_));
    }
    return Status::OK();
  }

  Status Claim(const Handle& h, uint8_t type, std::string_view head,
               const std::string& what, uint64_t* claimed) const {
    return CheckBlockClaim(type, head, h.size, format_version_,
                           limits_.max_block_bytes, name_, At(what, h),
                           claimed);
  }

  Status Spend(uint64_t bytes, const Handle& h, const std::string& what) {
    if (bytes > budget_) {
      return Bad(At(what, h) + " takes " + std::to_string(bytes) +
                 " bytes to parse, past the limit of " +
                 std::to_string(limits_.max_parsed_bytes) +
                 " bytes of index and meta blocks");
    }
    budget_ -= bytes;
    return Status::OK();
  }

  // Reads the block at `h` into `out`, decompressed, within the limits.
  Status ReadParsedBlock(const Handle& h, const std::string& what,
                         std::string* out) {
    ROCKSDCP_RETURN_IF_ERROR(CheckInFile(h, what));
    ROCKSDCP_RETURN_IF_ERROR(Spend(h.size + kBlockTrailerSize, h, what));
    std::string raw;
    ROCKSDCP_RETURN_IF_ERROR(
        Read(h.offset, static_cast<size_t>(h.size + kBlockTrailerSize), &raw));
    const auto type = static_cast<uint8_t>(raw[h.size]);
    raw.resize(h.size);
    uint64_t claimed = 0;
    ROCKSDCP_RETURN_IF_ERROR(
        Claim(h, type, std::string_view(raw).substr(0, 5), what, &claimed));
    if (type == kNoCompression) {
      *out = std::move(raw);
      return Status::OK();
    }
    ROCKSDCP_RETURN_IF_ERROR(Spend(claimed, h, what));
    if (claimed > INT_MAX || raw.size() > INT_MAX) {
      return Bad(At(what, h) + " is too large to parse");
    }
    out->resize(claimed);
    bool ok = false;
    if (type == kSnappyCompression) {
      size_t length = 0;
      ok = snappy::GetUncompressedLength(raw.data(), raw.size(), &length) &&
           length == claimed &&
           snappy::RawUncompress(raw.data(), raw.size(), out->data());
    } else {
      Cursor c(raw);
      uint32_t skip;
      (void)c.Varint32(&skip);  // Claim() decoded it
      if (type == kZSTD || type == kZSTDNotFinalCompression) {
        const size_t n =
            ZSTD_decompress(out->data(), out->size(), c.pos(), c.left());
        ok = !ZSTD_isError(n) && n == claimed;
      } else {  // kLZ4Compression, kLZ4HCCompression
        const int n = LZ4_decompress_safe(c.pos(), out->data(),
                                          static_cast<int>(c.left()),
                                          static_cast<int>(claimed));
        ok = n >= 0 && static_cast<uint64_t>(n) == claimed;
      }
    }
    if (!ok) {
      return Bad(At(what, h) + " does not decompress (compression type " +
                 Hex(type) + ") to the " + std::to_string(claimed) +
                 " bytes it claims");
    }
    return Status::OK();
  }

  // Checks the claim of the block at `h` from its first bytes and trailer,
  // without reading the rest. Reads go through a forward-moving window.
  Status VetUnparsedBlock(const Handle& h, const std::string& what) {
    ROCKSDCP_RETURN_IF_ERROR(CheckInFile(h, what));
    std::string_view head;
    ROCKSDCP_RETURN_IF_ERROR(Window(
        h.offset, static_cast<size_t>(std::min<uint64_t>(h.size, 5)), &head));
    const std::string head_copy(head);
    std::string_view type;
    ROCKSDCP_RETURN_IF_ERROR(Window(h.offset + h.size, 1, &type));
    uint64_t claimed = 0;
    return Claim(h, static_cast<uint8_t>(type[0]), head_copy, what, &claimed);
  }

  Status Window(uint64_t offset, size_t n, std::string_view* out) {
    if (offset < window_offset_ ||
        offset + n > window_offset_ + window_.size()) {
      // CheckInFile() holds: offset + n <= data_end_.
      const size_t want = static_cast<size_t>(
          std::min<uint64_t>(std::max(n, kWindowBytes), data_end_ - offset));
      ROCKSDCP_RETURN_IF_ERROR(Read(offset, want, &window_));
      window_offset_ = offset;
    }
    *out = std::string_view(window_).substr(
        static_cast<size_t>(offset - window_offset_), n);
    return Status::OK();
  }

  // Metaindex entries: meta block name -> handle. Each meta block's claim is
  // checked; the properties block is returned.
  Status VetMetaBlocks(const Handle& h, std::string_view block,
                       Handle* properties, bool* has_properties) {
    return WalkKeyValues(
        h, "metaindex", block,
        [&](const std::string& key, std::string_view value) -> Status {
          Handle meta;
          Cursor c(value);
          if (!DecodeHandle(c, &meta) || c.left() != 0) {
            return Bad(At("metaindex", h) + ": meta block '" + key +
                       "' has a malformed handle");
          }
          const std::string what = "meta block '" + key + "'";
          if (key == "rocksdb.properties" || key == "rocksdb.stats") {
            ROCKSDCP_RETURN_IF_ERROR(CheckInFile(meta, what));
            *properties = meta;
            *has_properties = true;
            return Status::OK();
          }
          return VetUnparsedBlock(meta, what);
        });
  }

  // Calls `visit` with each entry of `block` (the `what` block at `h`), a
  // block of key -> value entries (metaindex, properties), with its whole
  // key; stops at the first error.
  Status WalkKeyValues(const Handle& h, const std::string& what,
                       std::string_view block,
                       const std::function<Status(const std::string&,
                                                  std::string_view)>& visit) {
    BlockWalker walker;
    std::string error = walker.Open(block);
    std::string key;
    while (error.empty() && !walker.AtEnd()) {
      Entry e;
      error = walker.Next(/*has_value_length=*/true, &e);
      if (!error.empty()) break;
      key.resize(e.shared);
      key.append(e.key_delta);
      ROCKSDCP_RETURN_IF_ERROR(visit(key, e.value));
    }
    if (error.empty()) error = walker.Finish();
    if (!error.empty()) return Bad(At(what, h) + " " + error);
    return Status::OK();
  }

  // The properties the index's layout depends on (table_properties.cc,
  // block_based_table_reader.cc).
  Status ReadProperties(const Handle& h, uint32_t* index_type) {
    std::string block;
    ROCKSDCP_RETURN_IF_ERROR(ReadParsedBlock(h, "properties", &block));
    return WalkKeyValues(
        h, "properties", block,
        [&](const std::string& key, std::string_view value) -> Status {
          if (key == "rocksdb.block.based.table.index.type") {
            // RocksDB decodes a fixed32 from the value whatever its length.
            if (value.size() != 4) {
              return Bad(At("properties", h) + ": the index type is " +
                         std::to_string(value.size()) + " bytes, not 4");
            }
            *index_type = DecodeFixed32(value.data());
          } else if (key == "rocksdb.index.value.is.delta.encoded") {
            Cursor c(value);
            uint64_t v = 0;
            if (!c.Varint64(&v) || c.left() != 0) {
              return Bad(At("properties", h) +
                         ": rocksdb.index.value.is.delta.encoded is malformed");
            }
            delta_encoded_ = v != 0;
          } else if (key == "rocksdb.column.family.name" &&
                     layout_ != nullptr) {
            layout_->column_family.assign(value);
          }
          return Status::OK();
        });
  }

  // An index block (index_builder.cc, IndexBlockIter): key -> handle of a
  // data block, or of an index partition if `partitioned`. With delta
  // encoding (rocksdb.index.value.is.delta.encoded) entries have no
  // value_length; an entry whose key shares no bytes holds a full handle,
  // the others a zigzag varint64 size delta, the offset following the
  // previous block and its trailer.
  Status VetIndex(const Handle& h, const std::string& what, bool partitioned) {
    std::string block;
    ROCKSDCP_RETURN_IF_ERROR(ReadParsedBlock(h, what, &block));
    BlockWalker walker;
    std::string error = walker.Open(block);
    Handle prev;
    while (error.empty() && !walker.AtEnd()) {
      Entry e;
      error = walker.Next(/*has_value_length=*/!delta_encoded_, &e);
      if (!error.empty()) break;
      Cursor c(e.value);
      Handle cur;
      bool ok = false;
      if (!delta_encoded_) {
        ok = DecodeHandle(c, &cur) && c.left() == 0;
      } else if (e.shared == 0) {
        ok = DecodeHandle(c, &cur);
      } else {
        uint64_t zigzag = 0;
        ok = c.Varint64(&zigzag);
        const uint64_t magnitude = zigzag >> 1;
        if ((zigzag & 1) != 0) {  // size - prev.size = -(magnitude + 1)
          ok = ok && magnitude < prev.size;
          cur.size = prev.size - magnitude - 1;
        } else {
          ok = ok && magnitude <= UINT64_MAX - prev.size;
          cur.size = prev.size + magnitude;
        }
        // prev passed CheckInFile(): this can't overflow.
        cur.offset = prev.offset + prev.size + kBlockTrailerSize;
      }
      if (!ok) {
        return Bad(At(what, h) + " has a malformed handle (the file's " +
                   "index entry " + std::to_string(entries_) + ")");
      }
      if (delta_encoded_) walker.EndValue(e.value.size() - c.left());
      ++entries_;
      ROCKSDCP_RETURN_IF_ERROR(partitioned ? VetPartition(cur)
                                           : VetDataBlock(cur));
      prev = cur;
    }
    if (error.empty()) error = walker.Finish();
    if (!error.empty()) return Bad(At(what, h) + " " + error);
    return Status::OK();
  }

  // Blocks must come in file order and not overlap, as RocksDB writes them:
  // each is then read once, and a file of n bytes lists at most n / 6.
  Status CheckOrder(const Handle& h, const std::string& what,
                    uint64_t* next) const {
    ROCKSDCP_RETURN_IF_ERROR(CheckInFile(h, what));
    if (h.offset < *next) {
      return Bad(At(what, h) + " overlaps or precedes the block listed " +
                 "before it, which ends at " + std::to_string(*next));
    }
    *next = h.offset + h.size + kBlockTrailerSize;
    return Status::OK();
  }

  Status VetPartition(const Handle& h) {
    ROCKSDCP_RETURN_IF_ERROR(
        CheckOrder(h, "index partition", &next_partition_));
    return VetIndex(h, "index partition", /*partitioned=*/false);
  }

  Status VetDataBlock(const Handle& h) {
    ROCKSDCP_RETURN_IF_ERROR(CheckOrder(h, "data", &next_data_));
    if (layout_ == nullptr) return VetUnparsedBlock(h, "data");
    layout_->data_blocks.push_back({h.offset, h.size});
    return Status::OK();
  }

  rocksdb::FSRandomAccessFile& file_;
  const uint64_t file_size_;
  const SstVetLimits limits_;
  const std::string& name_;
  uint64_t budget_;  // of max_parsed_bytes
  SstLayout* const layout_;
  uint32_t format_version_ = 0;
  uint64_t data_end_ = 0;  // where the footer begins
  bool delta_encoded_ = false;
  uint64_t entries_ = 0;
  uint64_t next_data_ = 0;
  uint64_t next_partition_ = 0;
  std::string window_;
  uint64_t window_offset_ = 0;
};

}  // namespace

Status CheckBlockClaim(uint8_t type, std::string_view head,
                       uint64_t stored_size, uint32_t format_version,
                       uint64_t limit, const std::string& name,
                       const std::string& what, uint64_t* claimed) {
  const std::string prefix = "sst " + name + ": ";
  switch (type) {
    case kNoCompression:
      *claimed = stored_size;
      break;
    case kLZ4Compression:
    case kLZ4HCCompression:
    case kZSTD:
    case kZSTDNotFinalCompression:
      if (format_version < 2) {
        return Status::NotSupported(
            prefix + what + " is compressed (type " + Hex(type) +
            ") by format_version " + std::to_string(format_version) +
            ", which records no decompressed size to check");
      }
      [[fallthrough]];
    case kSnappyCompression: {
      // RocksDB's compressed blocks begin with a varint32 of their
      // decompressed size (snappy's own format does; the others from
      // format_version 2, compress_format_version 2).
      Cursor c(head);
      uint32_t size = 0;
      if (!c.Varint32(&size)) {
        return Status::Corruption(
            prefix + what + " (compression type " + Hex(type) +
            ") does not begin with its decompressed size");
      }
      *claimed = size;
      break;
    }
    case kZlibCompression:
    case kBZip2Compression:
      // Zlib_Uncompress and BZip2_Uncompress grow their output by 20% at a
      // time past the size the block claims (compression.h: only an assert
      // says format 2 never needs it), so no claim bounds them.
      return Status::NotSupported(
          prefix + what + " is compressed with " +
          (type == kZlibCompression ? "zlib" : "bzip2") +
          ", whose decompression in RocksDB is not bounded by the size a "
          "block claims");
    case kXpressCompression:
      return Status::NotSupported(prefix + what + " is compressed with xpress");
    default:
      return Status::Corruption(prefix + what +
                                " has unknown compression type " + Hex(type));
  }
  if (*claimed > limit) {
    return Status::Corruption(
        prefix + what +
        (type == kNoCompression ? " holds " : " claims to decompress to ") +
        std::to_string(*claimed) + " bytes (compression type " + Hex(type) +
        "), more than the limit of " + std::to_string(limit));
  }
  return Status::OK();
}

Status VetSstFile(rocksdb::FSRandomAccessFile& file, uint64_t file_size,
                  const SstVetLimits& limits, const std::string& name) {
  return Vetter(file, file_size, limits, name, nullptr).Run();
}

Status VetSstLayout(rocksdb::FSRandomAccessFile& file, uint64_t file_size,
                    const SstVetLimits& limits, const std::string& name,
                    SstLayout* layout) {
  *layout = SstLayout();
  ROCKSDCP_RETURN_IF_ERROR(Vetter(file, file_size, limits, name, layout).Run());
  return Status::OK();
}

Status VetSstFile(rocksdb::FileSystem& fs, const std::string& path,
                  const SstVetLimits& limits) {
  uint64_t size = 0;
  rocksdb::IOStatus s =
      fs.GetFileSize(path, rocksdb::IOOptions(), &size, nullptr);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  if (s.ok()) {
    s = fs.NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  }
  if (!s.ok()) {
    const std::string msg = "sst " + path + ": " + s.ToString();
    return s.IsNotFound() ? Status::NotFound(msg) : Status::IOError(msg);
  }
  return VetSstFile(*file, size, limits, path);
}

}  // namespace rocksdcp
