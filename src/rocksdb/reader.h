// RocksDBStorageReaderImpl: loads a committed checkpoint, verifying every
// piece before any of its bytes reach a destination.

#ifndef ROCKSDCP_SRC_ROCKSDB_READER_H_
#define ROCKSDCP_SRC_ROCKSDB_READER_H_

#include <rocksdb/slice.h>

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>

#include "format/catalog_codec.h"
#include "format/piece_codec.h"
#include "rocksdb/store_impl.h"
#include "rocksdcp/rocksdb_store.h"

namespace rocksdcp {

class RocksDBStorageReaderImpl final : public RocksDBStorageReader {
 public:
  RocksDBStorageReaderImpl(StoreImpl* store, RocksDBReaderOptions options);
  ~RocksDBStorageReaderImpl() override;

  Status Reset(std::string_view checkpoint_id) override;
  Result<Metadata> ReadMetadata() override;
  Status SetUpStorageReader(const Metadata& metadata, bool is_coordinator,
                            int rank, int world_size) override;
  Result<LoadPlan> PrepareLocalPlan(LoadPlan plan) override;
  Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> plans) override;
  std::future<Status> ReadData(const LoadPlan& plan,
                               LoadPlanner& planner) override;
  ReaderStats stats() const override;

 private:
  // A saved item, as the metadata describes it.
  struct Item {
    format::StorageInfo info;
    DType dtype = DType::kUInt8;
    std::vector<int64_t> chunk_sizes;
  };

  Status ReadDataSync(const LoadPlan& plan, LoadPlanner& planner);
  Result<Item> LookupItem(const MetadataIndex& index, bool tensor);
  // Fetches piece `p` of `index` and verifies it against `item`. The result
  // points into pinned_, valid until the next fetch.
  Result<format::DecodedPiece> FetchPiece(const MetadataIndex& index,
                                          const Item& item, uint32_t p);
  Status ReadTensor(const ReadItem& ri, LoadPlanner& planner,
                    Progress* progress);
  Status ReadBytes(const ReadItem& ri, LoadPlanner& planner,
                   Progress* progress);
  std::string Where() const;
  std::string ItemWhere(const MetadataIndex& index) const;

  StoreImpl* const store_;
  const RocksDBReaderOptions options_;

  std::string checkpoint_id_;
  std::string load_id_;
  bool has_id_ = false;
  // Pinned by ReadMetadata: the checkpoint stays readable while we load it.
  std::optional<CommittedCheckpoint> checkpoint_;
  const Metadata* metadata_ = nullptr;

  rocksdb::PinnableSlice pinned_;
  std::string bytes_buffer_;  // Reused to assemble byte items.

  std::atomic<uint64_t> pieces_read_{0};
  std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_READER_H_
