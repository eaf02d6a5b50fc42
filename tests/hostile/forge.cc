#include "hostile/forge.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>
#include <rocksdb/convenience.h>

#include <algorithm>
#include <cstring>

#include "format/checksum.h"
#include "rocksdb/store_impl.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::hostile {

namespace fbs = ::flatbuffers;
namespace fb = ::rocksdcp::fb;

namespace {

// ---- Reading a trusted value ----

// Aligned, so the generated accessors may read it in place.
class Aligned {
 public:
  explicit Aligned(std::string_view v) : words_((v.size() + 7) / 8 + 1, 0) {
    std::memcpy(words_.data(), v.data(), v.size());
    size_ = v.size();
  }
  const uint8_t* data() const {
    return reinterpret_cast<const uint8_t*>(words_.data());
  }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> words_;
  size_t size_ = 0;
};

template <typename T>
const T* Root(const Aligned& a, const char* id) {
  fbs::Verifier::Options options;
  options.max_tables = 1u << 30;
  fbs::Verifier v(a.data(), a.size(), options);
  if (!fbs::BufferHasIdentifier(a.data(), id) || !v.VerifyBuffer<T>(id)) {
    ADD_FAILURE() << "forge: a value rocksdcp wrote does not verify as " << id;
    return nullptr;
  }
  return fbs::GetRoot<T>(a.data());
}

Longs ReadLongs(const fbs::Vector<int64_t>* v) {
  if (v == nullptr) return std::nullopt;
  return std::vector<int64_t>(v->begin(), v->end());
}

std::optional<std::string> ReadString(const fbs::String* s) {
  if (s == nullptr) return std::nullopt;
  return s->str();
}

std::optional<std::string> ReadBytes(const fbs::Vector<uint8_t>* v) {
  if (v == nullptr) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(v->data()), v->size());
}

// ---- Writing ----

fbs::Offset<fbs::Vector<int64_t>> Longs_(fbs::FlatBufferBuilder& fbb,
                                         const Longs& v) {
  return v ? fbb.CreateVector(*v) : 0;
}

fbs::Offset<fbs::String> String_(fbs::FlatBufferBuilder& fbb,
                                 const std::optional<std::string>& s) {
  return s ? fbb.CreateString(*s) : 0;
}

fbs::Offset<fbs::Vector<uint8_t>> Bytes_(fbs::FlatBufferBuilder& fbb,
                                         const std::optional<std::string>& s) {
  if (!s) return 0;
  return fbb.CreateVector(reinterpret_cast<const uint8_t*>(s->data()),
                          s->size());
}

std::string Finished(const fbs::FlatBufferBuilder& fbb) {
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

fbs::Offset<fb::ChunkStorageMetadata> Chunk_(fbs::FlatBufferBuilder& fbb,
                                             const FChunk& c) {
  const auto offsets = Longs_(fbb, c.offsets);
  const auto sizes = Longs_(fbb, c.sizes);
  return fb::CreateChunkStorageMetadata(fbb, offsets, sizes);
}

// The word of FTensor::periodic_zero_d_chunks: as an offset, 0x40004 bytes
// onwards; as a table's soffset, its vtable 0x40004 bytes back; as a
// vtable, two uint16 4s: a vtable of 4 bytes for a table of 4 bytes, no
// fields.
constexpr uint32_t kPeriodicWord = 0x00040004;
// Words after the chunk vector, so that its last element's table (0x40004
// bytes on) lies in the buffer too.
constexpr uint32_t kPeriodicTail = 0x40004 / 4 + 3;

fbs::Offset<fb::TensorStorageMetadata> Tensor_(fbs::FlatBufferBuilder& fbb,
                                               const FTensor& t) {
  fbs::Offset<fbs::Vector<fbs::Offset<fb::ChunkStorageMetadata>>> chunks;
  if (t.periodic_zero_d_chunks > 0) {
    // The tail, then the chunk vector right before it (the builder writes
    // back to front): nothing may come between them. The tail's length
    // word (kPeriodicTail) reads as a table whose vtable lies that many
    // bytes back, in the chunk vector.
    EXPECT_GE(uint64_t{t.periodic_zero_d_chunks} * 4, kPeriodicTail);
    fbb.CreateVector(std::vector<uint32_t>(kPeriodicTail, kPeriodicWord));
    chunks.o = fbb.CreateVector(std::vector<uint32_t>(t.periodic_zero_d_chunks,
                                                      kPeriodicWord))
                   .o;
  } else if (t.chunks && t.repeat_first_chunk > 0 && !t.chunks->empty()) {
    const auto one = Chunk_(fbb, t.chunks->front());
    chunks =
        fbb.CreateVector(std::vector<fbs::Offset<fb::ChunkStorageMetadata>>(
            t.repeat_first_chunk, one));
  } else if (t.chunks) {
    std::vector<fbs::Offset<fb::ChunkStorageMetadata>> v;
    for (const FChunk& c : *t.chunks) v.push_back(Chunk_(fbb, c));
    chunks = fbb.CreateVector(v);
  }
  const auto size = Longs_(fbb, t.size);
  fbs::Offset<fb::TensorProperties> props;
  if (t.has_properties) {
    props = fb::CreateTensorProperties(fbb, static_cast<fb::DType>(t.dtype),
                                       t.layout, t.requires_grad,
                                       t.memory_format, t.pin_memory);
  }
  return fb::CreateTensorStorageMetadata(fbb, props, size, chunks);
}

}  // namespace

FEntry* FMetadata::Entry(std::string_view fqn) {
  if (!state_dict) return nullptr;
  for (FEntry& e : *state_dict) {
    if (e.fqn == fqn) return &e;
  }
  return nullptr;
}

FStorage* FMetadata::Storage(std::string_view fqn, const Longs& offset) {
  if (!storage) return nullptr;
  for (FStorage& s : *storage) {
    if (s.index.fqn == fqn && s.index.offset == offset) return &s;
  }
  return nullptr;
}

FMetadata ParseMetadata(std::string_view value) {
  FMetadata out;
  const Aligned a(value);
  const fb::Metadata* m = Root<fb::Metadata>(a, "RDCM");
  if (m == nullptr) return out;
  out.version = ReadString(m->version());
  out.planner_data = ReadBytes(m->planner_data());
  if (m->state_dict_metadata() != nullptr) {
    out.state_dict.emplace();
    for (const fb::StateDictEntry* e : *m->state_dict_metadata()) {
      FEntry f;
      f.fqn = e->fqn()->str();
      f.value_type = static_cast<uint8_t>(e->value_type());
      if (const auto* t = e->value_as_TensorStorageMetadata()) {
        f.table = FEntry::Table::kTensor;
        f.tensor.has_properties = t->properties() != nullptr;
        if (t->properties() != nullptr) {
          f.tensor.dtype = static_cast<uint8_t>(t->properties()->dtype());
          f.tensor.layout = t->properties()->layout();
          f.tensor.requires_grad = t->properties()->requires_grad();
          f.tensor.memory_format = t->properties()->memory_format();
          f.tensor.pin_memory = t->properties()->pin_memory();
        }
        f.tensor.size = ReadLongs(t->size());
        if (t->chunks() != nullptr) {
          f.tensor.chunks.emplace();
          for (const fb::ChunkStorageMetadata* c : *t->chunks()) {
            f.tensor.chunks->push_back(
                {ReadLongs(c->offsets()), ReadLongs(c->sizes())});
          }
        }
      } else if (e->value() != nullptr) {
        f.table = FEntry::Table::kBytes;
      } else {
        f.table = FEntry::Table::kNone;
      }
      out.state_dict->push_back(std::move(f));
    }
  }
  if (m->storage_data() != nullptr) {
    out.storage.emplace();
    for (const fb::StorageDataEntry* e : *m->storage_data()) {
      FStorage s;
      s.index.fqn = e->index()->fqn()->str();
      s.index.offset = ReadLongs(e->index()->offset());
      if (e->index()->index()) s.index.index = *e->index()->index();
      s.info = ReadBytes(e->info());
      out.storage->push_back(std::move(s));
    }
  }
  if (const fb::StorageMeta* sm = m->storage_meta()) {
    FStorageMeta f;
    f.checkpoint_id = ReadString(sm->checkpoint_id());
    f.save_id = ReadString(sm->save_id());
    f.load_id = ReadString(sm->load_id());
    if (sm->modules() != nullptr) {
      f.modules.emplace();
      for (const fbs::String* s : *sm->modules())
        f.modules->push_back(s->str());
    }
    out.storage_meta = std::move(f);
  }
  return out;
}

std::string Encode(const FMetadata& m) {
  fbs::FlatBufferBuilder fbb(1 << 16);
  fbs::Offset<fbs::Vector<fbs::Offset<fb::StateDictEntry>>> state_dict;
  if (m.state_dict) {
    std::vector<fbs::Offset<fb::StateDictEntry>> entries;
    for (const FEntry& e : *m.state_dict) {
      if (m.repeat_first_entry > 0 && !entries.empty()) break;
      fbs::Offset<void> value;
      if (e.table == FEntry::Table::kTensor) {
        value = Tensor_(fbb, e.tensor).Union();
      } else if (e.table == FEntry::Table::kBytes) {
        value = fb::CreateBytesStorageMetadata(fbb).Union();
      }
      const auto fqn = fbb.CreateString(e.fqn);
      entries.push_back(fb::CreateStateDictEntry(
          fbb, fqn, static_cast<fb::StorageMetadata>(e.value_type), value));
    }
    if (m.repeat_first_entry > 0 && !entries.empty()) {
      entries.assign(m.repeat_first_entry, entries.front());
    }
    state_dict = fbb.CreateVector(entries);
  }
  fbs::Offset<fbs::Vector<fbs::Offset<fb::StorageDataEntry>>> storage;
  if (m.storage) {
    std::vector<fbs::Offset<fb::StorageDataEntry>> entries;
    for (const FStorage& s : *m.storage) {
      const auto fqn = fbb.CreateString(s.index.fqn);
      const auto offset = Longs_(fbb, s.index.offset);
      fbs::Optional<int32_t> hint;
      if (s.index.index) hint = *s.index.index;
      const auto index = fb::CreateMetadataIndex(fbb, fqn, offset, hint);
      const auto info = Bytes_(fbb, s.info);
      entries.push_back(fb::CreateStorageDataEntry(fbb, index, info));
    }
    storage = fbb.CreateVector(entries);
  }
  fbs::Offset<fb::StorageMeta> storage_meta;
  if (m.storage_meta) {
    const FStorageMeta& sm = *m.storage_meta;
    const auto id = String_(fbb, sm.checkpoint_id);
    const auto save = String_(fbb, sm.save_id);
    const auto load = String_(fbb, sm.load_id);
    const auto modules =
        sm.modules ? fbb.CreateVectorOfStrings(*sm.modules)
                   : fbs::Offset<fbs::Vector<fbs::Offset<fbs::String>>>();
    storage_meta = fb::CreateStorageMeta(fbb, id, save, load, modules);
  }
  const auto version = String_(fbb, m.version);
  const auto planner = Bytes_(fbb, m.planner_data);
  fbb.Finish(fb::CreateMetadata(fbb, version, state_dict, planner, storage,
                                storage_meta),
             "RDCM");
  return Finished(fbb);
}

FInfo ParseInfo(std::string_view value) {
  FInfo out;
  const Aligned a(value);
  const fb::StorageInfo* s = Root<fb::StorageInfo>(a, "RDCS");
  if (s == nullptr) return out;
  out.format_version = s->format_version();
  out.kind = static_cast<uint8_t>(s->kind());
  out.length = s->length();
  out.num_pieces = s->num_pieces();
  out.piece_bytes = s->piece_bytes();
  out.file = ReadString(s->file());
  out.compressed = s->compressed();
  return out;
}

std::string Encode(const FInfo& info) {
  fbs::FlatBufferBuilder fbb(128);
  const auto file = String_(fbb, info.file);
  fbb.Finish(fb::CreateStorageInfo(
                 fbb, info.format_version, static_cast<fb::ItemKind>(info.kind),
                 info.length, info.num_pieces, info.piece_bytes, file, {}, {},
                 {}, info.compressed),
             "RDCS");
  return Finished(fbb);
}

FCatalog ParseCatalog(std::string_view value) {
  FCatalog out;
  const Aligned a(value);
  const fb::CatalogEntry* e = Root<fb::CatalogEntry>(a, "RDCC");
  if (e == nullptr) return out;
  out.format_version = e->format_version();
  out.checkpoint_id = ReadString(e->checkpoint_id());
  out.column_family = ReadString(e->column_family());
  out.state = static_cast<uint8_t>(e->state());
  out.created_unix_micros = e->created_unix_micros();
  out.total_bytes = e->total_bytes();
  out.num_items = e->num_items();
  out.world_size = e->world_size();
  out.metadata_xxh3 = e->metadata_xxh3();
  if (e->referenced_column_families() != nullptr) {
    for (const auto* name : *e->referenced_column_families()) {
      out.referenced_column_families.push_back(name->str());
    }
  }
  out.referenced_bytes = e->referenced_bytes();
  return out;
}

std::string Encode(const FCatalog& c) {
  fbs::FlatBufferBuilder fbb(256);
  const auto id = String_(fbb, c.checkpoint_id);
  const auto cf = String_(fbb, c.column_family);
  const auto refs =
      c.referenced_column_families.empty()
          ? 0
          : fbb.CreateVectorOfStrings(c.referenced_column_families);
  fbb.Finish(fb::CreateCatalogEntry(fbb, c.format_version, id, cf,
                                    static_cast<fb::CheckpointState>(c.state),
                                    c.created_unix_micros, c.total_bytes,
                                    c.num_items, c.world_size, c.metadata_xxh3,
                                    refs, c.referenced_bytes),
             "RDCC");
  return Finished(fbb);
}

void FPiece::Rehash(std::string_view key) {
  const std::string bytes = data.value_or("");
  const uint64_t seed = format_version >= 2 ? Xxh3(key) : 0;
  xxh3 = format::Xxh3(bytes.data(), bytes.size(), seed);
}

FPiece ParsePiece(std::string_view value) {
  FPiece out;
  const Aligned a(value);
  const fb::ChunkPiece* p = Root<fb::ChunkPiece>(a, "RDCP");
  if (p == nullptr) return out;
  out.format_version = p->format_version();
  out.kind = static_cast<uint8_t>(p->kind());
  out.dtype = static_cast<uint8_t>(p->dtype());
  out.chunk_offsets = ReadLongs(p->chunk_offsets());
  out.chunk_sizes = ReadLongs(p->chunk_sizes());
  out.piece = p->piece();
  out.num_pieces = p->num_pieces();
  out.byte_offset = p->byte_offset();
  out.byte_length = p->byte_length();
  out.xxh3 = p->xxh3();
  out.data = ReadBytes(p->data());
  out.codec = static_cast<uint8_t>(p->codec());
  if (p->plane_bytes() != nullptr) {
    out.plane_bytes.emplace(p->plane_bytes()->begin(), p->plane_bytes()->end());
  }
  out.payload_xxh3 = p->payload_xxh3();
  return out;
}

std::string Encode(const FPiece& p) {
  fbs::FlatBufferBuilder fbb(1024 + (p.data ? p.data->size() : 0));
  const auto offsets = Longs_(fbb, p.chunk_offsets);
  const auto sizes = Longs_(fbb, p.chunk_sizes);
  const auto data = Bytes_(fbb, p.data);
  const auto planes = p.plane_bytes ? fbb.CreateVector(*p.plane_bytes)
                                    : fbs::Offset<fbs::Vector<uint32_t>>();
  fbb.Finish(fb::CreateChunkPiece(
                 fbb, p.format_version, static_cast<fb::ItemKind>(p.kind),
                 static_cast<fb::DType>(p.dtype), offsets, sizes, p.piece,
                 p.num_pieces, p.byte_offset, p.byte_length, p.xxh3, data,
                 static_cast<fb::PieceCodec>(p.codec), planes, p.payload_xxh3),
             "RDCP");
  return Finished(fbb);
}

std::string WithIdentifier(std::string value, std::string_view id) {
  if (value.size() >= 8 && id.size() == 4) value.replace(4, 4, id);
  return value;
}

uint64_t Xxh3(std::string_view bytes) { return format::Xxh3(bytes); }

// ---- RawStore ----

namespace {

rocksdb::CompressionType BestCompression() {
  const std::vector<rocksdb::CompressionType> supported =
      rocksdb::GetSupportedCompressions();
  for (rocksdb::CompressionType t :
       {rocksdb::kZSTD, rocksdb::kLZ4Compression, rocksdb::kZlibCompression}) {
    if (std::count(supported.begin(), supported.end(), t) > 0) return t;
  }
  ADD_FAILURE() << "this RocksDB supports none of ZSTD, LZ4 and zlib";
  return rocksdb::kNoCompression;
}

}  // namespace

RawStore::RawStore(const std::string& path, bool compress)
    : cf_options_(CheckpointColumnFamilyOptions()) {
  if (compress) {
    cf_options_.compression = BestCompression();
    cf_options_.bottommost_compression = cf_options_.compression;
  }
  rocksdb::DBOptions options;
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(options, path, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names)
    descriptors.emplace_back(name, cf_options_);
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(options, path, descriptors, &handles_, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  db_.reset(db);
}

RawStore::~RawStore() {
  if (!db_) return;
  rocksdb::FlushOptions fo;
  fo.wait = true;
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    rocksdb::Status s = db_->Flush(fo, h);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

rocksdb::ColumnFamilyHandle* RawStore::Cf(const std::string& name) const {
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    if (h->GetName() == name) return h;
  }
  ADD_FAILURE() << "forge: no column family " << name;
  return handles_.front();
}

std::vector<std::string> RawStore::ColumnFamilies() const {
  std::vector<std::string> names;
  for (rocksdb::ColumnFamilyHandle* h : handles_) names.push_back(h->GetName());
  return names;
}

bool RawStore::HasColumnFamily(const std::string& name) const {
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    if (h->GetName() == name) return true;
  }
  return false;
}

std::optional<std::string> RawStore::Get(const std::string& cf,
                                         std::string_view key) {
  std::string value;
  rocksdb::Status s = db_->Get({}, Cf(cf), key, &value);
  if (s.IsNotFound()) return std::nullopt;
  EXPECT_TRUE(s.ok()) << s.ToString();
  return value;
}

void RawStore::Put(const std::string& cf, std::string_view key,
                   std::string_view value) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::Status s = db_->Put(wo, Cf(cf), key, value);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

void RawStore::Delete(const std::string& cf, std::string_view key) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::Status s = db_->Delete(wo, Cf(cf), key);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

std::vector<std::string> RawStore::Keys(const std::string& cf) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}, Cf(cf)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    keys.push_back(it->key().ToString());
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return keys;
}

void RawStore::CreateColumnFamily(const std::string& name) {
  rocksdb::ColumnFamilyHandle* h = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(cf_options_, name, &h);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (h != nullptr) handles_.push_back(h);
}

void RawStore::DropColumnFamily(const std::string& name) {
  rocksdb::ColumnFamilyHandle* h = Cf(name);
  rocksdb::Status s = db_->DropColumnFamily(h);
  EXPECT_TRUE(s.ok()) << s.ToString();
  db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  handles_.erase(std::find(handles_.begin(), handles_.end(), h));
}

}  // namespace rocksdcp::hostile
