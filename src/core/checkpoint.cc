// Save and Load: DCP's state_dict_saver._save_state_dict and
// state_dict_loader._load_state_dict, call for call.

#include "rocksdcp/checkpoint.h"

#include <string>
#include <utility>
#include <vector>

namespace rocksdcp {

namespace {

// Where a save or load is, so that an error names the checkpoint, the rank
// and the step that failed. The code is kept: callers branch on it.
class StepContext {
 public:
  StepContext(std::string_view op, std::string_view checkpoint_id, int rank)
      : prefix_(std::string(op) + " of checkpoint '" +
                std::string(checkpoint_id) + "' failed on rank " +
                std::to_string(rank) + " at ") {}

  Status At(std::string_view step, const Status& status) const {
    if (status.ok()) return status;
    return status.WithContext(prefix_ + std::string(step));
  }
  template <typename T>
  Result<T> At(std::string_view step, Result<T> result) const {
    if (result.ok()) return result;
    return At(step, result.status());
  }

 private:
  std::string prefix_;
};

// DCP's _DistWrapper: the collective steps of the protocol. Each runs a
// step on every rank and, on the coordinator, a step over every rank's
// result, then hands each rank its share.
//
// Only world size 1 is driven today, where each step is a local call. More
// ranks need two things not built yet, and these methods are where they go:
// a wire encoding of plans, write results and metadata to send through the
// Collective (Gather, Scatter, Broadcast), and error agreement, so that a
// failure on any rank reaches every rank as one Aborted naming the failing
// ranks and steps (DCP's CheckpointException).
class DistWrapper {
 public:
  // NotSupported for a world size this release can't drive.
  static Status CheckSupported(const Collective& collective) {
    if (collective.world_size() != 1) {
      return Status::NotSupported(
          "world size " + std::to_string(collective.world_size()) +
          ": multi-rank save/load arrives with MpiCollective/ThreadCollective");
    }
    return Status::OK();
  }

  explicit DistWrapper(Collective& collective) : collective_(collective) {}

  int rank() const { return collective_.rank(); }
  int world_size() const { return collective_.world_size(); }
  bool is_coordinator() const { return collective_.is_coordinator(); }

  // DCP's reduce_scatter: every rank runs `local_step` (-> Result<T>); the
  // coordinator runs `global_step` over all ranks' results in rank order
  // (-> Result<std::vector<T>>, one per rank); each rank gets its own.
  template <typename T, typename LocalStep, typename GlobalStep>
  Result<T> ReduceScatter(std::string_view step, LocalStep local_step,
                          GlobalStep global_step) {
    ROCKSDCP_ASSIGN_OR_RETURN(T local, local_step());
    std::vector<T> all;
    all.push_back(std::move(local));
    ROCKSDCP_ASSIGN_OR_RETURN(std::vector<T> scattered,
                              global_step(std::move(all)));
    if (scattered.size() != static_cast<size_t>(world_size())) {
      return Status::Internal(std::string(step) + ": the global step made " +
                              std::to_string(scattered.size()) +
                              " results for " + std::to_string(world_size()) +
                              " rank(s)");
    }
    return std::move(scattered[rank()]);
  }

  // DCP's all_reduce: every rank runs `local_step` (-> Result<T>); the
  // coordinator runs `reduce_step` over all ranks' results (-> Result<R>),
  // and that result reaches every rank.
  template <typename T, typename R, typename LocalStep, typename ReduceStep>
  Result<R> AllReduce(std::string_view step, LocalStep local_step,
                      ReduceStep reduce_step) {
    ROCKSDCP_ASSIGN_OR_RETURN(T local, local_step());
    std::vector<T> all;
    all.push_back(std::move(local));
    return reduce_step(std::move(all));
  }

  // DCP's all_gather for a step without a value: every rank runs
  // `local_step` (-> Status) and learns whether any rank failed.
  template <typename LocalStep>
  Status AllGather(std::string_view step, LocalStep local_step) {
    return local_step();
  }

 private:
  Collective& collective_;
};

}  // namespace

Result<Metadata> Save(const StateDict& state_dict, StorageWriter& writer,
                      const SaveOptions& options) {
  const std::string& id = options.checkpoint_id;
  if (id.empty()) {
    return Status::InvalidArgument("save: checkpoint_id is empty");
  }
  LocalCollective local_collective;
  Collective& collective =
      options.collective ? *options.collective : local_collective;
  const StepContext ctx("save", id, collective.rank());
  ROCKSDCP_RETURN_IF_ERROR(
      ctx.At("collective", DistWrapper::CheckSupported(collective)));
  DistWrapper dist(collective);
  DefaultSavePlanner default_planner;
  SavePlanner& planner = options.planner ? *options.planner : default_planner;

  ROCKSDCP_RETURN_IF_ERROR(ctx.At("reset", writer.Reset(id)));

  // Set by the coordinator's global step; committed by its finish step.
  Metadata global_metadata;
  bool have_metadata = false;

  auto local_step = [&]() -> Result<SavePlan> {
    std::optional<StorageMeta> storage_meta = writer.GetStorageMeta();
    ROCKSDCP_RETURN_IF_ERROR(
        ctx.At("set_up_planner", planner.SetUpPlanner(&state_dict, storage_meta,
                                                      dist.is_coordinator())));
    ROCKSDCP_RETURN_IF_ERROR(
        ctx.At("set_up_storage_writer",
               writer.SetUpStorageWriter(dist.is_coordinator(), dist.rank(),
                                         dist.world_size())));
    ROCKSDCP_ASSIGN_OR_RETURN(
        SavePlan plan, ctx.At("create_local_plan", planner.CreateLocalPlan()));
    return ctx.At("prepare_local_plan",
                  writer.PrepareLocalPlan(std::move(plan)));
  };
  auto global_step =
      [&](std::vector<SavePlan> plans) -> Result<std::vector<SavePlan>> {
    ROCKSDCP_ASSIGN_OR_RETURN(
        GlobalSavePlan global,
        ctx.At("create_global_plan",
               planner.CreateGlobalPlan(std::move(plans))));
    global_metadata = std::move(global.metadata);
    have_metadata = true;
    return ctx.At("prepare_global_plan",
                  writer.PrepareGlobalPlan(std::move(global.plans)));
  };
  ROCKSDCP_ASSIGN_OR_RETURN(
      SavePlan central_plan,
      dist.ReduceScatter<SavePlan>("plan", local_step, global_step));

  auto write_step = [&]() -> Result<std::vector<WriteResult>> {
    ROCKSDCP_ASSIGN_OR_RETURN(
        SavePlan final_plan,
        ctx.At("finish_plan", planner.FinishPlan(std::move(central_plan))));
    // WriteData's future borrows final_plan and planner: wait here.
    return ctx.At("write_data", writer.WriteData(final_plan, planner).get());
  };
  auto finish_step =
      [&](std::vector<std::vector<WriteResult>> results) -> Result<Metadata> {
    if (!have_metadata) {
      return ctx.At("finish", Status::Internal("no global plan was made"));
    }
    ROCKSDCP_RETURN_IF_ERROR(
        ctx.At("finish", writer.Finish(&global_metadata, results)));
    return global_metadata;
  };
  return dist.AllReduce<std::vector<WriteResult>, Metadata>("write", write_step,
                                                            finish_step);
}

Status Load(StateDict* state_dict, StorageReader& reader,
            const LoadOptions& options) {
  const std::string& id = options.checkpoint_id;
  if (id.empty()) {
    return Status::InvalidArgument("load: checkpoint_id is empty");
  }
  if (state_dict == nullptr) {
    return Status::InvalidArgument("load: state_dict is null");
  }
  LocalCollective local_collective;
  Collective& collective =
      options.collective ? *options.collective : local_collective;
  const StepContext ctx("load", id, collective.rank());
  ROCKSDCP_RETURN_IF_ERROR(
      ctx.At("collective", DistWrapper::CheckSupported(collective)));
  DistWrapper dist(collective);
  DefaultLoadPlanner default_planner(
      {.allow_partial_load = options.allow_partial_load});
  LoadPlanner& planner = options.planner ? *options.planner : default_planner;

  ROCKSDCP_RETURN_IF_ERROR(ctx.At("reset", reader.Reset(id)));

  // The planner and the reader keep pointers to it until the read is done.
  Metadata metadata;

  auto local_step = [&]() -> Result<LoadPlan> {
    ROCKSDCP_ASSIGN_OR_RETURN(metadata,
                              ctx.At("read_metadata", reader.ReadMetadata()));
    ROCKSDCP_RETURN_IF_ERROR(ctx.At(
        "set_up_planner",
        planner.SetUpPlanner(state_dict, &metadata, dist.is_coordinator())));
    ROCKSDCP_RETURN_IF_ERROR(
        ctx.At("set_up_storage_reader",
               reader.SetUpStorageReader(metadata, dist.is_coordinator(),
                                         dist.rank(), dist.world_size())));
    ROCKSDCP_ASSIGN_OR_RETURN(
        LoadPlan plan, ctx.At("create_local_plan", planner.CreateLocalPlan()));
    return ctx.At("prepare_local_plan",
                  reader.PrepareLocalPlan(std::move(plan)));
  };
  auto global_step =
      [&](std::vector<LoadPlan> plans) -> Result<std::vector<LoadPlan>> {
    ROCKSDCP_ASSIGN_OR_RETURN(
        plans, ctx.At("create_global_plan",
                      planner.CreateGlobalPlan(std::move(plans))));
    return ctx.At("prepare_global_plan",
                  reader.PrepareGlobalPlan(std::move(plans)));
  };
  ROCKSDCP_ASSIGN_OR_RETURN(
      LoadPlan central_plan,
      dist.ReduceScatter<LoadPlan>("plan", local_step, global_step));

  return dist.AllGather("read", [&]() -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(
        LoadPlan final_plan,
        ctx.At("finish_plan", planner.FinishPlan(std::move(central_plan))));
    // ReadData's future borrows final_plan and planner: wait here.
    return ctx.At("read_data", reader.ReadData(final_plan, planner).get());
  });
}

}  // namespace rocksdcp
