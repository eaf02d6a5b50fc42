// RocksDBStorageWriterImpl: writes a rank's pieces into staging SST files
// (no DB handle needed), and on the coordinator commits them to the store.

#ifndef ROCKSDCP_SRC_ROCKSDB_WRITER_H_
#define ROCKSDCP_SRC_ROCKSDB_WRITER_H_

#include <memory>
#include <optional>
#include <string>

#include "format/piece_codec.h"
#include "util/file_lock.h"
#include "rocksdcp/rocksdb_store.h"

namespace rocksdcp {

class StoreImpl;

class RocksDBStorageWriterImpl final : public RocksDBStorageWriter {
 public:
  RocksDBStorageWriterImpl(StoreImpl* store, RocksDBWriterOptions options);
  ~RocksDBStorageWriterImpl() override;

  Status Reset(std::string_view checkpoint_id) override;
  Status SetUpStorageWriter(bool is_coordinator, int rank,
                            int world_size) override;
  Result<SavePlan> PrepareLocalPlan(SavePlan plan) override;
  Result<std::vector<SavePlan>> PrepareGlobalPlan(
      std::vector<SavePlan> plans) override;
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override;
  Status Finish(Metadata* metadata,
                const std::vector<std::vector<WriteResult>>& results) override;
  std::optional<StorageMeta> GetStorageMeta() override;

 private:
  Result<std::vector<WriteResult>> WriteDataSync(const SavePlan& plan,
                                                 SavePlanner& planner);
  // Forgets the current save: releases the id and removes staging files.
  void Abandon();
  std::string Where() const;

  StoreImpl* const store_;
  const RocksDBWriterOptions options_;

  std::string checkpoint_id_;
  std::string save_id_;
  std::string staging_dir_;
  bool has_id_ = false;
  bool set_up_ = false;
  // BeginSave was called (and, on the coordinator, the id claimed).
  bool registered_ = false;
  // Held while staging_dir_ is in use; see StagingLockPath.
  std::optional<util::FileLock> staging_lock_;
  bool is_coordinator_ = false;
  int rank_ = 0;
  int world_size_ = 1;

  // Reused across pieces and saves, so that encoding touches fresh memory
  // only when a piece outgrows every earlier one.
  format::PieceEncoder encoder_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_WRITER_H_
