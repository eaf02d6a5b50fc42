// SavePlanner and LoadPlanner: DCP's planning interfaces, and the default
// planners.
//
// A planner decides *what* is written or read; a StorageWriter/Reader
// (storage.h) decides *how*. The driver (checkpoint.h) calls them in DCP's
// order:
//
//   save: set_up_planner -> create_local_plan -> (coordinator)
//         create_global_plan -> finish_plan -> storage write_data, which
//         calls resolve_data for each item, then release_data once the
//         item is written
//   load: set_up_planner -> create_local_plan -> (coordinator)
//         create_global_plan -> finish_plan -> storage read_data, which calls
//         load_bytes / resolve_tensor + commit_tensor for each item
//
// Thread safety: the storage may call ResolveData, ReleaseData, LoadBytes,
// ResolveTensor and CommitTensor from several I/O threads at once, for
// distinct items. The default planners support that. All other calls come
// from one thread.

#ifndef ROCKSDCP_PLANNER_H_
#define ROCKSDCP_PLANNER_H_

#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/state_dict.h"
#include "rocksdcp/status.h"

namespace rocksdcp {

// What resolve_data hands the storage for one WriteItem: the chunk's tensor
// (possibly strided; the storage saves its contiguous projection) or the
// item's bytes. Both borrow from the state dict.
using ResolvedData = std::variant<TensorView, std::string_view>;

struct GlobalSavePlan {
  std::vector<SavePlan> plans;
  Metadata metadata;
};

class SavePlanner {
 public:
  virtual ~SavePlanner() = default;

  // REQUIRES: `state_dict` outlives the save.
  virtual Status SetUpPlanner(const StateDict* state_dict,
                              const std::optional<StorageMeta>& storage_meta,
                              bool is_coordinator) = 0;
  virtual Result<SavePlan> CreateLocalPlan() = 0;
  // Coordinator only. Gets every rank's local plan, in rank order.
  virtual Result<GlobalSavePlan> CreateGlobalPlan(
      std::vector<SavePlan> plans) = 0;
  virtual Result<SavePlan> FinishPlan(SavePlan central_plan) = 0;
  virtual Result<ResolvedData> ResolveData(const WriteItem& item) = 0;
  // Called by a storage once it no longer needs the data ResolveData
  // returned for `item` (it has been written), so that a planner lending
  // out memory, such as AsyncCheckpointer's staging buffers
  // (async_checkpoint.h), can reuse it before the save commits. Storages
  // call it once for each item they resolved, possibly from their I/O
  // threads. Planners must not depend on it: a storage that predates it
  // never calls it (AsyncCheckpointer then reclaims its buffers when
  // WriteData completes).
  // Default: nothing.
  virtual void ReleaseData(const WriteItem& /*item*/) {}
};

class LoadPlanner {
 public:
  virtual ~LoadPlanner() = default;

  // REQUIRES: `state_dict` and `metadata` outlive the load.
  virtual Status SetUpPlanner(StateDict* state_dict, const Metadata* metadata,
                              bool is_coordinator) = 0;
  virtual Result<LoadPlan> CreateLocalPlan() = 0;
  // Coordinator only. Gets every rank's local plan, in rank order.
  virtual Result<std::vector<LoadPlan>> CreateGlobalPlan(
      std::vector<LoadPlan> plans) = 0;
  virtual Result<LoadPlan> FinishPlan(LoadPlan central_plan) = 0;
  // Hands the planner the whole saved value of a kByteIO item.
  virtual Status LoadBytes(const ReadItem& item, std::string_view data) = 0;
  // The destination of a kTensor item: a view of exactly `item.lengths`
  // elements into which the storage copies the box.
  virtual Result<TensorView> ResolveTensor(const ReadItem& item) = 0;
  // Called once the storage has filled the view from ResolveTensor.
  virtual Status CommitTensor(const ReadItem& item,
                              const TensorView& tensor) = 0;
};

// Forward every call to a target planner. Derive from them and override
// only what changes (staging, hooks, fault injection, logging), as
// StorageWriterWrapper does for storages (storage.h). Forwarding is as
// thread-safe as the target: the calls a storage makes from several
// threads reach it from those threads.
// REQUIRES: the target outlives the wrapper.
class SavePlannerWrapper : public SavePlanner {
 public:
  explicit SavePlannerWrapper(SavePlanner* target) : target_(target) {}

  Status SetUpPlanner(const StateDict* state_dict,
                      const std::optional<StorageMeta>& storage_meta,
                      bool is_coordinator) override {
    return target_->SetUpPlanner(state_dict, storage_meta, is_coordinator);
  }
  Result<SavePlan> CreateLocalPlan() override {
    return target_->CreateLocalPlan();
  }
  Result<GlobalSavePlan> CreateGlobalPlan(
      std::vector<SavePlan> plans) override {
    return target_->CreateGlobalPlan(std::move(plans));
  }
  Result<SavePlan> FinishPlan(SavePlan central_plan) override {
    return target_->FinishPlan(std::move(central_plan));
  }
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    return target_->ResolveData(item);
  }
  void ReleaseData(const WriteItem& item) override {
    target_->ReleaseData(item);
  }

 protected:
  SavePlanner* target() const { return target_; }

 private:
  SavePlanner* const target_;
};

class LoadPlannerWrapper : public LoadPlanner {
 public:
  explicit LoadPlannerWrapper(LoadPlanner* target) : target_(target) {}

  Status SetUpPlanner(StateDict* state_dict, const Metadata* metadata,
                      bool is_coordinator) override {
    return target_->SetUpPlanner(state_dict, metadata, is_coordinator);
  }
  Result<LoadPlan> CreateLocalPlan() override {
    return target_->CreateLocalPlan();
  }
  Result<std::vector<LoadPlan>> CreateGlobalPlan(
      std::vector<LoadPlan> plans) override {
    return target_->CreateGlobalPlan(std::move(plans));
  }
  Result<LoadPlan> FinishPlan(LoadPlan central_plan) override {
    return target_->FinishPlan(std::move(central_plan));
  }
  Status LoadBytes(const ReadItem& item, std::string_view data) override {
    return target_->LoadBytes(item, data);
  }
  Result<TensorView> ResolveTensor(const ReadItem& item) override {
    return target_->ResolveTensor(item);
  }
  Status CommitTensor(const ReadItem& item, const TensorView& tensor) override {
    return target_->CommitTensor(item, tensor);
  }

 protected:
  LoadPlanner* target() const { return target_; }

 private:
  LoadPlanner* const target_;
};

struct DefaultSavePlannerOptions {
  // Behavior: write items held by several ranks once, on the rank with the
  // fewest planned bytes (DCP's dedup_save_plans). Turning it off writes
  // every rank's copy and fails on the duplicate index.
  // Default: true
  bool dedup_replicated = true;
};

// DCP's DefaultSavePlanner. A dense tensor becomes one kTensor item (its
// whole box); each shard of a ShardedTensor one kShard item; bytes one
// kByteIO item. The global plan validates that each tensor's chunks tile its
// global size without overlap.
class DefaultSavePlanner : public SavePlanner {
 public:
  explicit DefaultSavePlanner(DefaultSavePlannerOptions options = {});
  ~DefaultSavePlanner() override;
  DefaultSavePlanner(const DefaultSavePlanner&) = delete;
  DefaultSavePlanner& operator=(const DefaultSavePlanner&) = delete;

  Status SetUpPlanner(const StateDict* state_dict,
                      const std::optional<StorageMeta>& storage_meta,
                      bool is_coordinator) override;
  Result<SavePlan> CreateLocalPlan() override;
  Result<GlobalSavePlan> CreateGlobalPlan(std::vector<SavePlan> plans) override;
  Result<SavePlan> FinishPlan(SavePlan central_plan) override;
  Result<ResolvedData> ResolveData(const WriteItem& item) override;

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

struct DefaultLoadPlannerOptions {
  // Behavior: when an fqn of the state dict is missing from the checkpoint,
  // skip it instead of failing. The strict default names every missing fqn.
  // Default: false
  bool allow_partial_load = false;
};

// DCP's DefaultLoadPlanner, with resharding: each destination box (a dense
// tensor, or each local shard) is intersected with every saved chunk, and a
// ReadItem is planned for each non-empty overlap. So a whole saved tensor
// loads into a shard of it, shards load into a whole tensor, and any tiling
// loads into any other. Dtype and global shape must match the checkpoint.
class DefaultLoadPlanner : public LoadPlanner {
 public:
  explicit DefaultLoadPlanner(DefaultLoadPlannerOptions options = {});
  ~DefaultLoadPlanner() override;
  DefaultLoadPlanner(const DefaultLoadPlanner&) = delete;
  DefaultLoadPlanner& operator=(const DefaultLoadPlanner&) = delete;

  Status SetUpPlanner(StateDict* state_dict, const Metadata* metadata,
                      bool is_coordinator) override;
  Result<LoadPlan> CreateLocalPlan() override;
  Result<std::vector<LoadPlan>> CreateGlobalPlan(
      std::vector<LoadPlan> plans) override;
  Result<LoadPlan> FinishPlan(LoadPlan central_plan) override;
  Status LoadBytes(const ReadItem& item, std::string_view data) override;
  Result<TensorView> ResolveTensor(const ReadItem& item) override;
  Status CommitTensor(const ReadItem& item, const TensorView& tensor) override;

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

// What a load writes into, as another driver's planner (PyTorch's, through
// the Python binding) describes it: an fqn with its dtype and global size,
// or bytes.
struct LoadDestination {
  std::string fqn;
  bool is_bytes = false;
  DType dtype = DType::kFloat32;
  // A dense tensor's sizes, or a sharded one's global size.
  std::vector<int64_t> size;
  // False for a destination that converts what it reads (the Python
  // binding copies into it through a tensor of the checkpoint's dtype, as
  // torch's FileSystemReader does): any dtype passes.
  bool check_dtype = true;
};

// Checks every destination that the checkpoint holds against its record,
// before anything is read, as DefaultLoadPlanner does for its state dict:
// InvalidArgument naming each fqn whose kind (tensor or bytes), dtype
// (where check_dtype) or global shape differs, all of them in one message. Fqns
// the checkpoint lacks are the planner's to report.
Status CheckLoadDestinations(const Metadata& metadata,
                             const std::vector<LoadDestination>& destinations);

}  // namespace rocksdcp

#endif  // ROCKSDCP_PLANNER_H_
