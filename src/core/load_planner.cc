// DefaultLoadPlanner: DCP's default_planner.py load side
// (create_default_local_load_plan and the resharding of
// _create_read_items_for_chunk_list) over our StateDict.

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "rocksdcp/planner.h"
#include "util/chunk_check.h"
#include "util/text.h"

namespace rocksdcp {

namespace {

int64_t Volume(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// A box of the destination: the whole of a dense tensor, or one local shard.
struct DestBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};

// Checks the state dict's tensor against the checkpoint's record of it.
Status CheckMatches(const std::string& fqn, const TensorStorageMetadata& md,
                    DType dtype, const std::vector<int64_t>& size) {
  if (md.properties.dtype != dtype) {
    return Status::InvalidArgument(
        "item " + util::Quote(fqn) + ": dtype mismatch: checkpoint has " +
        std::string(DTypeName(md.properties.dtype)) + ", state dict has " +
        std::string(DTypeName(dtype)));
  }
  if (md.size != size) {
    return Status::InvalidArgument(
        "item " + util::Quote(fqn) + ": shape mismatch: checkpoint has " +
        util::ShapeString(md.size) + ", state dict has " +
        util::ShapeString(size));
  }
  return Status::OK();
}

Status KindMismatch(const std::string& fqn, bool checkpoint_has_tensor) {
  return Status::InvalidArgument(
      "item " + util::Quote(fqn) + ": kind mismatch: checkpoint has " +
      (checkpoint_has_tensor ? "a tensor" : "bytes") + ", state dict has " +
      (checkpoint_has_tensor ? "bytes" : "a tensor"));
}

// The metadata comes from disk and is untrusted: the saved chunks must tile
// the tensor exactly before any arithmetic on them. A chunk outside the
// size could overflow an offset; overlapping chunks with a hole of the same
// size would pass a count of covered elements and leave the hole's elements
// unwritten, so the load would hand out stale bytes.
Status CheckSavedChunks(const Metadata& metadata, const std::string& fqn,
                        const TensorStorageMetadata& md) {
  std::string problem = util::ChunkTilingProblem(md.size, md.chunks);
  if (problem.empty()) return Status::OK();
  std::string where = "checkpoint metadata";
  if (metadata.storage_meta && metadata.storage_meta->checkpoint_id) {
    where +=
        " of checkpoint " + util::Quote(*metadata.storage_meta->checkpoint_id);
  }
  return Status::Corruption(where + ", item " + util::Quote(fqn) + ": " +
                            problem);
}

Status CheckShards(const std::string& fqn, const ShardedTensor& st) {
  const size_t dims = st.global_size.size();
  for (const Shard& shard : st.local_shards) {
    ROCKSDCP_RETURN_IF_ERROR(shard.tensor.Validate(fqn));
    const std::string which = "sharded tensor " + util::Quote(fqn) +
                              ": shard at " + util::ShapeString(shard.offsets);
    if (shard.tensor.dtype != st.dtype) {
      return Status::InvalidArgument(
          which + " has dtype " + std::string(DTypeName(shard.tensor.dtype)) +
          ", the tensor has " + std::string(DTypeName(st.dtype)));
    }
    bool inside = shard.offsets.size() == dims &&
                  static_cast<size_t>(shard.tensor.dim()) == dims;
    for (size_t d = 0; inside && d < dims; ++d) {
      inside = shard.offsets[d] >= 0 &&
               shard.offsets[d] <= st.global_size[d] - shard.tensor.sizes[d];
    }
    if (!inside) {
      return Status::InvalidArgument(
          which + " of size " + util::ShapeString(shard.tensor.sizes) +
          " lies outside the global size " + util::ShapeString(st.global_size));
    }
  }
  return Status::OK();
}

// Plans the reads that fill each destination box from the saved chunks
// overlapping it, and checks that the chunks cover every element.
Status PlanTensorReads(const std::string& fqn, const TensorStorageMetadata& md,
                       const std::vector<DestBox>& boxes, LoadPlan* plan) {
  const size_t dims = md.size.size();
  for (size_t b = 0; b < boxes.size(); ++b) {
    const DestBox& box = boxes[b];
    const int64_t volume = Volume(box.sizes);
    if (volume == 0) continue;
    // Unsigned: with damaged metadata the sum may pass the volume before the
    // loop stops.
    uint64_t covered = 0;
    for (size_t c = 0;
         c < md.chunks.size() && covered <= static_cast<uint64_t>(volume);
         ++c) {
      const ChunkStorageMetadata& chunk = md.chunks[c];
      std::vector<int64_t> lo(dims), hi(dims);
      bool empty = false;
      for (size_t d = 0; d < dims && !empty; ++d) {
        lo[d] = std::max(box.offsets[d], chunk.offsets[d]);
        hi[d] = std::min(box.offsets[d] + box.sizes[d],
                         chunk.offsets[d] + chunk.sizes[d]);
        empty = hi[d] <= lo[d];
      }
      // A 0-d box and a 0-d chunk always meet, in the single element.
      if (empty) continue;
      ReadItem item;
      item.type = LoadItemType::kTensor;
      item.dest_index =
          MetadataIndex(fqn, box.offsets, static_cast<int32_t>(b));
      item.storage_index =
          MetadataIndex(fqn, chunk.offsets, static_cast<int32_t>(c));
      item.dest_offsets.resize(dims);
      item.storage_offsets.resize(dims);
      item.lengths.resize(dims);
      for (size_t d = 0; d < dims; ++d) {
        item.dest_offsets[d] = lo[d] - box.offsets[d];
        item.storage_offsets[d] = lo[d] - chunk.offsets[d];
        item.lengths[d] = hi[d] - lo[d];
      }
      covered += static_cast<uint64_t>(Volume(item.lengths));
      plan->items.push_back(std::move(item));
    }
    // CheckSavedChunks found that the chunks tile the tensor, so this can't
    // fail; it guards the loop above against a change to that check.
    if (covered != static_cast<uint64_t>(volume)) {
      std::string where =
          boxes.size() == 1 && box.sizes == md.size
              ? ""
              : " (box at " + util::ShapeString(box.offsets) + ")";
      return Status::Corruption("item " + util::Quote(fqn) + where +
                                ": checkpoint chunks cover " +
                                std::to_string(covered) + " of " +
                                std::to_string(volume) + " elements");
    }
  }
  return Status::OK();
}

}  // namespace

struct DefaultLoadPlanner::Rep {
  DefaultLoadPlannerOptions options;
  StateDict* state_dict = nullptr;
  const Metadata* metadata = nullptr;
  bool is_coordinator = false;
};

DefaultLoadPlanner::DefaultLoadPlanner(DefaultLoadPlannerOptions options)
    : rep_(std::make_unique<Rep>()) {
  rep_->options = options;
}

DefaultLoadPlanner::~DefaultLoadPlanner() = default;

Status DefaultLoadPlanner::SetUpPlanner(StateDict* state_dict,
                                        const Metadata* metadata,
                                        bool is_coordinator) {
  if (state_dict == nullptr || metadata == nullptr) {
    return Status::InvalidArgument(
        "SetUpPlanner: state_dict and metadata must not be null");
  }
  rep_->state_dict = state_dict;
  rep_->metadata = metadata;
  rep_->is_coordinator = is_coordinator;
  return Status::OK();
}

Result<LoadPlan> DefaultLoadPlanner::CreateLocalPlan() {
  if (rep_->state_dict == nullptr) {
    return Status::FailedPrecondition(
        "CreateLocalPlan called before SetUpPlanner");
  }
  const auto& saved = rep_->metadata->state_dict_metadata;

  // Each state dict entry's saved entry, found once. Both maps are in fqn
  // order, so where the state dict is all or most of the checkpoint the
  // one after the last found is it, without a search (an optimizer's
  // state of 50,000 small tensors spent a third of this looking up).
  std::vector<decltype(saved.begin())> found;
  found.reserve(rep_->state_dict->size());
  auto next = saved.begin();
  // Name every missing fqn at once, so one failed load tells the whole story.
  std::string missing;
  for (const auto& [fqn, value] : *rep_->state_dict) {
    auto it =
        next != saved.end() && next->first == fqn ? next : saved.find(fqn);
    found.push_back(it);
    if (it != saved.end()) {
      next = std::next(it);
      continue;
    }
    if (!missing.empty()) missing += ", ";
    missing += util::Quote(fqn);
  }
  if (!missing.empty() && !rep_->options.allow_partial_load) {
    return Status::NotFound("checkpoint has no item(s) " + missing);
  }

  LoadPlan plan;
  plan.items.reserve(rep_->state_dict->size());
  size_t i = 0;
  for (const auto& [fqn, value] : *rep_->state_dict) {
    auto it = found[i++];
    if (it == saved.end()) continue;
    const auto* tensor_md = std::get_if<TensorStorageMetadata>(&it->second);
    const bool dest_is_bytes = std::holds_alternative<std::string>(value);
    if (dest_is_bytes != (tensor_md == nullptr)) {
      return KindMismatch(fqn, tensor_md != nullptr);
    }
    if (dest_is_bytes) {
      ReadItem item;
      item.type = LoadItemType::kByteIO;
      item.dest_index = MetadataIndex(fqn);
      item.storage_index = MetadataIndex(fqn);
      plan.items.push_back(std::move(item));
      continue;
    }
    ROCKSDCP_RETURN_IF_ERROR(
        CheckSavedChunks(*rep_->metadata, fqn, *tensor_md));
    std::vector<DestBox> boxes;
    if (const auto* view = std::get_if<TensorView>(&value)) {
      ROCKSDCP_RETURN_IF_ERROR(view->Validate(fqn));
      ROCKSDCP_RETURN_IF_ERROR(
          CheckMatches(fqn, *tensor_md, view->dtype, view->sizes));
      boxes.push_back({std::vector<int64_t>(view->sizes.size()), view->sizes});
    } else {
      const auto& st = std::get<ShardedTensor>(value);
      ROCKSDCP_RETURN_IF_ERROR(
          CheckMatches(fqn, *tensor_md, st.dtype, st.global_size));
      ROCKSDCP_RETURN_IF_ERROR(CheckShards(fqn, st));
      for (const Shard& shard : st.local_shards) {
        boxes.push_back({shard.offsets, shard.tensor.sizes});
      }
    }
    ROCKSDCP_RETURN_IF_ERROR(PlanTensorReads(fqn, *tensor_md, boxes, &plan));
  }
  return plan;
}

Result<std::vector<LoadPlan>> DefaultLoadPlanner::CreateGlobalPlan(
    std::vector<LoadPlan> plans) {
  return plans;
}

Result<LoadPlan> DefaultLoadPlanner::FinishPlan(LoadPlan central_plan) {
  return central_plan;
}

Status DefaultLoadPlanner::LoadBytes(const ReadItem& item,
                                     std::string_view data) {
  // Storage I/O threads call this concurrently for distinct items. Assigning
  // to distinct values of the map is safe: the map's structure is unchanged.
  if (rep_->state_dict == nullptr) {
    return Status::FailedPrecondition("LoadBytes called before SetUpPlanner");
  }
  const std::string& fqn = item.dest_index.fqn;
  auto it = rep_->state_dict->find(fqn);
  if (it == rep_->state_dict->end()) {
    return Status::NotFound("state dict has no item " + util::Quote(fqn));
  }
  auto* bytes = std::get_if<std::string>(&it->second);
  if (bytes == nullptr) {
    return Status::InvalidArgument("item " + util::Quote(fqn) +
                                   " is a tensor in the state dict, but the "
                                   "plan loads bytes into it");
  }
  bytes->assign(data.data(), data.size());
  return Status::OK();
}

Result<TensorView> DefaultLoadPlanner::ResolveTensor(const ReadItem& item) {
  if (rep_->state_dict == nullptr) {
    return Status::FailedPrecondition(
        "ResolveTensor called before SetUpPlanner");
  }
  const std::string& fqn = item.dest_index.fqn;
  auto it = rep_->state_dict->find(fqn);
  if (it == rep_->state_dict->end()) {
    return Status::NotFound("state dict has no item " + util::Quote(fqn));
  }
  const TensorView* dest = nullptr;
  if (const auto* view = std::get_if<TensorView>(&it->second)) {
    dest = view;
  } else if (const auto* st = std::get_if<ShardedTensor>(&it->second)) {
    if (!item.dest_index.offset) {
      return Status::InvalidArgument("read item for sharded tensor " +
                                     util::Quote(fqn) +
                                     " names no shard offset");
    }
    const auto& shards = st->local_shards;
    // The hint is the shard's position when this planner made the item.
    if (item.dest_index.index && *item.dest_index.index >= 0 &&
        static_cast<size_t>(*item.dest_index.index) < shards.size() &&
        shards[*item.dest_index.index].offsets == *item.dest_index.offset) {
      dest = &shards[*item.dest_index.index].tensor;
    }
    for (size_t i = 0; dest == nullptr && i < shards.size(); ++i) {
      if (shards[i].offsets == *item.dest_index.offset) {
        dest = &shards[i].tensor;
      }
    }
    if (dest == nullptr) {
      return Status::NotFound("state dict has no shard " +
                              util::Quote(item.dest_index.ToString()));
    }
  } else {
    return Status::InvalidArgument("item " + util::Quote(fqn) +
                                   " holds bytes in the state dict, but the "
                                   "plan loads a tensor into it");
  }
  // A plan from another planner must not make us write outside the view.
  const size_t dims = dest->sizes.size();
  bool inside = item.dest_offsets.size() == dims && item.lengths.size() == dims;
  for (size_t d = 0; inside && d < dims; ++d) {
    inside = item.dest_offsets[d] >= 0 && item.lengths[d] >= 0 &&
             item.dest_offsets[d] <= dest->sizes[d] - item.lengths[d];
  }
  if (!inside) {
    return Status::InvalidArgument(
        "read item for " + util::Quote(item.dest_index.ToString()) + " at " +
        util::ShapeString(item.dest_offsets) + " of size " +
        util::ShapeString(item.lengths) +
        " lies outside the destination of size " +
        util::ShapeString(dest->sizes));
  }
  return dest->Narrow(item.dest_offsets, item.lengths);
}

Status DefaultLoadPlanner::CommitTensor(const ReadItem& item,
                                        const TensorView& tensor) {
  // ResolveTensor handed out a view into the state dict's own memory, so
  // the storage has already written the data in place.
  return Status::OK();
}

Status CheckLoadDestinations(const Metadata& metadata,
                             const std::vector<LoadDestination>& destinations) {
  const auto& saved = metadata.state_dict_metadata;
  std::vector<std::string> problems;
  for (const LoadDestination& d : destinations) {
    auto it = saved.find(d.fqn);
    if (it == saved.end()) continue;
    const auto* tensor_md = std::get_if<TensorStorageMetadata>(&it->second);
    Status s =
        d.is_bytes != (tensor_md == nullptr)
            ? KindMismatch(d.fqn, tensor_md != nullptr)
        : tensor_md != nullptr
            ? CheckMatches(
                  d.fqn, *tensor_md,
                  d.check_dtype ? d.dtype : tensor_md->properties.dtype, d.size)
            : Status::OK();
    if (!s.ok()) problems.push_back(s.message());
  }
  if (problems.empty()) return Status::OK();
  std::string message = problems[0];
  for (size_t i = 1; i < problems.size(); ++i) message += "; " + problems[i];
  return Status::InvalidArgument(message);
}

}  // namespace rocksdcp
