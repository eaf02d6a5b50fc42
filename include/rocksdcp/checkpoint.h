// Save and Load: the DCP driver (torch.distributed.checkpoint.save / load).
//
// They run DCP's exact call sequence on a StorageWriter / StorageReader and
// a planner (see storage.h and planner.h), over a Collective. Every step's
// error is caught and reported as one Status that names the rank and the
// step that failed, as DCP's CheckpointException does.
//
// Ranks: with no Collective, one rank (LocalCollective). With a
// ThreadCollective or MpiCollective, every rank calls Save (or Load) with
// its own state dict, writer (or reader) and its member of the collective.
// Plans, results and metadata cross between ranks as FlatBuffers. A failure
// on any rank makes every rank return one error naming each failing rank
// and step; a failed save commits nothing.
//
// Example:
//   ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open("/data/ckpt"));
//   ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
//   ROCKSDCP_RETURN_IF_ERROR(
//       Save(state_dict, *writer, {.checkpoint_id = "step-100"}).status());
//
// Thread safety: Save and Load may run concurrently on distinct writers and
// readers; each call uses its arguments from the calling thread (the
// storage may add I/O threads of its own).
//
// Save blocks until the checkpoint is committed. To get back to training as
// soon as the state dict is copied, and commit in the background (DCP's
// async_save), use AsyncCheckpointer (async_checkpoint.h).

#ifndef ROCKSDCP_CHECKPOINT_H_
#define ROCKSDCP_CHECKPOINT_H_

#include <string>

#include "rocksdcp/collective.h"
#include "rocksdcp/metadata.h"
#include "rocksdcp/planner.h"
#include "rocksdcp/state_dict.h"
#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"

namespace rocksdcp {

struct SaveOptions {
  // The checkpoint to write. Passed to StorageWriter::Reset. Required.
  std::string checkpoint_id;
  // Planner to use; nullptr means a DefaultSavePlanner.
  // Default: nullptr
  SavePlanner* planner = nullptr;
  // Ranks taking part; nullptr means a LocalCollective (world size 1).
  // Default: nullptr
  Collective* collective = nullptr;
};

// Saves `state_dict` as checkpoint `options.checkpoint_id`. Returns the
// committed Metadata on every rank.
Result<Metadata> Save(const StateDict& state_dict, StorageWriter& writer,
                      const SaveOptions& options);

struct LoadOptions {
  // The checkpoint to read. Passed to StorageReader::Reset. Required.
  std::string checkpoint_id;
  // Planner to use; nullptr means a DefaultLoadPlanner configured with
  // `allow_partial_load`.
  // Default: nullptr
  LoadPlanner* planner = nullptr;
  // Ranks taking part; nullptr means a LocalCollective (world size 1).
  // Default: nullptr
  Collective* collective = nullptr;
  // Skip fqns of the state dict that the checkpoint lacks instead of
  // failing (the error names every missing fqn). Only the default planner
  // reads it: with a planner, a load that sets it is InvalidArgument, as
  // the planner decides (DefaultLoadPlanner::Options::allow_partial_load).
  // Default: false
  bool allow_partial_load = false;
};

// Loads checkpoint `options.checkpoint_id` into `state_dict` in place:
// tensors are written through their views, byte values are replaced.
Status Load(StateDict* state_dict, StorageReader& reader,
            const LoadOptions& options);

}  // namespace rocksdcp

#endif  // ROCKSDCP_CHECKPOINT_H_
