#include "rocksdcp/metadata.h"

#include <functional>
#include <string_view>

namespace rocksdcp {

// "fqn@[0, 4]": the offsets printed as error messages print shapes. The
// model is below util/, so it prints them itself.
std::string MetadataIndex::ToString() const {
  if (!offset) return fqn;
  std::string s = fqn + "@[";
  for (size_t i = 0; i < offset->size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string((*offset)[i]);
  }
  return s + "]";
}

bool operator==(const MetadataIndex& a, const MetadataIndex& b) {
  return a.fqn == b.fqn && a.offset == b.offset;
}

bool operator<(const MetadataIndex& a, const MetadataIndex& b) {
  // One comparison of the fqns: sorting a checkpoint's many small items
  // spends most of its time here.
  if (const int c = a.fqn.compare(b.fqn); c != 0) return c < 0;
  return a.offset < b.offset;  // nullopt orders first.
}

size_t MetadataIndexHash::operator()(const MetadataIndex& i) const {
  size_t h = std::hash<std::string_view>()(i.fqn);
  if (i.offset) {
    h ^= 0x9e3779b97f4a7c15ull;
    for (int64_t o : *i.offset) {
      h = h * 1099511628211ull ^ std::hash<int64_t>()(o);
    }
  }
  return h;
}

bool operator==(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b) {
  return a.offsets == b.offsets && a.sizes == b.sizes;
}

bool operator==(const TensorProperties& a, const TensorProperties& b) {
  return a.dtype == b.dtype && a.layout == b.layout &&
         a.requires_grad == b.requires_grad &&
         a.memory_format == b.memory_format && a.pin_memory == b.pin_memory;
}

bool operator==(const TensorStorageMetadata& a,
                const TensorStorageMetadata& b) {
  return a.properties == b.properties && a.size == b.size &&
         a.chunks == b.chunks;
}

bool operator==(const StorageMeta& a, const StorageMeta& b) {
  return a.checkpoint_id == b.checkpoint_id && a.save_id == b.save_id &&
         a.load_id == b.load_id && a.modules == b.modules;
}

bool operator==(const Metadata& a, const Metadata& b) {
  if (a.storage_data.size() != b.storage_data.size()) return false;
  for (const auto& [index, info] : a.storage_data) {
    auto it = b.storage_data.find(index);
    if (it == b.storage_data.end() || it->second != info ||
        it->first.index != index.index) {
      return false;
    }
  }
  return a.state_dict_metadata == b.state_dict_metadata &&
         a.planner_data == b.planner_data && a.storage_meta == b.storage_meta &&
         a.version == b.version;
}

uint64_t WriteItem::TensorStorageSize() const {
  if (!tensor_data) return 0;
  uint64_t n = DTypeSize(tensor_data->properties.dtype);
  for (int64_t s : tensor_data->chunk.sizes) n *= static_cast<uint64_t>(s);
  return n;
}

}  // namespace rocksdcp
