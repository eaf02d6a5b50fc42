#include "format/metadata_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <utility>
#include <variant>
#include <vector>

#include "format/fb_util.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::format {

namespace {

// A Metadata value is one table per chunk plus two per storage_data entry,
// so even a 2 GiB value holds far fewer. The cap bounds the work a crafted
// buffer can cause by pointing many offsets at one shared subtree.
constexpr flatbuffers::uoffset_t kMaxTables = 1u << 27;

// ---- Encoding ----

flatbuffers::Offset<fb::TensorStorageMetadata> CreateTensor(
    flatbuffers::FlatBufferBuilder& fbb, const TensorStorageMetadata& t) {
  std::vector<flatbuffers::Offset<fb::ChunkStorageMetadata>> chunks;
  chunks.reserve(t.chunks.size());
  for (const ChunkStorageMetadata& chunk : t.chunks) {
    chunks.push_back(CreateChunk(fbb, chunk));
  }
  const auto properties = CreateProperties(fbb, t.properties);
  const auto size = fbb.CreateVector(t.size);
  const auto chunk_vector = fbb.CreateVector(chunks);
  return fb::CreateTensorStorageMetadata(fbb, properties, size, chunk_vector);
}

flatbuffers::Offset<fb::StateDictEntry> CreateStateDictEntry(
    flatbuffers::FlatBufferBuilder& fbb,
    flatbuffers::Offset<flatbuffers::String> name,
    const StorageMetadata& value) {
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
    flatbuffers::Offset<flatbuffers::String> fqn, const std::string& info) {
  const auto fb_index = CreateIndex(fbb, index, fqn);
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

// Starts every error message.
constexpr std::string_view kWhat = "metadata";

Status Bad(std::string why) {
  return Status::Corruption(std::string(kWhat) + ": " + std::move(why));
}

Result<TensorStorageMetadata> DecodeTensor(const fb::TensorStorageMetadata& t,
                                           std::string_view fqn) {
  // Built only on failure: metadata can hold millions of chunks.
  auto tensor = [&] { return "tensor " + QuotedFqn(fqn); };
  TensorStorageMetadata out;
  if (t.properties() == nullptr) return Bad(tensor() + " has no properties");
  Result<TensorProperties> properties = DecodeProperties(*t.properties());
  if (!properties.ok()) {
    return Corrupt(kWhat, tensor(), properties.status());
  }
  out.properties = *properties;
  if (t.size() == nullptr) return Bad(tensor() + " has no size");
  out.size = ReadLongs(t.size());
  // Chunks inside the tensor can't be bigger than it, so bounding the whole
  // tensor's bytes bounds every chunk's too.
  if (Status s = CheckTensorSize(out.size, out.properties.dtype); !s.ok()) {
    return Corrupt(kWhat, tensor(), s);
  }
  if (t.chunks() != nullptr) {
    out.chunks.reserve(t.chunks()->size());
    for (const fb::ChunkStorageMetadata* c : *t.chunks()) {
      ChunkStorageMetadata chunk = DecodeChunk(*c);
      if (Status s = CheckChunkWithin(chunk, out.size); !s.ok()) {
        return Corrupt(
            kWhat, tensor() + " chunk " + std::to_string(out.chunks.size()), s);
      }
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
      if (t == nullptr)
        return Bad("tensor " + QuotedFqn(fqn) + " has no value");
      ROCKSDCP_ASSIGN_OR_RETURN(TensorStorageMetadata tensor,
                                DecodeTensor(*t, fqn));
      return StorageMetadata(std::move(tensor));
    }
    case fb::StorageMetadata::BytesStorageMetadata:
      if (e.value() == nullptr)
        return Bad("item " + QuotedFqn(fqn) + " has no value");
      return StorageMetadata(BytesStorageMetadata{});
    default:
      return Bad("item " + QuotedFqn(fqn) +
                 " has unknown storage metadata type " +
                 std::to_string(static_cast<int>(e.value_type())));
  }
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
  return std::string(EncodeMetadata(metadata, &fbb));
}

std::string_view EncodeMetadata(const Metadata& metadata,
                                flatbuffers::FlatBufferBuilder* out) {
  flatbuffers::FlatBufferBuilder& fbb = *out;
  fbb.Clear();

  // std::map iterates in fqn order already; storage_data is unordered, so
  // it is sorted to make the encoding a function of the value alone.
  // An fqn is written once for its state_dict entry and its first
  // storage_data entry, whose index names the entry's string (9% of W3's
  // 17.5 MB metadata).
  std::vector<flatbuffers::Offset<fb::StateDictEntry>> entries;
  // Each fqn with its string, in fqn order.
  using String = flatbuffers::Offset<flatbuffers::String>;
  std::vector<std::pair<std::string_view, String>> names;
  entries.reserve(metadata.state_dict_metadata.size());
  names.reserve(metadata.state_dict_metadata.size());
  for (const auto& [fqn, value] : metadata.state_dict_metadata) {
    names.emplace_back(fqn, fbb.CreateString(fqn));
    entries.push_back(CreateStateDictEntry(fbb, names.back().second, value));
  }
  const auto state_dict = fbb.CreateVector(entries);

  std::vector<const std::pair<const MetadataIndex, std::string>*> sorted;
  sorted.reserve(metadata.storage_data.size());
  for (const auto& entry : metadata.storage_data) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  // Both in fqn order: one walk pairs each index with its fqn's string.
  // Only an fqn's first index shares it: every decoded index holds a copy
  // of its fqn, and a reader refuses a value that would decode to over 8
  // times its size (CountMetadata, against forged values), which a long
  // name shared by thousands of chunks' indices would.
  std::vector<flatbuffers::Offset<fb::StorageDataEntry>> storage;
  storage.reserve(sorted.size());
  size_t n = 0;
  bool shared = false;  // Whether names[n] has been shared already.
  for (const auto* entry : sorted) {
    const std::string& fqn = entry->first.fqn;
    while (n < names.size() && names[n].first < fqn) {
      ++n;
      shared = false;
    }
    const bool share = !shared && n < names.size() && names[n].first == fqn;
    shared |= share;
    storage.push_back(CreateStorageDataEntry(
        fbb, entry->first, share ? names[n].second : fbb.CreateString(fqn),
        entry->second));
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
  return std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                          fbb.GetSize());
}

namespace {

// Generous per-object costs of a FlatBuffer: a table (its vtable, which
// may be shared, fields and padding), and the length, terminator and
// padding of a vector or string.
constexpr uint64_t kTableBound = 128;
constexpr uint64_t kVectorBound = 16;

uint64_t BytesBound(uint64_t n) { return n + kVectorBound; }
uint64_t LongsBound(size_t n) { return 8 * uint64_t{n} + kVectorBound; }

}  // namespace

uint64_t MetadataBytesBound(const Metadata& metadata) {
  uint64_t bound = kTableBound + BytesBound(metadata.version.size()) +
                   BytesBound(metadata.planner_data.size()) + 64;
  bound += BytesBound(4 * metadata.state_dict_metadata.size());
  for (const auto& [fqn, value] : metadata.state_dict_metadata) {
    bound += kTableBound + BytesBound(fqn.size()) + kTableBound;
    if (const auto* t = std::get_if<TensorStorageMetadata>(&value)) {
      bound += kTableBound + LongsBound(t->size.size()) +
               BytesBound(4 * t->chunks.size());
      for (const ChunkStorageMetadata& c : t->chunks) {
        bound += kTableBound + LongsBound(c.offsets.size()) +
                 LongsBound(c.sizes.size());
      }
    }
  }
  bound += BytesBound(4 * metadata.storage_data.size());
  for (const auto& [index, value] : metadata.storage_data) {
    bound += 2 * kTableBound + BytesBound(index.fqn.size()) +
             LongsBound(index.offset ? index.offset->size() : 0) +
             BytesBound(value.size());
  }
  if (metadata.storage_meta) {
    const StorageMeta& sm = *metadata.storage_meta;
    bound += kTableBound + BytesBound(4 * sm.modules.size());
    for (const auto* s : {&sm.checkpoint_id, &sm.save_id, &sm.load_id}) {
      if (*s) bound += BytesBound(s->value().size());
    }
    for (const std::string& m : sm.modules) bound += BytesBound(m.size());
  }
  return bound;
}

Status CheckMetadataFits(const Metadata& metadata, uint64_t limit,
                         uint64_t* bound_out) {
  const uint64_t bound = MetadataBytesBound(metadata);
  if (bound_out != nullptr) *bound_out = bound;
  if (bound <= limit) return Status::OK();
  return Status::InvalidArgument(
      "the checkpoint's metadata (" +
      std::to_string(metadata.state_dict_metadata.size()) + " items, " +
      std::to_string(metadata.storage_data.size()) +
      " stored chunks) could take up to " + std::to_string(bound) +
      " bytes, over the limit of " + std::to_string(limit) +
      " (one FlatBuffer holds under 2 GiB): save the state dict as "
      "several checkpoints, or with fewer, larger items");
}

namespace {

// Generous heap costs of the decoded Metadata, per object: a state_dict
// entry (map node, strings, variant) with its tensor, a chunk, and a
// storage_data entry (hash node, index, info string).
constexpr uint64_t kDecodedEntryBytes = 256;
constexpr uint64_t kDecodedChunkBytes = 128;
constexpr uint64_t kDecodedStorageBytes = 256;
// A value decodes to at most this many times its size, plus the slack,
// unless its tables are shared (measured with mallinfo2: 2.1 times for
// 50,000 2-d tensors, 2.3 for 0-d ones with short names, 3.0 for byte
// items with short names, the densest real kind).
constexpr uint64_t kDecodedPerValueByte = 8;
constexpr uint64_t kDecodedSlackBytes = 1 << 20;
// Tables per listed chunk or byte item: a chunk, a state_dict entry with
// its tensor and properties, and a storage_data entry with its index.
constexpr uint64_t kTablesPerItem = 8;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

// The length of a verified (aligned) vector or string; absent is empty.
template <typename T>
uint64_t Len(const T* v) {
  return v == nullptr ? 0 : v->size();
}

// What decoding a verified Metadata would build, counted by walking it.
struct MetadataCounts {
  uint64_t items = 0;  // Chunks and byte items.
  uint64_t storage_entries = 0;
  uint64_t stored_bytes_needed = 0;  // Their pieces' least stored size.
  uint64_t decoded_bytes = 0;
};

MetadataCounts CountMetadata(const fb::Metadata& m) {
  MetadataCounts n;
  uint64_t decoded = Len(m.version()) + Len(m.planner_data());
  uint64_t needed = 0;
  if (m.state_dict_metadata() != nullptr) {
    for (const fb::StateDictEntry* e : *m.state_dict_metadata()) {
      decoded = SaturatingAdd(decoded, kDecodedEntryBytes + Len(e->fqn()));
      const fb::TensorStorageMetadata* t = e->value_as_TensorStorageMetadata();
      if (t == nullptr) {  // A byte item.
        ++n.items;
        needed = SaturatingAdd(needed, kMinStoredPieceBytes);
        continue;
      }
      decoded = SaturatingAdd(decoded, 8 * Len(t->size()));
      if (t->chunks() == nullptr) continue;
      for (const fb::ChunkStorageMetadata* c : *t->chunks()) {
        const uint64_t longs = uint64_t{Len(c->offsets())} + Len(c->sizes());
        ++n.items;
        needed = SaturatingAdd(
            needed, kMinStoredPieceBytes + kStoredBytesPerChunkDim / 2 * longs);
        decoded = SaturatingAdd(decoded, kDecodedChunkBytes + 8 * longs);
      }
    }
  }
  if (m.storage_data() != nullptr) {
    for (const fb::StorageDataEntry* e : *m.storage_data()) {
      ++n.storage_entries;
      const fb::MetadataIndex* index = e->index();
      decoded =
          SaturatingAdd(decoded, kDecodedStorageBytes + Len(index->fqn()) +
                                     8 * Len(index->offset()) + Len(e->info()));
    }
  }
  if (const fb::StorageMeta* sm = m.storage_meta(); sm != nullptr) {
    decoded +=
        Len(sm->checkpoint_id()) + Len(sm->save_id()) + Len(sm->load_id());
    if (sm->modules() != nullptr) {
      for (const flatbuffers::String* s : *sm->modules()) {
        decoded = SaturatingAdd(decoded, 32 + Len(s));
      }
    }
  }
  n.stored_bytes_needed =
      std::max(needed, SaturatingMul(n.storage_entries, kMinStoredPieceBytes));
  n.decoded_bytes = decoded;
  return n;
}

// `aligned`'s root, verified with as many tables at most as `limits`'
// stored bytes can back.
Result<const fb::Metadata*> VerifiedMetadata(const AlignedBytes& aligned,
                                             const MetadataLimits& limits) {
  // The Verifier visits a shared table once per reference: bounding the
  // tables by the items the store can hold bounds its work too.
  flatbuffers::uoffset_t max_tables = kMaxTables;
  if (limits.stored_bytes != UINT64_MAX) {
    const uint64_t items = limits.stored_bytes / kMinStoredPieceBytes;
    max_tables = static_cast<flatbuffers::uoffset_t>(std::min<uint64_t>(
        kMaxTables, SaturatingAdd(SaturatingMul(items, kTablesPerItem), 64)));
  }
  Result<const fb::Metadata*> root = VerifiedRoot<fb::Metadata>(
      aligned, kMetadataIdentifier, kWhat, max_tables);
  if (!root.ok()) {
    // A wrong identifier or a value past 2 GiB says so; the Verifier does
    // not say which of its checks failed.
    const bool verifier_failed =
        root.status().message().find("FlatBuffers verification failed") !=
        std::string::npos;
    if (verifier_failed && max_tables < kMaxTables) {
      return Bad("it does not verify as a FlatBuffer of at most " +
                 std::to_string(max_tables) + " tables, as many as the " +
                 std::to_string(limits.stored_bytes) +
                 " bytes the checkpoint holds can back: it is damaged or "
                 "forged");
    }
    return root.status();
  }
  return root;
}

// What `m`, a value of `value_size` bytes, lists fits the bytes the
// checkpoint holds, and decodes to not much more than the value.
Status CheckCounts(const fb::Metadata& m, size_t value_size,
                   const MetadataLimits& limits) {
  const MetadataCounts counts = CountMetadata(m);
  if (counts.stored_bytes_needed > limits.stored_bytes) {
    return Bad("it lists " + std::to_string(counts.items) +
               " chunks and byte items and " +
               std::to_string(counts.storage_entries) +
               " storage entries, whose pieces would take at least " +
               std::to_string(counts.stored_bytes_needed) +
               " bytes, but the checkpoint holds only " +
               std::to_string(limits.stored_bytes) +
               " bytes: it is forged or damaged");
  }
  const uint64_t decoded_limit = SaturatingAdd(
      SaturatingMul(value_size, kDecodedPerValueByte), kDecodedSlackBytes);
  if (counts.decoded_bytes > decoded_limit) {
    return Bad("its " + std::to_string(value_size) +
               " bytes would decode to about " +
               std::to_string(counts.decoded_bytes) +
               " bytes: its tables are shared, which no rocksdcp writer does; "
               "it is forged or damaged");
  }
  return Status::OK();
}

// m's state_dict entries into out->state_dict_metadata, each fqn once.
Status DecodeStateDict(const fb::Metadata& m, Metadata* out) {
  if (m.state_dict_metadata() == nullptr) return Status::OK();
  for (const fb::StateDictEntry* e : *m.state_dict_metadata()) {
    std::string fqn = e->fqn()->str();  // Required, so verified present.
    ROCKSDCP_ASSIGN_OR_RETURN(StorageMetadata item,
                              DecodeStateDictValue(*e, fqn));
    // Writers list entries in fqn order: at the end, each goes in
    // without a search. try_emplace leaves `fqn` alone when the key
    // exists.
    const size_t before = out->state_dict_metadata.size();
    out->state_dict_metadata.try_emplace(out->state_dict_metadata.end(),
                                         std::move(fqn), std::move(item));
    if (out->state_dict_metadata.size() == before) {
      return Bad("duplicate state_dict entry " + QuotedFqn(fqn));
    }
  }
  return Status::OK();
}

// m's storage_data entries into out->storage_data, each index once.
Status DecodeStorageData(const fb::Metadata& m, Metadata* out) {
  if (m.storage_data() == nullptr) return Status::OK();
  out->storage_data.reserve(m.storage_data()->size());
  for (const fb::StorageDataEntry* e : *m.storage_data()) {
    Result<MetadataIndex> decoded = DecodeIndex(*e->index());
    if (!decoded.ok()) {
      return Corrupt(kWhat, "storage_data index", decoded.status());
    }
    MetadataIndex index = std::move(decoded).value();
    // try_emplace leaves `index` alone when the key exists.
    if (!out->storage_data.try_emplace(std::move(index), ReadBytes(e->info()))
             .second) {
      return Bad("duplicate storage_data index " + QuotedIndex(index));
    }
  }
  return Status::OK();
}

}  // namespace

Result<Metadata> DecodeMetadata(std::string_view value,
                                const MetadataLimits& limits) {
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(const fb::Metadata* root,
                            VerifiedMetadata(aligned, limits));
  const fb::Metadata& m = *root;
  ROCKSDCP_RETURN_IF_ERROR(CheckCounts(m, value.size(), limits));

  Metadata out;
  out.version = m.version() ? m.version()->str() : std::string();
  out.planner_data = ReadBytes(m.planner_data());
  ROCKSDCP_RETURN_IF_ERROR(DecodeStateDict(m, &out));
  ROCKSDCP_RETURN_IF_ERROR(DecodeStorageData(m, &out));
  if (m.storage_meta() != nullptr) {
    out.storage_meta = DecodeStorageMeta(*m.storage_meta());
  }
  return out;
}

}  // namespace rocksdcp::format
