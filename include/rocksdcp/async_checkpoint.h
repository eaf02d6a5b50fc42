// AsyncCheckpointer: DCP's async_save. Save returns as soon as the state
// dict is safe to change. The checkpoint is written and committed in the
// background, and a future reports the commit.
//
// How a save runs:
//   1. Save hands the save to the checkpointer's worker thread. The worker
//      runs Save() of checkpoint.h: the whole DCP protocol, collectives
//      included. Its planner (options.planner, or a DefaultSavePlanner) is
//      wrapped so that the storage reads each tensor from its staged copy.
//   2. Meanwhile the calling thread copies the dict's tensors, in order,
//      into staging memory. That memory is a pool the checkpointer owns and
//      reuses across saves. The storage starts writing once the copy is
//      done (or the pool is full), so that the copy Save blocks on has the
//      CPU and memory bandwidth to itself; the commit comes that much
//      later.
//   3. Save returns once every tensor is staged or already written by the
//      storage. From then on the caller may change its tensors, or drop the
//      dict. `committed` completes when the checkpoint is committed, or
//      with the error that stopped it.
//
// Staging memory and blocking time. The pool holds at most
// Options::staging_budget bytes. Once it is full, staging and writing
// overlap: staging waits for the storage to write a staged tensor and
// release its memory (SavePlanner::ReleaseData), and a tensor the storage
// reaches first it copies into the pool itself or, with no room there,
// reads from the caller's memory ("live"); Save then blocks until that
// tensor is written. So:
//   - budget >= the dict's tensor bytes: Save blocks only for the copies
//     (memory bandwidth: about 0.1 s per GiB on a small 2-core VM);
//   - a smaller budget: Save blocks for about (dict - budget) / write
//     throughput;
//   - a storage that never calls ReleaseData frees nothing before its
//     WriteData completes, so with such a storage and a dict larger than
//     the budget, Save blocks until everything is written (not committed).
// No budget deadlocks, not even 0 or one smaller than a single tensor.
//
// Byte values are copied with the dict's keys and views into the save's own
// state dict, outside the pool: they are small (steps, RNG state). The
// planner sees that copy.
//
// Example:
//   ROCKSDCP_ASSIGN_OR_RETURN(auto ckpt, AsyncCheckpointer::Create({}));
//   ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
//   ROCKSDCP_ASSIGN_OR_RETURN(
//       AsyncSaveHandle save,
//       ckpt->Save(state_dict, *writer, {.checkpoint_id = "step-100"}));
//   TrainStep();  // May change every tensor of state_dict.
//   ROCKSDCP_RETURN_IF_ERROR(save.committed.get().status());
//
// Ranks: with a ThreadCollective or MpiCollective, every rank makes its own
// AsyncCheckpointer and calls Save with its state dict, writer and member
// of the collective. The collective is then used from the worker thread.
//
// Thread safety: an AsyncCheckpointer is thread-safe. Its saves run one at
// a time: a Save first waits until the previous save has committed or
// failed. Create one checkpointer per rank and reuse it; its staging memory
// is touched once and reused.

#ifndef ROCKSDCP_ASYNC_CHECKPOINT_H_
#define ROCKSDCP_ASYNC_CHECKPOINT_H_

#include <cstdint>
#include <future>
#include <memory>

#include "rocksdcp/checkpoint.h"
#include "rocksdcp/metadata.h"
#include "rocksdcp/state_dict.h"
#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"

namespace rocksdcp {

// What AsyncCheckpointer::Save hands back once the dict may change.
struct AsyncSaveHandle {
  // The committed Metadata (what Save() of checkpoint.h returns), or the
  // error of the background save. As with Save(), the error names the
  // checkpoint, rank and step that failed. Never throws.
  std::future<Result<Metadata>> committed;

  // ---- What Save did while it blocked ----

  // Bytes copied: tensors into staging memory, plus byte values.
  uint64_t staged_bytes = 0;
  // Bytes the storage read straight from the caller's tensors, for want of
  // room in the pool. On one rank, staged plus live bytes make the whole
  // dict. With several ranks, tensors that another rank writes (dedup of
  // replicated tensors) may be in neither.
  uint64_t live_bytes = 0;
  // Bytes of staging memory written for the first time, each page of which
  // cost a page fault. 0 once the pool is warm, and always with
  // Options::prefault.
  uint64_t first_touch_bytes = 0;
};

class AsyncCheckpointer {
 public:
  struct Options {
    // ---- Performance ----

    // The most host memory staged copies of tensors may occupy at once. A
    // budget of at least the dict's tensor bytes blocks Save only for a
    // copy; a smaller one blocks it until the writer has read the rest. 0
    // stages nothing (docs/tuning.md, "Asynchronous saves").
    // Default: 1 GiB
    uint64_t staging_budget = uint64_t{1} << 30;

    // Touch the whole budget in Create, once, so that no save pays the
    // first touch of fresh memory; false grows it as saves need it.
    // Default: true
    bool prefault = true;
  };

  // Reserves the staging memory and starts the worker thread.
  static Result<std::unique_ptr<AsyncCheckpointer>> Create(Options options);

  // Waits for a pending save to commit or fail, then stops the worker.
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Saves `state_dict` as checkpoint `options.checkpoint_id`, as Save() of
  // checkpoint.h does, and returns once `state_dict` may change or be
  // destroyed: every tensor is either staged or already written. Errors of
  // the save come out of `committed`. Save itself fails only for an empty
  // checkpoint_id, as Save() of checkpoint.h does, without starting the
  // save.
  //
  // REQUIRES: `writer`, and options.planner and options.collective when
  // set, outlive `committed` and are not used elsewhere until it completes:
  // the worker thread uses them. The planner gets the save's own copy of the
  // dict, and must resolve each tensor item to memory of the item's fqn in
  // that dict or to memory it owns. (Part of a tensor with gaps between its
  // elements, such as a slice of a larger buffer, is staged packed and can
  // be resolved only whole: a part fails the save with NotSupported.)
  Result<AsyncSaveHandle> Save(const StateDict& state_dict,
                               StorageWriter& writer,
                               const SaveOptions& options);

  // Bytes of staging memory: Options::staging_budget rounded down to 64.
  uint64_t staging_capacity() const;

 private:
  struct Rep;
  explicit AsyncCheckpointer(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_ASYNC_CHECKPOINT_H_
