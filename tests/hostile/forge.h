// Forging a store's values by hand: plain structs that mirror
// schema/checkpoint.fbs field for field, read from a real value with the
// generated FlatBuffers accessors and written back with the generated
// builders, never with rocksdcp's own encoders. So a case can write what no
// rocksdcp would: absent fields, enum values no build knows, sizes that
// contradict each other, one table referenced from a vector many times.
//
// And RawStore: a store's RocksDB opened directly, to put those values
// where rocksdcp would never put them.

#ifndef ROCKSDCP_TESTS_HOSTILE_FORGE_H_
#define ROCKSDCP_TESTS_HOSTILE_FORGE_H_

#include <rocksdb/db.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdcp::hostile {

using Longs = std::optional<std::vector<int64_t>>;

// fb::StorageMetadata, the union's type tag, as it reaches disk.
inline constexpr uint8_t kUnionNone = 0;
inline constexpr uint8_t kUnionTensor = 1;
inline constexpr uint8_t kUnionBytes = 2;

struct FChunk {
  Longs offsets;
  Longs sizes;
};

struct FTensor {
  bool has_properties = true;
  uint8_t dtype = 0;
  uint8_t layout = 0;
  bool requires_grad = false;
  uint8_t memory_format = 0;
  bool pin_memory = false;
  Longs size;
  std::optional<std::vector<FChunk>> chunks;
  // When set, `chunks` is written as one table (chunks->front()) that the
  // chunk vector references this many times.
  uint32_t repeat_first_chunk = 0;
  // When set, `chunks` is written as this many chunks of a 0-d tensor,
  // laid out so that the value is one 4-byte word repeated: every element
  // points 256 KiB further on, where the same word reads as a table with
  // no fields and, 256 KiB back, as its vtable. A compressed block holds
  // millions of them in a few KiB.
  uint32_t periodic_zero_d_chunks = 0;
};

struct FEntry {
  std::string fqn;
  // The union's type tag, and the table its value points to (which a
  // forgery may make disagree).
  uint8_t value_type = kUnionTensor;
  enum class Table { kNone, kTensor, kBytes } table = Table::kTensor;
  FTensor tensor;
};

struct FIndex {
  std::string fqn;
  Longs offset;
  std::optional<int32_t> index;
};

struct FStorage {
  FIndex index;
  std::optional<std::string> info;
};

struct FStorageMeta {
  std::optional<std::string> checkpoint_id, save_id, load_id;
  std::optional<std::vector<std::string>> modules;
};

struct FMetadata {
  std::optional<std::string> version;
  std::optional<std::vector<FEntry>> state_dict;
  std::optional<std::string> planner_data;
  std::optional<std::vector<FStorage>> storage;
  std::optional<FStorageMeta> storage_meta;
  // When set, state_dict is written as one table (state_dict->front())
  // that the vector references this many times.
  uint32_t repeat_first_entry = 0;

  // The entry named `fqn`; nullptr if none.
  FEntry* Entry(std::string_view fqn);
  // The storage entry of `fqn` at `offset` (nullopt: a byte item); nullptr
  // if none.
  FStorage* Storage(std::string_view fqn, const Longs& offset);
};

// fb::StorageInfo.
struct FInfo {
  uint16_t format_version = 1;
  uint8_t kind = 0;
  uint64_t length = 0;
  uint32_t num_pieces = 0;
  uint64_t piece_bytes = 0;
  std::optional<std::string> file;
  bool compressed = false;
};

// fb::CatalogEntry.
struct FCatalog {
  uint16_t format_version = 1;
  std::optional<std::string> checkpoint_id;
  std::optional<std::string> column_family;
  uint8_t state = 1;
  int64_t created_unix_micros = 0;
  uint64_t total_bytes = 0;
  uint64_t num_items = 0;
  int32_t world_size = 0;
  uint64_t metadata_xxh3 = 0;
  std::vector<std::string> referenced_column_families;
  uint64_t referenced_bytes = 0;
};

// fb::ChunkPiece.
struct FPiece {
  uint16_t format_version = 1;
  uint8_t kind = 0;
  uint8_t dtype = 0;
  Longs chunk_offsets;
  Longs chunk_sizes;
  uint32_t piece = 0;
  uint32_t num_pieces = 0;
  uint64_t byte_offset = 0;
  uint64_t byte_length = 0;
  uint64_t xxh3 = 0;
  std::optional<std::string> data;
  // Compressed pieces (format_version 3).
  uint8_t codec = 0;
  std::optional<std::vector<uint32_t>> plane_bytes;
  uint64_t payload_xxh3 = 0;

  // Sets xxh3 as a careful forger would: the XXH3-64 of data, seeded (from
  // format_version 2 on) with the XXH3-64 of the key it is stored under.
  void Rehash(std::string_view key);
};

// Each Parse reads a value rocksdcp wrote (the test fails if it does not
// verify); each Encode writes the struct with its identifier.
FMetadata ParseMetadata(std::string_view value);
std::string Encode(const FMetadata& m);
FInfo ParseInfo(std::string_view value);
std::string Encode(const FInfo& info);
FCatalog ParseCatalog(std::string_view value);
std::string Encode(const FCatalog& c);
FPiece ParsePiece(std::string_view value);
std::string Encode(const FPiece& p);

// `value` with its file identifier (bytes 4..7) replaced by `id`.
std::string WithIdentifier(std::string value, std::string_view id);

uint64_t Xxh3(std::string_view bytes);

// A store's RocksDB opened read-write directly, every column family with
// it. Writes skip the WAL; the destructor flushes every column family into
// SST files and closes, so the store on disk is as small as its data.
class RawStore {
 public:
  // With `compress`, what is flushed is compressed (ZSTD, else LZ4, else
  // zlib: the first this RocksDB supports), as any RocksDB may write it.
  explicit RawStore(const std::string& path, bool compress = false);
  ~RawStore();
  RawStore(const RawStore&) = delete;
  RawStore& operator=(const RawStore&) = delete;

  std::optional<std::string> Get(const std::string& cf, std::string_view key);
  void Put(const std::string& cf, std::string_view key, std::string_view value);
  void Delete(const std::string& cf, std::string_view key);
  // Every key of `cf`, in order.
  std::vector<std::string> Keys(const std::string& cf);
  bool HasColumnFamily(const std::string& name) const;
  // The names of its column families, "default" among them.
  std::vector<std::string> ColumnFamilies() const;
  void CreateColumnFamily(const std::string& name);
  void DropColumnFamily(const std::string& name);

 private:
  rocksdb::ColumnFamilyHandle* Cf(const std::string& name) const;

  rocksdb::ColumnFamilyOptions cf_options_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace rocksdcp::hostile

#endif  // ROCKSDCP_TESTS_HOSTILE_FORGE_H_
