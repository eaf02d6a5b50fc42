#include "format/metadata_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "keys/keys.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::format {

namespace {

using LongVector = flatbuffers::Vector<int64_t>;

// A Metadata value is one table per chunk plus two per storage_data entry,
// so even a 2 GiB value holds far fewer. The cap bounds the work a crafted
// buffer can cause by pointing many offsets at one shared subtree.
constexpr flatbuffers::uoffset_t kMaxTables = 1u << 27;

// ---- Encoding ----

flatbuffers::Offset<flatbuffers::Vector<uint8_t>> CreateBytes(
    flatbuffers::FlatBufferBuilder& fbb, const std::string& bytes) {
  return fbb.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()),
                          bytes.size());
}

flatbuffers::Offset<fb::TensorStorageMetadata> CreateTensor(
    flatbuffers::FlatBufferBuilder& fbb, const TensorStorageMetadata& t) {
  std::vector<flatbuffers::Offset<fb::ChunkStorageMetadata>> chunks;
  chunks.reserve(t.chunks.size());
  for (const ChunkStorageMetadata& chunk : t.chunks) {
    const auto offsets = fbb.CreateVector(chunk.offsets);
    const auto sizes = fbb.CreateVector(chunk.sizes);
    chunks.push_back(fb::CreateChunkStorageMetadata(fbb, offsets, sizes));
  }
  const TensorProperties& p = t.properties;
  const auto properties = fb::CreateTensorProperties(
      fbb, static_cast<fb::DType>(p.dtype), static_cast<uint8_t>(p.layout),
      p.requires_grad, static_cast<uint8_t>(p.memory_format), p.pin_memory);
  const auto size = fbb.CreateVector(t.size);
  const auto chunk_vector = fbb.CreateVector(chunks);
  return fb::CreateTensorStorageMetadata(fbb, properties, size, chunk_vector);
}

flatbuffers::Offset<fb::StateDictEntry> CreateStateDictEntry(
    flatbuffers::FlatBufferBuilder& fbb, const std::string& fqn,
    const StorageMetadata& value) {
  const auto name = fbb.CreateString(fqn);
  if (const auto* tensor = std::get_if<TensorStorageMetadata>(&value)) {
    const auto t = CreateTensor(fbb, *tensor);
    return fb::CreateStateDictEntry(
        fbb, name, fb::StorageMetadata::TensorStorageMetadata, t.Union());
  }
  const auto b = fb::CreateBytesStorageMetadata(fbb);
  return fb::CreateStateDictEntry(
      fbb, name, fb::StorageMetadata::BytesStorageMetadata, b.Union());
}

flatbuffers::Offset<fb::StorageDataEntry> CreateStorageDataEntry(
    flatbuffers::FlatBufferBuilder& fbb, const MetadataIndex& index,
    const std::string& info) {
  const auto fqn = fbb.CreateString(index.fqn);
  flatbuffers::Offset<LongVector> offset;  // Null: absent, a byte item.
  if (index.offset) offset = fbb.CreateVector(*index.offset);
  flatbuffers::Optional<int32_t> hint = flatbuffers::nullopt;
  if (index.index) hint = *index.index;
  const auto fb_index = fb::CreateMetadataIndex(fbb, fqn, offset, hint);
  return fb::CreateStorageDataEntry(fbb, fb_index, CreateBytes(fbb, info));
}

flatbuffers::Offset<fb::StorageMeta> CreateStorageMeta(
    flatbuffers::FlatBufferBuilder& fbb, const StorageMeta& meta) {
  auto optional_string = [&fbb](const std::optional<std::string>& s) {
    return s ? fbb.CreateString(*s)
             : flatbuffers::Offset<flatbuffers::String>();
  };
  const auto checkpoint_id = optional_string(meta.checkpoint_id);
  const auto save_id = optional_string(meta.save_id);
  const auto load_id = optional_string(meta.load_id);
  const auto modules = fbb.CreateVectorOfStrings(meta.modules);
  return fb::CreateStorageMeta(fbb, checkpoint_id, save_id, load_id, modules);
}

// ---- Decoding ----

Status Bad(std::string why) {
  return Status::Corruption("metadata: " + std::move(why));
}

// An fqn as error messages show it: escaped as in keys, so a damaged value
// can't put control bytes into a log, and quoted.
std::string Name(std::string_view fqn) {
  return "\"" + keys::EscapeFqn(fqn) + "\"";
}

std::string Name(const MetadataIndex& index) {
  std::string s = Name(index.fqn);
  if (index.offset) {
    s += " at [";
    for (size_t i = 0; i < index.offset->size(); ++i) {
      if (i > 0) s += ", ";
      s += std::to_string((*index.offset)[i]);
    }
    s += "]";
  }
  return s;
}

// Copies a [long] out with memcpy, as the value need not be 8-byte aligned
// in memory. Absent reads as empty.
std::vector<int64_t> ReadLongs(const LongVector* v) {
  if (v == nullptr || v->size() == 0) return {};
  std::vector<int64_t> out(v->size());
  std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
  for (int64_t& x : out) x = flatbuffers::EndianScalar(x);
  return out;
}

std::string ReadBytes(const flatbuffers::Vector<uint8_t>* v) {
  if (v == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(v->data()), v->size());
}

Result<TensorProperties> DecodeProperties(const fb::TensorProperties* p,
                                          std::string_view fqn) {
  if (p == nullptr) return Bad("tensor " + Name(fqn) + " has no properties");
  TensorProperties out;
  const auto dtype = static_cast<uint8_t>(p->dtype());
  if (!IsValidDType(dtype)) {
    return Bad("tensor " + Name(fqn) + " has unknown dtype " +
               std::to_string(dtype));
  }
  out.dtype = static_cast<DType>(dtype);
  if (p->layout() != static_cast<uint8_t>(TensorLayout::kStrided)) {
    return Bad("tensor " + Name(fqn) + " has unknown layout " +
               std::to_string(p->layout()));
  }
  out.layout = TensorLayout::kStrided;
  if (p->memory_format() > static_cast<uint8_t>(MemoryFormat::kPreserve)) {
    return Bad("tensor " + Name(fqn) + " has unknown memory_format " +
               std::to_string(p->memory_format()));
  }
  out.memory_format = static_cast<MemoryFormat>(p->memory_format());
  out.requires_grad = p->requires_grad();
  out.pin_memory = p->pin_memory();
  return out;
}

// Every chunk must lie inside the tensor: a loader sizes its copies from
// these numbers, so an out-of-range chunk would become an out-of-bounds
// write.
Status CheckChunk(const ChunkStorageMetadata& chunk,
                  const std::vector<int64_t>& size, size_t i,
                  std::string_view fqn) {
  // Built only on failure: metadata can hold millions of chunks.
  auto what = [&] {
    return "tensor " + Name(fqn) + " chunk " + std::to_string(i);
  };
  if (chunk.offsets.size() != size.size() ||
      chunk.sizes.size() != size.size()) {
    return Bad(what() + " has offsets of rank " +
               std::to_string(chunk.offsets.size()) + " and sizes of rank " +
               std::to_string(chunk.sizes.size()) + ", the tensor has rank " +
               std::to_string(size.size()));
  }
  for (size_t d = 0; d < size.size(); ++d) {
    const int64_t offset = chunk.offsets[d];
    const int64_t length = chunk.sizes[d];
    if (offset < 0 || length < 0) {
      return Bad(what() + " has a negative offset or size in dimension " +
                 std::to_string(d));
    }
    // Both are non-negative and at most size[d], so nothing here overflows.
    if (length > size[d] || offset > size[d] - length) {
      return Bad(what() + " exceeds the tensor in dimension " +
                 std::to_string(d) + ": offset " + std::to_string(offset) +
                 " + size " + std::to_string(length) + " > " +
                 std::to_string(size[d]));
    }
  }
  return Status::OK();
}

Result<TensorStorageMetadata> DecodeTensor(const fb::TensorStorageMetadata& t,
                                           std::string_view fqn) {
  TensorStorageMetadata out;
  ROCKSDCP_ASSIGN_OR_RETURN(out.properties,
                            DecodeProperties(t.properties(), fqn));
  if (t.size() == nullptr) return Bad("tensor " + Name(fqn) + " has no size");
  out.size = ReadLongs(t.size());
  // Chunks inside the tensor can't be bigger than it, so bounding the whole
  // tensor's bytes bounds every chunk's too.
  uint64_t bytes = DTypeSize(out.properties.dtype);
  for (int64_t s : out.size) {
    if (s < 0) return Bad("tensor " + Name(fqn) + " has a negative size");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(s), &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      return Bad("tensor " + Name(fqn) + " is larger than 2^63 bytes");
    }
  }
  if (t.chunks() != nullptr) {
    out.chunks.reserve(t.chunks()->size());
    for (const fb::ChunkStorageMetadata* c : *t.chunks()) {
      ChunkStorageMetadata chunk;
      chunk.offsets = ReadLongs(c->offsets());
      chunk.sizes = ReadLongs(c->sizes());
      ROCKSDCP_RETURN_IF_ERROR(
          CheckChunk(chunk, out.size, out.chunks.size(), fqn));
      out.chunks.push_back(std::move(chunk));
    }
  }
  return out;
}

Result<StorageMetadata> DecodeStateDictValue(const fb::StateDictEntry& e,
                                             std::string_view fqn) {
  switch (e.value_type()) {
    case fb::StorageMetadata::TensorStorageMetadata: {
      const fb::TensorStorageMetadata* t = e.value_as_TensorStorageMetadata();
      if (t == nullptr) return Bad("tensor " + Name(fqn) + " has no value");
      ROCKSDCP_ASSIGN_OR_RETURN(TensorStorageMetadata tensor,
                                DecodeTensor(*t, fqn));
      return StorageMetadata(std::move(tensor));
    }
    case fb::StorageMetadata::BytesStorageMetadata:
      if (e.value() == nullptr)
        return Bad("item " + Name(fqn) + " has no value");
      return StorageMetadata(BytesStorageMetadata{});
    default:
      return Bad("item " + Name(fqn) + " has unknown storage metadata type " +
                 std::to_string(static_cast<int>(e.value_type())));
  }
}

Result<MetadataIndex> DecodeIndex(const fb::MetadataIndex& i) {
  MetadataIndex out;
  out.fqn = i.fqn()->str();  // Required: the Verifier checked it is there.
  if (i.offset() != nullptr) {
    out.offset = ReadLongs(i.offset());
    for (int64_t o : *out.offset) {
      if (o < 0) {
        return Bad("storage_data index " + Name(out) +
                   " has a negative offset");
      }
    }
  }
  if (const auto hint = i.index(); hint.has_value()) out.index = *hint;
  return out;
}

StorageMeta DecodeStorageMeta(const fb::StorageMeta& m) {
  auto optional_string = [](const flatbuffers::String* s) {
    return s ? std::optional<std::string>(s->str()) : std::nullopt;
  };
  StorageMeta out;
  out.checkpoint_id = optional_string(m.checkpoint_id());
  out.save_id = optional_string(m.save_id());
  out.load_id = optional_string(m.load_id());
  if (m.modules() != nullptr) {
    out.modules.reserve(m.modules()->size());
    for (const flatbuffers::String* s : *m.modules()) {
      out.modules.push_back(s->str());
    }
  }
  return out;
}

}  // namespace

std::string EncodeMetadata(const Metadata& metadata) {
  flatbuffers::FlatBufferBuilder fbb;

  // std::map iterates in fqn order already; storage_data is unordered, so
  // it is sorted to make the encoding a function of the value alone.
  std::vector<flatbuffers::Offset<fb::StateDictEntry>> entries;
  entries.reserve(metadata.state_dict_metadata.size());
  for (const auto& [fqn, value] : metadata.state_dict_metadata) {
    entries.push_back(CreateStateDictEntry(fbb, fqn, value));
  }
  const auto state_dict = fbb.CreateVector(entries);

  std::vector<const std::pair<const MetadataIndex, std::string>*> sorted;
  sorted.reserve(metadata.storage_data.size());
  for (const auto& entry : metadata.storage_data) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  std::vector<flatbuffers::Offset<fb::StorageDataEntry>> storage;
  storage.reserve(sorted.size());
  for (const auto* entry : sorted) {
    storage.push_back(CreateStorageDataEntry(fbb, entry->first, entry->second));
  }
  const auto storage_data = fbb.CreateVector(storage);

  flatbuffers::Offset<fb::StorageMeta> storage_meta;
  if (metadata.storage_meta) {
    storage_meta = CreateStorageMeta(fbb, *metadata.storage_meta);
  }
  const auto version = fbb.CreateString(metadata.version);
  const auto planner_data = CreateBytes(fbb, metadata.planner_data);

  fbb.Finish(fb::CreateMetadata(fbb, version, state_dict, planner_data,
                                storage_data, storage_meta),
             kMetadataIdentifier);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

Result<Metadata> DecodeMetadata(std::string_view value) {
  // The Verifier asserts on larger buffers instead of failing.
  if (value.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Bad("value of " + std::to_string(value.size()) +
               " bytes exceeds the FlatBuffers limit of 2 GiB");
  }
  const auto* buf = reinterpret_cast<const uint8_t*>(value.data());
  if (value.size() < 2 * sizeof(flatbuffers::uoffset_t) ||
      !flatbuffers::BufferHasIdentifier(buf, kMetadataIdentifier)) {
    return Bad("wrong file identifier (expected \"" +
               std::string(kMetadataIdentifier) + "\")");
  }
  flatbuffers::Verifier::Options options;
  options.max_tables = kMaxTables;
  flatbuffers::Verifier verifier(buf, value.size(), options);
  if (!verifier.VerifyBuffer<fb::Metadata>(kMetadataIdentifier)) {
    return Bad("FlatBuffers verification failed");
  }
  const fb::Metadata& m = *flatbuffers::GetRoot<fb::Metadata>(buf);

  Metadata out;
  out.version = m.version() ? m.version()->str() : std::string();
  out.planner_data = ReadBytes(m.planner_data());

  if (m.state_dict_metadata() != nullptr) {
    for (const fb::StateDictEntry* e : *m.state_dict_metadata()) {
      std::string fqn = e->fqn()->str();  // Required, so verified present.
      ROCKSDCP_ASSIGN_OR_RETURN(StorageMetadata item,
                                DecodeStateDictValue(*e, fqn));
      // try_emplace leaves `fqn` alone when the key exists.
      if (!out.state_dict_metadata.try_emplace(std::move(fqn), std::move(item))
               .second) {
        return Bad("duplicate state_dict entry " + Name(fqn));
      }
    }
  }

  if (m.storage_data() != nullptr) {
    out.storage_data.reserve(m.storage_data()->size());
    for (const fb::StorageDataEntry* e : *m.storage_data()) {
      ROCKSDCP_ASSIGN_OR_RETURN(MetadataIndex index, DecodeIndex(*e->index()));
      // try_emplace leaves `index` alone when the key exists.
      if (!out.storage_data.try_emplace(std::move(index), ReadBytes(e->info()))
               .second) {
        return Bad("duplicate storage_data index " + Name(index));
      }
    }
  }

  if (m.storage_meta() != nullptr) {
    out.storage_meta = DecodeStorageMeta(*m.storage_meta());
  }
  return out;
}

}  // namespace rocksdcp::format
