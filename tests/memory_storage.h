// MemoryStorage: an in-memory reference StorageWriter / StorageReader, for
// tests only.
//
// It keeps the observable contract of the RocksDB backend (store.h)
// with none of its machinery, so that the contract suite
// (storage_contract_test.cc) can run against both, and so that core tests
// can drive Save/Load without a disk:
//   - checkpoint ids follow rocksdcp::ValidateCheckpointId;
//   - nothing of a save is visible before Finish returns OK; a save whose
//     Finish never runs leaves nothing behind;
//   - saving a committed id is AlreadyExists unless the writer overwrites;
//     two writers saving one id at once: the second is Busy;
//   - a reader keeps the checkpoint it read the metadata of, even if it is
//     overwritten meanwhile.
//
// Thread safety: a MemoryStorage is thread-safe. Each writer or reader is
// used from one thread at a time, as storage.h says.
//
// REQUIRES: a MemoryStorage outlives every writer and reader made from it.

#ifndef ROCKSDCP_TESTS_MEMORY_STORAGE_H_
#define ROCKSDCP_TESTS_MEMORY_STORAGE_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/storage.h"

namespace rocksdcp::testing {

// One saved item: a tensor chunk's contiguous bytes (with the chunk's dtype
// and sizes, as a RocksDB piece records them) or a byte item's bytes.
struct MemoryBlob {
  std::string bytes;
  bool is_tensor = false;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
};

// A committed checkpoint. Immutable once committed.
struct MemoryCheckpoint {
  Metadata metadata;
  std::map<MetadataIndex, MemoryBlob> blobs;
};

struct MemoryWriterOptions {
  // Replace a committed checkpoint of the same id, atomically at Finish.
  // Default: false (AlreadyExists)
  bool overwrite = false;
};

class MemoryStorageWriter;
class MemoryStorageReader;

// The shared "store": committed checkpoints by id, plus the blobs of saves
// in progress.
class MemoryStorage {
 public:
  MemoryStorage() = default;
  MemoryStorage(const MemoryStorage&) = delete;
  MemoryStorage& operator=(const MemoryStorage&) = delete;

  std::unique_ptr<MemoryStorageWriter> NewWriter(
      const MemoryWriterOptions& options = {});
  std::unique_ptr<MemoryStorageReader> NewReader();

  // The same rules as rocksdcp::ValidateCheckpointId.
  static Status ValidateCheckpointId(std::string_view checkpoint_id);

  // Committed checkpoint ids, sorted.
  std::vector<std::string> List() const;

  // ---- For the writers and readers. ----

  // Stages a blob written by some rank; returns its name, which the rank
  // reports in WriteResult::storage_data.
  std::string Stage(MemoryBlob blob);
  // Drops staged blobs that were never committed.
  void Unstage(const std::vector<std::string>& names);
  // Marks `id` as being saved; Busy if another writer is saving it.
  Status BeginSave(const std::string& id);
  void EndSave(const std::string& id);
  // NotFound if `id` is not committed.
  Result<std::shared_ptr<const MemoryCheckpoint>> Lookup(
      const std::string& id) const;
  Status CheckNotCommitted(const std::string& id) const;
  // Moves the staged blobs named by `results` into a new checkpoint `id`
  // with `metadata`, atomically.
  Status Commit(const std::string& id, bool overwrite, Metadata metadata,
                const std::vector<std::vector<WriteResult>>& results);

 private:
  mutable std::mutex mu_;  // Guards everything below.
  std::map<std::string, std::shared_ptr<const MemoryCheckpoint>> committed_;
  std::map<std::string, MemoryBlob> staged_;
  std::set<std::string> saving_;
  uint64_t next_blob_ = 0;
};

// Saves into a MemoryStorage. Make one with MemoryStorage::NewWriter.
class MemoryStorageWriter final : public StorageWriter {
 public:
  MemoryStorageWriter(MemoryStorage* storage, MemoryWriterOptions options);
  ~MemoryStorageWriter() override;
  MemoryStorageWriter(const MemoryStorageWriter&) = delete;
  MemoryStorageWriter& operator=(const MemoryStorageWriter&) = delete;

  static Status ValidateCheckpointId(std::string_view checkpoint_id) {
    return MemoryStorage::ValidateCheckpointId(checkpoint_id);
  }

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
  Result<std::vector<WriteResult>> DoWriteData(const SavePlan& plan,
                                               SavePlanner& planner);
  // Gives up the id and drops blobs of a save that was not committed.
  void Abandon();

  MemoryStorage* const storage_;
  const MemoryWriterOptions options_;
  std::string id_;  // Empty until Reset.
  std::string save_id_;
  bool set_up_ = false;
  bool is_coordinator_ = false;
  bool saving_ = false;  // Holds the id in storage_->BeginSave.
  std::vector<std::string> staged_;
};

// Loads from a MemoryStorage. Make one with MemoryStorage::NewReader.
class MemoryStorageReader final : public StorageReader {
 public:
  explicit MemoryStorageReader(MemoryStorage* storage);
  MemoryStorageReader(const MemoryStorageReader&) = delete;
  MemoryStorageReader& operator=(const MemoryStorageReader&) = delete;

  static Status ValidateCheckpointId(std::string_view checkpoint_id) {
    return MemoryStorage::ValidateCheckpointId(checkpoint_id);
  }

  Status Reset(std::string_view checkpoint_id) override;
  Result<Metadata> ReadMetadata() override;
  Status SetUpStorageReader(const Metadata& metadata, bool is_coordinator,
                            int rank, int world_size) override;
  Result<LoadPlan> PrepareLocalPlan(LoadPlan plan) override;
  Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> plans) override;
  std::future<Status> ReadData(const LoadPlan& plan,
                               LoadPlanner& planner) override;

 private:
  Status DoReadData(const LoadPlan& plan, LoadPlanner& planner);

  MemoryStorage* const storage_;
  std::string id_;  // Empty until Reset.
  // Pinned by ReadMetadata: the read sees this checkpoint to the end.
  std::shared_ptr<const MemoryCheckpoint> checkpoint_;
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_MEMORY_STORAGE_H_
