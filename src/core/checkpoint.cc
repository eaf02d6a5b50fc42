// Save and Load: DCP's state_dict_saver._save_state_dict and
// state_dict_loader._load_state_dict, call for call.

#include "rocksdcp/checkpoint.h"

#include <string>
#include <utility>
#include <vector>

#include "format/metadata_codec.h"
#include "format/plan_codec.h"

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

// How each protocol value crosses between ranks: FlatBuffers, verified on
// receipt like any untrusted bytes (src/format/plan_codec.h).
template <typename T>
struct Wire;
template <>
struct Wire<SavePlan> {
  static std::string Encode(const SavePlan& v) {
    return format::EncodeSavePlan(v);
  }
  static Result<SavePlan> Decode(std::string_view b) {
    return format::DecodeSavePlan(b);
  }
};
template <>
struct Wire<LoadPlan> {
  static std::string Encode(const LoadPlan& v) {
    return format::EncodeLoadPlan(v);
  }
  static Result<LoadPlan> Decode(std::string_view b) {
    return format::DecodeLoadPlan(b);
  }
};
template <>
struct Wire<std::vector<WriteResult>> {
  static std::string Encode(const std::vector<WriteResult>& v) {
    return format::EncodeWriteResults(v);
  }
  static Result<std::vector<WriteResult>> Decode(std::string_view b) {
    return format::DecodeWriteResults(b);
  }
};
template <>
struct Wire<Metadata> {
  static std::string Encode(const Metadata& v) {
    return format::EncodeMetadata(v);
  }
  static Result<Metadata> Decode(std::string_view b) {
    return format::DecodeMetadata(b);
  }
};

// DCP's _DistWrapper: the collective steps of the protocol. Each runs a
// step on every rank and, on the coordinator, a step over every rank's
// result, then hands each rank its share.
//
// Every rank makes the same collective calls whatever happens, so that a
// failure on one rank can't leave the others waiting: a failed local step
// still sends its Status. If any rank fails, every rank returns one error
// naming each failing rank and step (DCP's CheckpointException).
//
// With one rank, values are handed over directly, without encoding.
class DistWrapper {
 public:
  DistWrapper(Collective& collective, std::string op, std::string id)
      : collective_(collective), op_(std::move(op)), id_(std::move(id)) {}

  int rank() const { return collective_.rank(); }
  int world_size() const { return collective_.world_size(); }
  bool is_coordinator() const { return collective_.is_coordinator(); }

  // DCP's reduce_scatter: every rank runs `local_step` (-> Result<T>); the
  // coordinator runs `global_step` over all ranks' results in rank order
  // (-> Result<std::vector<T>>, one per rank); each rank gets its own.
  template <typename T, typename LocalStep, typename GlobalStep>
  Result<T> ReduceScatter(std::string_view step, LocalStep local_step,
                          GlobalStep global_step) {
    Result<T> local = Guarded(step, local_step);
    if (world_size() == 1) {
      if (!local.ok()) return local.status();
      std::vector<T> all;
      all.push_back(std::move(local).value());
      ROCKSDCP_ASSIGN_OR_RETURN(std::vector<T> scattered, Guarded(step, [&] {
                                  return global_step(std::move(all));
                                }));
      ROCKSDCP_RETURN_IF_ERROR(CheckCount(step, scattered.size()));
      return std::move(scattered[0]);
    }
    ROCKSDCP_ASSIGN_OR_RETURN(
        std::vector<std::string> gathered,
        Checked(step, collective_.Gather(Outcome(local))));
    std::vector<std::string> replies;
    if (is_coordinator()) {
      Result<std::vector<T>> values = DecodeAll<T>(gathered);
      Result<std::vector<T>> scattered =
          values.ok()
              ? Guarded(step,
                        [&] { return global_step(std::move(values).value()); })
              : Result<std::vector<T>>(values.status());
      if (scattered.ok()) {
        Status count = CheckCount(step, scattered->size());
        if (!count.ok()) scattered = count;
      }
      for (int r = 0; r < world_size(); ++r) {
        replies.push_back(scattered.ok()
                              ? Outcome(Result<T>((*scattered)[r]))
                              : Outcome(Result<T>(scattered.status())));
      }
    }
    ROCKSDCP_ASSIGN_OR_RETURN(
        std::string reply,
        Checked(step, collective_.Scatter(std::move(replies))));
    return Unwrap<T>(step, reply);
  }

  // DCP's all_reduce: every rank runs `local_step` (-> Result<T>); the
  // coordinator runs `reduce_step` over all ranks' results (-> Result<R>),
  // and that result reaches every rank.
  template <typename T, typename R, typename LocalStep, typename ReduceStep>
  Result<R> AllReduce(std::string_view step, LocalStep local_step,
                      ReduceStep reduce_step) {
    Result<T> local = Guarded(step, local_step);
    if (world_size() == 1) {
      if (!local.ok()) return local.status();
      std::vector<T> all;
      all.push_back(std::move(local).value());
      return Guarded(step, [&] { return reduce_step(std::move(all)); });
    }
    ROCKSDCP_ASSIGN_OR_RETURN(
        std::vector<std::string> gathered,
        Checked(step, collective_.Gather(Outcome(local))));
    std::string reply;
    if (is_coordinator()) {
      Result<std::vector<T>> values = DecodeAll<T>(gathered);
      Result<R> reduced =
          values.ok()
              ? Guarded(step,
                        [&] { return reduce_step(std::move(values).value()); })
              : Result<R>(values.status());
      reply = Outcome(reduced);
    }
    ROCKSDCP_ASSIGN_OR_RETURN(
        std::string all_reply,
        Checked(step, collective_.Broadcast(std::move(reply))));
    return Unwrap<R>(step, all_reply);
  }

  // DCP's all_gather for a step without a value: every rank runs
  // `local_step` (-> Status) and learns whether any rank failed.
  template <typename LocalStep>
  Status AllGather(std::string_view step, LocalStep local_step) {
    Status local = Guarded(step, local_step);
    if (world_size() == 1) return local;
    ROCKSDCP_ASSIGN_OR_RETURN(
        std::vector<std::string> all,
        Checked(step,
                collective_.AllGather(format::EncodeStepOutcome(local, ""))));
    std::vector<Status> failures;
    for (size_t r = 0; r < all.size(); ++r) {
      auto outcome = format::DecodeStepOutcome(all[r]);
      if (!outcome.ok()) {
        failures.push_back(outcome.status().WithContext("message from rank " +
                                                        std::to_string(r)));
      } else if (!outcome->status.ok()) {
        failures.push_back(outcome->status);
      }
    }
    return Combine(failures);
  }

 private:
  // Runs a step (returning a Status or a Result), turning running out of
  // memory into ResourceExhausted: nothing is thrown across the API, and
  // this rank still takes part in the collectives that follow.
  template <typename Fn>
  auto Guarded(std::string_view step, Fn&& fn) const -> decltype(fn()) {
    try {
      return fn();
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted(op_ + " of checkpoint '" + id_ +
                                       "' failed on rank " +
                                       std::to_string(rank()) + " in step " +
                                       std::string(step) + ": out of memory");
    }
  }

  template <typename T>
  static std::string Outcome(const Result<T>& r) {
    return r.ok() ? format::EncodeStepOutcome(Status::OK(),
                                              Wire<T>::Encode(r.value()))
                  : format::EncodeStepOutcome(r.status(), "");
  }

  // The coordinator's view of every rank's outcome: all values, or one
  // error naming every failing rank.
  template <typename T>
  Result<std::vector<T>> DecodeAll(const std::vector<std::string>& gathered) {
    std::vector<T> values;
    std::vector<Status> failures;
    for (size_t r = 0; r < gathered.size(); ++r) {
      auto outcome = format::DecodeStepOutcome(gathered[r]);
      if (!outcome.ok()) {
        failures.push_back(outcome.status().WithContext("message from rank " +
                                                        std::to_string(r)));
        continue;
      }
      if (!outcome->status.ok()) {
        failures.push_back(std::move(outcome->status));
        continue;
      }
      auto value = Wire<T>::Decode(outcome->payload);
      if (!value.ok()) {
        failures.push_back(value.status().WithContext("message from rank " +
                                                      std::to_string(r)));
        continue;
      }
      values.push_back(std::move(value).value());
    }
    if (!failures.empty()) return Combine(failures);
    return values;
  }

  template <typename T>
  Result<T> Unwrap(std::string_view step, const std::string& reply) {
    auto outcome = format::DecodeStepOutcome(reply);
    if (!outcome.ok()) {
      return outcome.status().WithContext(op_ + " of checkpoint '" + id_ +
                                          "': reply of step " +
                                          std::string(step));
    }
    if (!outcome->status.ok()) return outcome->status;
    return Wire<T>::Decode(outcome->payload);
  }

  // One failure keeps its code and message (which already name the rank and
  // step). Several become one Aborted listing each; the code is kept when
  // they share it.
  Status Combine(const std::vector<Status>& failures) const {
    if (failures.empty()) return Status::OK();
    if (failures.size() == 1) return failures[0];
    StatusCode code = failures[0].code();
    std::string msg = op_ + " of checkpoint '" + id_ + "' failed on " +
                      std::to_string(failures.size()) + " ranks: ";
    for (size_t i = 0; i < failures.size(); ++i) {
      if (failures[i].code() != code) code = StatusCode::kAborted;
      if (i) msg += "; ";
      msg += "[" + failures[i].ToString() + "]";
    }
    return Status(code, std::move(msg));
  }

  // A failure of the collective itself: no agreement is possible.
  template <typename T>
  Result<T> Checked(std::string_view step, Result<T> r) const {
    if (r.ok()) return r;
    return Status::Aborted(op_ + " of checkpoint '" + id_ + "' on rank " +
                           std::to_string(rank()) + ": collective of step " +
                           std::string(step) +
                           " failed: " + r.status().ToString());
  }

  Status CheckCount(std::string_view step, size_t n) const {
    if (n == static_cast<size_t>(world_size())) return Status::OK();
    return Status::Internal(std::string(step) + ": the global step made " +
                            std::to_string(n) + " results for " +
                            std::to_string(world_size()) + " rank(s)");
  }

  Collective& collective_;
  const std::string op_;
  const std::string id_;
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
  DistWrapper dist(collective, "save", id);
  DefaultSavePlanner default_planner;
  SavePlanner& planner = options.planner ? *options.planner : default_planner;

  // Set by the coordinator's global step; committed by its finish step.
  Metadata global_metadata;
  bool have_metadata = false;

  auto local_step = [&]() -> Result<SavePlan> {
    // Inside the step, so that a rank whose reset fails still takes part in
    // the collectives and its error reaches every rank.
    ROCKSDCP_RETURN_IF_ERROR(ctx.At("reset", writer.Reset(id)));
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
    // Moved: a copy of a 51,000-item metadata took 5-10 ms of W3's save.
    return std::move(global_metadata);
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
  if (options.planner != nullptr && options.allow_partial_load) {
    return Status::InvalidArgument(
        "load of checkpoint '" + id +
        "': allow_partial_load applies to the default planner only; with "
        "a planner of your own, configure it there (a DefaultLoadPlanner "
        "takes Options{.allow_partial_load = true})");
  }
  LocalCollective local_collective;
  Collective& collective =
      options.collective ? *options.collective : local_collective;
  const StepContext ctx("load", id, collective.rank());
  DistWrapper dist(collective, "load", id);
  DefaultLoadPlanner default_planner(
      {.allow_partial_load = options.allow_partial_load});
  LoadPlanner& planner = options.planner ? *options.planner : default_planner;

  // The planner and the reader keep pointers to it until the read is done.
  Metadata metadata;

  auto local_step = [&]() -> Result<LoadPlan> {
    ROCKSDCP_RETURN_IF_ERROR(ctx.At("reset", reader.Reset(id)));
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
