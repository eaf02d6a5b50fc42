// StorageWriter and StorageReader: the storage layer of PyTorch DCP
// (torch/distributed/checkpoint/storage.py), method for method.
//
// One instance acts as both coordinator and follower; each instance is told
// its role. The driver (checkpoint.h) makes these calls, in this order:
//
// StorageWriter:
//   0) (all ranks)   Reset(checkpoint_id)
//   1) (all ranks)   SetUpStorageWriter(is_coordinator, rank, world_size)
//   2) (all ranks)   PrepareLocalPlan(plan)
//   3) (coordinator) PrepareGlobalPlan(plans)
//   4) (all ranks)   WriteData(plan, planner)
//   5) (coordinator) Finish(metadata, results)
//
// StorageReader:
//   0) (all ranks)   Reset(checkpoint_id)
//   1) (all ranks)   ReadMetadata()
//   2) (all ranks)   SetUpStorageReader(metadata, is_coordinator, rank, ws)
//   3) (all ranks)   PrepareLocalPlan(plan)
//   4) (coordinator) PrepareGlobalPlan(plans)
//   5) (all ranks)   ReadData(plan, planner)
//
// A checkpoint exists for readers only once Finish has returned OK.
//
// Thread safety: one instance serves one save or load at a time; calls on
// it come from one thread. Different instances may run concurrently.
// Concrete storages also provide
//   static Status ValidateCheckpointId(std::string_view checkpoint_id);
// (DCP's classmethod validate_checkpoint_id), returning OK or an
// InvalidArgument that says what is wrong with the id.

#ifndef ROCKSDCP_STORAGE_H_
#define ROCKSDCP_STORAGE_H_

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/planner.h"
#include "rocksdcp/status.h"

namespace rocksdcp {

// Bytes done out of bytes total, reported by long operations. Called from
// the thread doing the work; keep it cheap.
struct Progress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  uint64_t items_done = 0;
  uint64_t items_total = 0;
};
using ProgressCallback = std::function<void(const Progress&)>;

class StorageWriter {
 public:
  virtual ~StorageWriter() = default;

  // Starts a brand new checkpoint write named `checkpoint_id`.
  virtual Status Reset(std::string_view checkpoint_id) = 0;

  // REQUIRES: Reset() was called. 0 <= rank < world_size.
  virtual Status SetUpStorageWriter(bool is_coordinator, int rank,
                                    int world_size) = 0;

  virtual Result<SavePlan> PrepareLocalPlan(SavePlan plan) = 0;

  // Coordinator only. `plans` are every rank's, in rank order.
  virtual Result<std::vector<SavePlan>> PrepareGlobalPlan(
      std::vector<SavePlan> plans) = 0;

  // Writes every item of `plan`, resolving each through `planner`, and
  // calls planner.ReleaseData(item) once the item's data is written. Errors
  // found before any work starts may come back in the future too; the
  // future never throws.
  // REQUIRES: `plan` and `planner` outlive the returned future.
  virtual std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) = 0;

  // Coordinator only. Commits the checkpoint: afterwards it exists and
  // loads; if Finish fails, it does not exist and no earlier checkpoint is
  // touched. `results` holds each rank's WriteData results. As DCP's
  // storages do, Finish fills `metadata->storage_data` from the results and
  // `metadata->storage_meta` from GetStorageMeta() before committing it, so
  // the caller holds exactly what was committed.
  virtual Status Finish(
      Metadata* metadata,
      const std::vector<std::vector<WriteResult>>& results) = 0;

  // Storage-specific metadata recorded in the checkpoint (checkpoint_id and
  // a save_id fresh for each Reset). Default: none.
  virtual std::optional<StorageMeta> GetStorageMeta() { return std::nullopt; }
};

class StorageReader {
 public:
  virtual ~StorageReader() = default;

  // Starts a brand new checkpoint read of `checkpoint_id`.
  virtual Status Reset(std::string_view checkpoint_id) = 0;

  // The committed metadata. Its storage_meta carries this read's load_id.
  // REQUIRES: Reset() was called.
  virtual Result<Metadata> ReadMetadata() = 0;

  // REQUIRES: `metadata` came from ReadMetadata() and outlives the read.
  virtual Status SetUpStorageReader(const Metadata& metadata,
                                    bool is_coordinator, int rank,
                                    int world_size) = 0;

  virtual Result<LoadPlan> PrepareLocalPlan(LoadPlan plan) = 0;

  // Coordinator only.
  virtual Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> plans) = 0;

  // Reads every item of `plan` into the destinations `planner` resolves.
  // Every byte is verified before it reaches a destination.
  // REQUIRES: `plan` and `planner` outlive the returned future.
  virtual std::future<Status> ReadData(const LoadPlan& plan,
                                       LoadPlanner& planner) = 0;
};

// Forward every call to a target storage. Derive from them and override
// only what changes (staging, fault injection, logging), as RocksDB's
// FileSystemWrapper does for file systems.
// REQUIRES: the target outlives the wrapper.
class StorageWriterWrapper : public StorageWriter {
 public:
  explicit StorageWriterWrapper(StorageWriter* target) : target_(target) {}

  Status Reset(std::string_view checkpoint_id) override {
    return target_->Reset(checkpoint_id);
  }
  Status SetUpStorageWriter(bool is_coordinator, int rank,
                            int world_size) override {
    return target_->SetUpStorageWriter(is_coordinator, rank, world_size);
  }
  Result<SavePlan> PrepareLocalPlan(SavePlan plan) override {
    return target_->PrepareLocalPlan(std::move(plan));
  }
  Result<std::vector<SavePlan>> PrepareGlobalPlan(
      std::vector<SavePlan> plans) override {
    return target_->PrepareGlobalPlan(std::move(plans));
  }
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    return target_->WriteData(plan, planner);
  }
  Status Finish(Metadata* metadata,
                const std::vector<std::vector<WriteResult>>& results) override {
    return target_->Finish(metadata, results);
  }
  std::optional<StorageMeta> GetStorageMeta() override {
    return target_->GetStorageMeta();
  }

 protected:
  StorageWriter* target() const { return target_; }

 private:
  StorageWriter* const target_;
};

class StorageReaderWrapper : public StorageReader {
 public:
  explicit StorageReaderWrapper(StorageReader* target) : target_(target) {}

  Status Reset(std::string_view checkpoint_id) override {
    return target_->Reset(checkpoint_id);
  }
  Result<Metadata> ReadMetadata() override { return target_->ReadMetadata(); }
  Status SetUpStorageReader(const Metadata& metadata, bool is_coordinator,
                            int rank, int world_size) override {
    return target_->SetUpStorageReader(metadata, is_coordinator, rank,
                                       world_size);
  }
  Result<LoadPlan> PrepareLocalPlan(LoadPlan plan) override {
    return target_->PrepareLocalPlan(std::move(plan));
  }
  Result<std::vector<LoadPlan>> PrepareGlobalPlan(
      std::vector<LoadPlan> plans) override {
    return target_->PrepareGlobalPlan(std::move(plans));
  }
  std::future<Status> ReadData(const LoadPlan& plan,
                               LoadPlanner& planner) override {
    return target_->ReadData(plan, planner);
  }

 protected:
  StorageReader* target() const { return target_; }

 private:
  StorageReader* const target_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_STORAGE_H_
