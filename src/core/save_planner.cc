// DefaultSavePlanner: DCP's default_planner.py save side
// (create_default_local_save_plan, dedup_save_plans,
// create_default_global_save_plan, _validate_global_plan) over our StateDict.

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rocksdcp/planner.h"
#include "util/chunk_check.h"
#include "util/text.h"

namespace rocksdcp {

namespace {

WriteItem MakeTensorItem(WriteItemType type, const std::string& fqn,
                         std::vector<int64_t> offsets,
                         std::vector<int64_t> sizes, DType dtype,
                         std::vector<int64_t> global_size) {
  WriteItem item;
  item.index = MetadataIndex(fqn, offsets);
  item.type = type;
  TensorWriteData data;
  data.chunk.offsets = std::move(offsets);
  data.chunk.sizes = std::move(sizes);
  data.properties.dtype = dtype;
  data.size = std::move(global_size);
  item.tensor_data = std::move(data);
  return item;
}

// Checks that each local shard is a well-formed view of the sharded tensor's
// dtype and rank that lies inside its global size, and that no two shards
// share an origin (they would share a MetadataIndex).
Status ValidateShardedTensor(const std::string& fqn, const ShardedTensor& st) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("sharded tensor " + util::Quote(fqn) + ": " +
                                   why);
  };
  if (!IsValidDType(static_cast<uint8_t>(st.dtype))) {
    return bad("invalid dtype");
  }
  if (!util::CheckedVolume(st.global_size)) {
    return bad("global size " + util::ShapeString(st.global_size) +
               " is negative or has more than 2^63 elements");
  }
  const size_t dims = st.global_size.size();
  for (size_t i = 0; i < st.local_shards.size(); ++i) {
    const Shard& shard = st.local_shards[i];
    const std::string which = "shard at " + util::ShapeString(shard.offsets);
    ROCKSDCP_RETURN_IF_ERROR(shard.tensor.Validate(fqn));
    if (shard.tensor.dtype != st.dtype) {
      return bad(which + " has dtype " +
                 std::string(DTypeName(shard.tensor.dtype)) +
                 ", the tensor has " + std::string(DTypeName(st.dtype)));
    }
    if (shard.offsets.size() != dims ||
        static_cast<size_t>(shard.tensor.dim()) != dims) {
      return bad(which + " of size " + util::ShapeString(shard.tensor.sizes) +
                 " does not have the tensor's " + std::to_string(dims) +
                 " dimensions");
    }
    for (size_t d = 0; d < dims; ++d) {
      if (shard.offsets[d] < 0 ||
          shard.offsets[d] > st.global_size[d] - shard.tensor.sizes[d]) {
        return bad(which + " of size " + util::ShapeString(shard.tensor.sizes) +
                   " lies outside the global size " +
                   util::ShapeString(st.global_size));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (st.local_shards[j].offsets == shard.offsets) {
        return bad("two local shards are at " +
                   util::ShapeString(shard.offsets));
      }
    }
  }
  return Status::OK();
}

// DCP's _validate_global_plan for one tensor: every chunk lies within the
// size, no two overlap, and together they cover it.
Status ValidateChunks(const std::string& fqn, const TensorStorageMetadata& md) {
  std::string problem = util::ChunkTilingProblem(md.size, md.chunks);
  if (problem.empty()) return Status::OK();
  return Status::InvalidArgument("item " + util::Quote(fqn) + ": " + problem);
}

// The first item planned for an fqn, and its rank: every later item of
// that fqn must agree with it.
struct FirstOfFqn {
  size_t rank;
  const WriteItem* item;
};

bool IsBytes(const WriteItem& item) {
  return item.type == WriteItemType::kByteIO;
}

std::string KindName(const WriteItem& item) {
  return IsBytes(item) ? "bytes" : "a tensor";
}

// Checks that the ranks agree on what each fqn is (bytes or a tensor, and
// its dtype and global size), and that replicated copies of one index are
// the same chunk. dedup_save_plans would otherwise keep one copy silently.
// Maps keyed by an item's index in place, never by a copy: a plan of many
// small items (an optimizer's state) spent a third of its save's CPU time
// copying indices into maps and freeing them.
struct IndexPtrHash {
  size_t operator()(const MetadataIndex* i) const {
    return MetadataIndexHash()(*i);
  }
};
struct IndexPtrEq {
  bool operator()(const MetadataIndex* a, const MetadataIndex* b) const {
    return *a == *b;
  }
};
template <typename V>
using IndexMap =
    std::unordered_map<const MetadataIndex*, V, IndexPtrHash, IndexPtrEq>;

size_t CountItems(const std::vector<SavePlan>& plans) {
  size_t n = 0;
  for (const SavePlan& plan : plans) n += plan.items.size();
  return n;
}

Status CheckPlansAgree(const std::vector<SavePlan>& plans) {
  // Keyed by views of the items' fqns, which outlive the map; the values
  // point at the items, never copy their sizes.
  std::unordered_map<std::string_view, FirstOfFqn> firsts;
  IndexMap<const WriteItem*> seen;
  seen.reserve(CountItems(plans));
  for (size_t rank = 0; rank < plans.size(); ++rank) {
    for (const WriteItem& item : plans[rank].items) {
      const std::string& fqn = item.index.fqn;
      const bool is_bytes = IsBytes(item);
      if (!is_bytes && !item.tensor_data) {
        return Status::InvalidArgument(
            "item " + util::Quote(item.index.ToString()) + " on rank " +
            std::to_string(rank) + " is a tensor without tensor_data");
      }
      auto [it, inserted] = firsts.try_emplace(fqn, FirstOfFqn{rank, &item});
      if (!inserted) {
        const WriteItem& first = *it->second.item;
        const size_t first_rank = it->second.rank;
        auto ranks = [&](const std::string& a, const std::string& b) {
          return a + " on rank " + std::to_string(first_rank) + " but " + b +
                 " on rank " + std::to_string(rank);
        };
        if (IsBytes(first) != is_bytes) {
          return Status::InvalidArgument(
              "item " + util::Quote(fqn) + " is " +
              ranks(KindName(first), KindName(item)));
        }
        if (is_bytes) {
          // Bytes have no dtype or size to disagree on.
        } else if (first.tensor_data->properties.dtype !=
                   item.tensor_data->properties.dtype) {
          return Status::InvalidArgument(
              "item " + util::Quote(fqn) + " has dtype " +
              ranks(
                  std::string(DTypeName(first.tensor_data->properties.dtype)),
                  std::string(DTypeName(item.tensor_data->properties.dtype))));
        } else if (first.tensor_data->size != item.tensor_data->size) {
          return Status::InvalidArgument(
              "item " + util::Quote(fqn) + " has global size " +
              ranks(util::ShapeString(first.tensor_data->size),
                    util::ShapeString(item.tensor_data->size)));
        }
      }
      auto [dup, fresh] = seen.try_emplace(&item.index, &item);
      if (!fresh && !is_bytes &&
          !(dup->second->tensor_data->chunk == item.tensor_data->chunk)) {
        return Status::InvalidArgument(
            "item " + util::Quote(item.index.ToString()) +
            " is planned with different chunk sizes " +
            util::ShapeString(dup->second->tensor_data->chunk.sizes) + " and " +
            util::ShapeString(item.tensor_data->chunk.sizes));
      }
    }
  }
  return Status::OK();
}

// Per index: the first and last rank planning it, how many do, and the
// one chosen to write it.
struct Planned {
  int first = -1;
  int last = -1;
  int count = 0;
  int owner = -1;
};

// Lists in `planned` the ranks planning each index, and in `order` the
// indices in first-seen order. InvalidArgument for an index a rank plans
// twice or, without `dedup`, that several ranks plan. Returns whether any
// index is planned by several ranks.
Result<bool> ListPlanned(const std::vector<SavePlan>& plans, bool dedup,
                         IndexMap<Planned>* planned,
                         std::vector<const WriteItem*>* order) {
  planned->reserve(CountItems(plans));
  bool replicated = false;
  for (size_t rank = 0; rank < plans.size(); ++rank) {
    const int r = static_cast<int>(rank);
    for (const WriteItem& item : plans[rank].items) {
      Planned& p = (*planned)[&item.index];
      if (p.count == 0) {
        order->push_back(&item);
        p.first = r;
      } else if (p.last == r) {
        return Status::InvalidArgument(
            "item " + util::Quote(item.index.ToString()) +
            " appears twice in the plan of rank " + std::to_string(rank));
      } else if (!dedup) {
        return Status::InvalidArgument(
            "item " + util::Quote(item.index.ToString()) +
            " is planned by ranks " + std::to_string(p.first) + " and " +
            std::to_string(rank) +
            "; enable dedup_replicated to write it once");
      }
      replicated = replicated || p.count > 0;
      p.last = r;
      ++p.count;
    }
  }
  return replicated;
}

// Sets each index's owner: of the ranks planning it, the one with the
// fewest bytes planned so far, visiting indices in `order`.
void ChooseOwners(const std::vector<SavePlan>& plans,
                  const std::vector<const WriteItem*>& order,
                  IndexMap<Planned>* planned) {
  // The ranks planning each replicated index, ascending.
  IndexMap<std::vector<int>> ranks_of;
  for (size_t rank = 0; rank < plans.size(); ++rank) {
    for (const WriteItem& item : plans[rank].items) {
      if (planned->find(&item.index)->second.count > 1) {
        ranks_of[&item.index].push_back(static_cast<int>(rank));
      }
    }
  }
  std::vector<uint64_t> planned_bytes(plans.size(), 0);
  for (const WriteItem* item : order) {
    Planned& p = planned->find(&item->index)->second;
    int pick = p.first;
    if (p.count > 1) {
      for (int r : ranks_of.find(&item->index)->second) {
        if (planned_bytes[r] < planned_bytes[pick]) pick = r;
      }
    }
    const uint64_t size = item->TensorStorageSize();
    planned_bytes[pick] += size == 0 ? 1 : size;
    p.owner = pick;
  }
}

// The plans with only the items each rank owns, moved out of `plans`.
std::vector<SavePlan> KeepOwned(std::vector<SavePlan>* plans,
                                const IndexMap<Planned>& planned) {
  // Which items each rank keeps, decided before any item moves: the map's
  // keys point into the items.
  std::vector<std::vector<bool>> keep(plans->size());
  for (size_t rank = 0; rank < plans->size(); ++rank) {
    for (const WriteItem& item : (*plans)[rank].items) {
      keep[rank].push_back(planned.find(&item.index)->second.owner ==
                           static_cast<int>(rank));
    }
  }
  std::vector<SavePlan> out(plans->size());
  for (size_t rank = 0; rank < plans->size(); ++rank) {
    SavePlan& plan = (*plans)[rank];
    out[rank].storage_data = std::move(plan.storage_data);
    out[rank].planner_data = std::move(plan.planner_data);
    out[rank].usable = plan.usable;
    for (size_t i = 0; i < plan.items.size(); ++i) {
      if (keep[rank][i]) out[rank].items.push_back(std::move(plan.items[i]));
    }
  }
  return out;
}

// DCP's dedup_save_plans: an index planned by several ranks is written by
// the one with the fewest bytes planned so far (ties go to the lowest rank),
// visiting indices in first-seen order. Items whose size is unknown (bytes)
// count as 1, as in DCP. Without dedup, a repeated index is an error.
Result<std::vector<SavePlan>> DedupPlans(std::vector<SavePlan> plans,
                                         bool dedup) {
  IndexMap<Planned> planned;
  std::vector<const WriteItem*> order;  // Indices in first-seen order.
  ROCKSDCP_ASSIGN_OR_RETURN(const bool replicated,
                            ListPlanned(plans, dedup, &planned, &order));
  if (!replicated) return plans;  // Every index has its one writer.
  ChooseOwners(plans, order, &planned);
  return KeepOwned(&plans, planned);
}

}  // namespace

struct DefaultSavePlanner::Rep {
  DefaultSavePlannerOptions options;
  const StateDict* state_dict = nullptr;
  std::optional<StorageMeta> storage_meta;
  bool is_coordinator = false;
};

DefaultSavePlanner::DefaultSavePlanner(DefaultSavePlannerOptions options)
    : rep_(std::make_unique<Rep>()) {
  rep_->options = options;
}

DefaultSavePlanner::~DefaultSavePlanner() = default;

Status DefaultSavePlanner::SetUpPlanner(
    const StateDict* state_dict, const std::optional<StorageMeta>& storage_meta,
    bool is_coordinator) {
  if (state_dict == nullptr) {
    return Status::InvalidArgument("SetUpPlanner: state_dict is null");
  }
  rep_->state_dict = state_dict;
  rep_->storage_meta = storage_meta;
  rep_->is_coordinator = is_coordinator;
  return Status::OK();
}

Result<SavePlan> DefaultSavePlanner::CreateLocalPlan() {
  if (rep_->state_dict == nullptr) {
    return Status::FailedPrecondition(
        "CreateLocalPlan called before SetUpPlanner");
  }
  SavePlan plan;
  for (const auto& [fqn, value] : *rep_->state_dict) {
    if (const auto* view = std::get_if<TensorView>(&value)) {
      ROCKSDCP_RETURN_IF_ERROR(view->Validate(fqn));
      plan.items.push_back(MakeTensorItem(
          WriteItemType::kTensor, fqn, std::vector<int64_t>(view->sizes.size()),
          view->sizes, view->dtype, view->sizes));
    } else if (const auto* st = std::get_if<ShardedTensor>(&value)) {
      ROCKSDCP_RETURN_IF_ERROR(ValidateShardedTensor(fqn, *st));
      for (const Shard& shard : st->local_shards) {
        plan.items.push_back(MakeTensorItem(WriteItemType::kShard, fqn,
                                            shard.offsets, shard.tensor.sizes,
                                            st->dtype, st->global_size));
      }
    } else {
      WriteItem item;
      item.index = MetadataIndex(fqn);
      item.type = WriteItemType::kByteIO;
      plan.items.push_back(std::move(item));
    }
  }
  return plan;
}

Result<GlobalSavePlan> DefaultSavePlanner::CreateGlobalPlan(
    std::vector<SavePlan> plans) {
  ROCKSDCP_RETURN_IF_ERROR(CheckPlansAgree(plans));
  ROCKSDCP_ASSIGN_OR_RETURN(
      std::vector<SavePlan> deduped,
      DedupPlans(std::move(plans), rep_->options.dedup_replicated));

  // create_default_global_save_plan: chunks are listed in rank order, then
  // plan order, and each item's index hint becomes its chunk's position so
  // that storage and loaders can find it without a search.
  GlobalSavePlan global;
  auto& md = global.metadata.state_dict_metadata;
  for (SavePlan& plan : deduped) {
    for (WriteItem& item : plan.items) {
      const std::string& fqn = item.index.fqn;
      if (item.type == WriteItemType::kByteIO) {
        md.emplace(fqn, BytesStorageMetadata{});
        continue;
      }
      TensorStorageMetadata empty;
      empty.properties = item.tensor_data->properties;
      empty.size = item.tensor_data->size;
      auto it = md.try_emplace(fqn, std::move(empty)).first;
      auto& tensor_md = std::get<TensorStorageMetadata>(it->second);
      item.index.index = static_cast<int32_t>(tensor_md.chunks.size());
      tensor_md.chunks.push_back(item.tensor_data->chunk);
    }
  }
  for (const auto& [fqn, value] : md) {
    if (const auto* tensor_md = std::get_if<TensorStorageMetadata>(&value)) {
      ROCKSDCP_RETURN_IF_ERROR(ValidateChunks(fqn, *tensor_md));
    }
  }
  global.plans = std::move(deduped);
  return global;
}

Result<SavePlan> DefaultSavePlanner::FinishPlan(SavePlan central_plan) {
  return central_plan;
}

Result<ResolvedData> DefaultSavePlanner::ResolveData(const WriteItem& item) {
  // Runs on storage I/O threads concurrently: only reads the state dict.
  if (rep_->state_dict == nullptr) {
    return Status::FailedPrecondition("ResolveData called before SetUpPlanner");
  }
  const std::string& fqn = item.index.fqn;
  auto it = rep_->state_dict->find(fqn);
  if (it == rep_->state_dict->end()) {
    return Status::NotFound("state dict has no item " + util::Quote(fqn));
  }
  const StateValue& value = it->second;
  switch (item.type) {
    case WriteItemType::kTensor:
      if (const auto* view = std::get_if<TensorView>(&value)) {
        return ResolvedData(*view);
      }
      break;
    case WriteItemType::kShard:
      if (const auto* st = std::get_if<ShardedTensor>(&value)) {
        if (!item.index.offset) {
          return Status::InvalidArgument("shard item " + util::Quote(fqn) +
                                         " has no offset");
        }
        for (const Shard& shard : st->local_shards) {
          if (shard.offsets == *item.index.offset) {
            return ResolvedData(shard.tensor);
          }
        }
        return Status::NotFound("state dict has no shard " +
                                util::Quote(item.index.ToString()));
      }
      break;
    case WriteItemType::kByteIO:
      if (const auto* bytes = std::get_if<std::string>(&value)) {
        return ResolvedData(std::string_view(*bytes));
      }
      break;
  }
  return Status::InvalidArgument("item " + util::Quote(fqn) +
                                 " is planned as a different kind of value "
                                 "than the state dict holds");
}

}  // namespace rocksdcp
