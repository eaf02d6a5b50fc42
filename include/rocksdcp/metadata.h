// The DCP data model, field for field: torch/distributed/checkpoint's
// metadata.py and planner.py in C++.
//
// These are plain values. Metadata describes a committed checkpoint; plans
// describe what each rank writes or reads. Fields whose Python type is `Any`
// (planner_data, storage_data) are opaque bytes here: the planner or storage
// that wrote them decides their encoding.
//
// Thread safety: plain values; see status.h.

#ifndef ROCKSDCP_METADATA_H_
#define ROCKSDCP_METADATA_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "rocksdcp/tensor.h"

namespace rocksdcp {

// Names one item of a checkpoint: a byte item (`offset` empty) or one chunk
// of a tensor (`offset` = the chunk's global offsets).
//
// As in DCP, equality and hashing use `fqn` and `offset` only; `index` is a
// lookup hint into a list of chunks and may be stale.
struct MetadataIndex {
  std::string fqn;
  std::optional<std::vector<int64_t>> offset;
  std::optional<int32_t> index;

  MetadataIndex() = default;
  explicit MetadataIndex(std::string fqn_in) : fqn(std::move(fqn_in)) {}
  MetadataIndex(std::string fqn_in, std::vector<int64_t> offset_in,
                std::optional<int32_t> index_in = std::nullopt)
      : fqn(std::move(fqn_in)), offset(std::move(offset_in)), index(index_in) {}

  // "fqn" or "fqn@[o0, o1]": for error messages.
  std::string ToString() const;
};

bool operator==(const MetadataIndex& a, const MetadataIndex& b);
inline bool operator!=(const MetadataIndex& a, const MetadataIndex& b) {
  return !(a == b);
}
// Orders by fqn, then offset (absent first). Ignores `index`.
bool operator<(const MetadataIndex& a, const MetadataIndex& b);

struct MetadataIndexHash {
  size_t operator()(const MetadataIndex& i) const;
};

// A box of a tensor: global `offsets` and `sizes`, one per dimension.
struct ChunkStorageMetadata {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};
bool operator==(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b);

// NOTE: persisted in metadata; never change existing values.
enum class TensorLayout : uint8_t { kStrided = 0 };
enum class MemoryFormat : uint8_t {
  kContiguous = 0,
  kChannelsLast = 1,
  kPreserve = 2,
};

struct TensorProperties {
  DType dtype = DType::kFloat32;
  TensorLayout layout = TensorLayout::kStrided;
  bool requires_grad = false;
  MemoryFormat memory_format = MemoryFormat::kContiguous;
  bool pin_memory = false;
};
bool operator==(const TensorProperties& a, const TensorProperties& b);

struct TensorStorageMetadata {
  TensorProperties properties;
  // The global size of the tensor.
  std::vector<int64_t> size;
  // The saved chunks; together they tile `size` without overlap.
  std::vector<ChunkStorageMetadata> chunks;
};
bool operator==(const TensorStorageMetadata& a, const TensorStorageMetadata& b);

struct BytesStorageMetadata {};
inline bool operator==(const BytesStorageMetadata&,
                       const BytesStorageMetadata&) {
  return true;
}

using StorageMetadata =
    std::variant<TensorStorageMetadata, BytesStorageMetadata>;

// Request-level identity of a save or load (DCP's StorageMeta).
struct StorageMeta {
  std::optional<std::string> checkpoint_id;
  std::optional<std::string> save_id;
  std::optional<std::string> load_id;
  std::vector<std::string> modules;
};
bool operator==(const StorageMeta& a, const StorageMeta& b);

// The version string written into Metadata::version by this release.
inline constexpr const char* kMetadataVersion = "1.0.0";

// Everything needed to load a checkpoint.
struct Metadata {
  // Keyed by fqn.
  std::map<std::string, StorageMetadata> state_dict_metadata;
  // Opaque to storage; owned by the planner.
  std::string planner_data;
  // Where each item lives; opaque to the planner, owned by the storage.
  std::unordered_map<MetadataIndex, std::string, MetadataIndexHash>
      storage_data;
  std::optional<StorageMeta> storage_meta;
  std::string version = kMetadataVersion;
};
bool operator==(const Metadata& a, const Metadata& b);

// NOTE: persisted in plans that cross processes; never change values.
enum class WriteItemType : uint8_t { kTensor = 0, kShard = 1, kByteIO = 2 };

struct TensorWriteData {
  ChunkStorageMetadata chunk;
  TensorProperties properties;
  std::vector<int64_t> size;
};

struct WriteItem {
  MetadataIndex index;
  WriteItemType type = WriteItemType::kByteIO;
  // Set for kTensor and kShard.
  std::optional<TensorWriteData> tensor_data;

  // Bytes of the contiguous projection of a tensor item; 0 for bytes items
  // (their size is known only once resolved).
  uint64_t TensorStorageSize() const;
};

struct SavePlan {
  std::vector<WriteItem> items;
  std::string storage_data;
  std::string planner_data;
  bool usable = true;
};

// What write_data reports for each item it wrote.
struct WriteResult {
  MetadataIndex index;
  uint64_t size_in_bytes = 0;
  // Storage-defined location of the item; lands in Metadata::storage_data.
  std::string storage_data;
};

// NOTE: persisted in plans that cross processes; never change values.
enum class LoadItemType : uint8_t { kTensor = 0, kByteIO = 1 };

// Copy the box [storage_offsets, +lengths) of the saved chunk
// `storage_index` to [dest_offsets, +lengths) of the destination
// `dest_index`. Offsets are relative to each chunk's origin.
struct ReadItem {
  LoadItemType type = LoadItemType::kByteIO;
  MetadataIndex dest_index;
  std::vector<int64_t> dest_offsets;
  MetadataIndex storage_index;
  std::vector<int64_t> storage_offsets;
  std::vector<int64_t> lengths;
};

struct LoadPlan {
  std::vector<ReadItem> items;
  std::string storage_data;
  std::string planner_data;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_METADATA_H_
