// A store's RocksDB opened directly, every column family with rocksdcp's
// options, so a test can write what rocksdcp never would: forged catalog
// entries, metadata and pieces.

#ifndef ROCKSDCP_TESTS_ROCKSDB_RAW_STORE_H_
#define ROCKSDCP_TESTS_ROCKSDB_RAW_STORE_H_

#include <rocksdb/db.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::testing {

// Each call records a gtest failure if RocksDB refuses it.
class RawStore {
 public:
  explicit RawStore(const std::string& path);
  ~RawStore();
  RawStore(const RawStore&) = delete;
  RawStore& operator=(const RawStore&) = delete;

  std::string Get(const std::string& cf, std::string_view key);
  void Put(const std::string& cf, std::string_view key, std::string_view value);
  void Delete(const std::string& cf, std::string_view key);

 private:
  rocksdb::ColumnFamilyHandle* Cf(const std::string& name);

  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

// The table files of the catalog (the default column family) of the store
// at `path`, as its MANIFEST lists them, read through a read-only open.
size_t CatalogTableFiles(const std::string& path);

// Rewrites checkpoint `id`'s catalog entry with `change` applied.
void EditCatalogEntry(const std::string& store, const std::string& id,
                      const std::function<void(CheckpointInfo&)>& change);

// Rewrites checkpoint `id`'s metadata (in the column family named `id`)
// with `change` applied, and its catalog entry's checksum to match: what
// a forger with the schema would do.
void RewriteMetadata(const std::string& store, const std::string& id,
                     const std::function<void(Metadata&)>& change);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_ROCKSDB_RAW_STORE_H_
