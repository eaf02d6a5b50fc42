#include "rocksdb/raw_store.h"

#include <gtest/gtest.h>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/store_impl.h"
#include "test_util.h"

namespace rocksdcp::testing {

RawStore::RawStore(const std::string& path) {
  rocksdb::DBOptions options;
  std::vector<std::string> names;
  EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(options, path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, name == rocksdb::kDefaultColumnFamilyName
                                       ? rocksdb::ColumnFamilyOptions()
                                       : rocksdb::ColumnFamilyOptions(
                                             CheckpointColumnFamilyOptions()));
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(options, path, descriptors, &handles_, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  db_.reset(db);
}

RawStore::~RawStore() {
  if (!db_) return;
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

size_t CatalogTableFiles(const std::string& path) {
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return 0;
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyMetaData files;
  db->GetColumnFamilyMetaData(&files);
  return files.file_count;
}

std::string RawStore::Get(const std::string& cf, std::string_view key) {
  std::string value;
  rocksdb::Status s = db_->Get({}, Cf(cf), key, &value);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return value;
}

void RawStore::Put(const std::string& cf, std::string_view key,
                   std::string_view value) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  EXPECT_TRUE(db_->Put(wo, Cf(cf), key, value).ok());
}

void RawStore::Delete(const std::string& cf, std::string_view key) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  EXPECT_TRUE(db_->Delete(wo, Cf(cf), key).ok());
}

rocksdb::ColumnFamilyHandle* RawStore::Cf(const std::string& name) {
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    if (h->GetName() == name) return h;
  }
  ADD_FAILURE() << "no column family " << name;
  return handles_.front();
}

void EditCatalogEntry(const std::string& store, const std::string& id,
                      const std::function<void(CheckpointInfo&)>& change) {
  RawStore raw(store);
  const std::string key = keys::CatalogKey(id);
  auto entry = format::DecodeCatalogEntry(
      raw.Get(rocksdb::kDefaultColumnFamilyName, key));
  ASSERT_OK(entry);
  change(*entry);
  raw.Put(rocksdb::kDefaultColumnFamilyName, key,
          format::EncodeCatalogEntry(*entry));
}

void RewriteMetadata(const std::string& store, const std::string& id,
                     const std::function<void(Metadata&)>& change) {
  std::string value;
  {
    RawStore raw(store);
    auto metadata = format::DecodeMetadata(raw.Get(id, keys::kMetadataKey));
    ASSERT_OK(metadata);
    change(*metadata);
    value = format::EncodeMetadata(*metadata);
    raw.Put(id, keys::kMetadataKey, value);
  }
  EditCatalogEntry(store, id, [&](CheckpointInfo& e) {
    e.metadata_checksum = format::Xxh3(value);
  });
}

}  // namespace rocksdcp::testing
