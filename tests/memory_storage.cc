#include "memory_storage.h"

#include <atomic>
#include <cstdio>
#include <utility>

#include "util/ready_future.h"
#include "util/text.h"

namespace rocksdcp::testing {

namespace {

// save_id and load_id must be fresh for each Reset / read, across every
// storage of the process.
std::string FreshId(std::string_view kind) {
  static std::atomic<uint64_t> next{0};
  return std::string(kind) + "-" + std::to_string(next.fetch_add(1) + 1);
}

bool BoxWithin(const std::vector<int64_t>& offsets,
               const std::vector<int64_t>& lengths,
               const std::vector<int64_t>& sizes) {
  if (offsets.size() != sizes.size() || lengths.size() != sizes.size()) {
    return false;
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (offsets[d] < 0 || lengths[d] < 0 ||
        offsets[d] > sizes[d] - lengths[d]) {
      return false;
    }
  }
  return true;
}

}  // namespace

// ---- MemoryStorage ----

std::unique_ptr<MemoryStorageWriter> MemoryStorage::NewWriter(
    const MemoryWriterOptions& options) {
  return std::make_unique<MemoryStorageWriter>(this, options);
}

std::unique_ptr<MemoryStorageReader> MemoryStorage::NewReader() {
  return std::make_unique<MemoryStorageReader>(this);
}

Status MemoryStorage::ValidateCheckpointId(std::string_view checkpoint_id) {
  if (checkpoint_id.empty()) {
    return Status::InvalidArgument("checkpoint id is empty");
  }
  if (checkpoint_id.size() > 128) {
    return Status::InvalidArgument("checkpoint id is " +
                                   std::to_string(checkpoint_id.size()) +
                                   " bytes long; the limit is 128");
  }
  for (size_t i = 0; i < checkpoint_id.size(); ++i) {
    const auto c = static_cast<unsigned char>(checkpoint_id[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", c);
      return Status::InvalidArgument("checkpoint id has control byte " +
                                     std::string(hex) + " at position " +
                                     std::to_string(i));
    }
  }
  if (checkpoint_id == "default") {
    return Status::InvalidArgument(
        "checkpoint id 'default' is reserved (RocksDB's own column family)");
  }
  return Status::OK();
}

std::vector<std::string> MemoryStorage::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, checkpoint] : committed_) ids.push_back(id);
  return ids;
}

std::string MemoryStorage::Stage(MemoryBlob blob) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string name = "blob-" + std::to_string(++next_blob_);
  staged_.emplace(name, std::move(blob));
  return name;
}

void MemoryStorage::Unstage(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& name : names) staged_.erase(name);
}

Status MemoryStorage::BeginSave(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!saving_.insert(id).second) {
    return Status::Busy("checkpoint " + util::Quote(id) +
                        " is being saved by another writer");
  }
  return Status::OK();
}

void MemoryStorage::EndSave(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  saving_.erase(id);
}

Result<std::shared_ptr<const MemoryCheckpoint>> MemoryStorage::Lookup(
    const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = committed_.find(id);
  if (it == committed_.end()) {
    return Status::NotFound("checkpoint " + util::Quote(id) + " not found");
  }
  return it->second;
}

Status MemoryStorage::CheckNotCommitted(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (committed_.count(id)) {
    return Status::AlreadyExists("checkpoint " + util::Quote(id) +
                                 " already exists; save it with overwrite to "
                                 "replace it");
  }
  return Status::OK();
}

Status MemoryStorage::Commit(
    const std::string& id, bool overwrite, Metadata metadata,
    const std::vector<std::vector<WriteResult>>& results) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!overwrite && committed_.count(id)) {
    return Status::AlreadyExists("checkpoint " + util::Quote(id) +
                                 " already exists; save it with overwrite to "
                                 "replace it");
  }
  // Check everything before moving anything, so a failed commit leaves the
  // staged blobs and the committed checkpoints as they were.
  std::map<MetadataIndex, std::string> names;
  for (const auto& rank_results : results) {
    for (const WriteResult& result : rank_results) {
      if (staged_.count(result.storage_data) == 0) {
        return Status::NotFound(
            "write result for " + util::Quote(result.index.ToString()) +
            " names no staged blob " + util::Quote(result.storage_data));
      }
      if (!names.emplace(result.index, result.storage_data).second) {
        return Status::InvalidArgument("item " +
                                       util::Quote(result.index.ToString()) +
                                       " was written twice");
      }
    }
  }
  for (const auto& [fqn, item] : metadata.state_dict_metadata) {
    std::vector<MetadataIndex> wanted;
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&item)) {
      for (const ChunkStorageMetadata& chunk : tensor->chunks) {
        wanted.emplace_back(fqn, chunk.offsets);
      }
    } else {
      wanted.emplace_back(fqn);
    }
    for (const MetadataIndex& index : wanted) {
      if (names.count(index) == 0) {
        return Status::InvalidArgument("metadata names " +
                                       util::Quote(index.ToString()) +
                                       ", which no rank wrote");
      }
    }
  }
  auto checkpoint = std::make_shared<MemoryCheckpoint>();
  checkpoint->metadata = std::move(metadata);
  for (const auto& [index, name] : names) {
    auto node = staged_.extract(name);
    checkpoint->blobs.emplace(index, std::move(node.mapped()));
  }
  committed_[id] = std::move(checkpoint);
  return Status::OK();
}

// ---- MemoryStorageWriter ----

MemoryStorageWriter::MemoryStorageWriter(MemoryStorage* storage,
                                         MemoryWriterOptions options)
    : storage_(storage), options_(options) {}

MemoryStorageWriter::~MemoryStorageWriter() { Abandon(); }

void MemoryStorageWriter::Abandon() {
  storage_->Unstage(staged_);
  staged_.clear();
  if (saving_) storage_->EndSave(id_);
  saving_ = false;
  set_up_ = false;
}

Status MemoryStorageWriter::Reset(std::string_view checkpoint_id) {
  Abandon();
  id_.clear();
  ROCKSDCP_RETURN_IF_ERROR(ValidateCheckpointId(checkpoint_id));
  std::string id(checkpoint_id);
  if (!options_.overwrite) {
    ROCKSDCP_RETURN_IF_ERROR(storage_->CheckNotCommitted(id));
  }
  id_ = std::move(id);
  save_id_ = FreshId("memory-save");
  return Status::OK();
}

Status MemoryStorageWriter::SetUpStorageWriter(bool is_coordinator, int rank,
                                               int world_size) {
  if (id_.empty()) {
    return Status::FailedPrecondition("SetUpStorageWriter called before Reset");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status::InvalidArgument("rank " + std::to_string(rank) +
                                   " is not in a world of size " +
                                   std::to_string(world_size));
  }
  if (is_coordinator && !saving_) {
    ROCKSDCP_RETURN_IF_ERROR(storage_->BeginSave(id_));
    saving_ = true;
  }
  is_coordinator_ = is_coordinator;
  set_up_ = true;
  return Status::OK();
}

Result<SavePlan> MemoryStorageWriter::PrepareLocalPlan(SavePlan plan) {
  return plan;
}

Result<std::vector<SavePlan>> MemoryStorageWriter::PrepareGlobalPlan(
    std::vector<SavePlan> plans) {
  return plans;
}

std::future<Result<std::vector<WriteResult>>> MemoryStorageWriter::WriteData(
    const SavePlan& plan, SavePlanner& planner) {
  return util::ReadyFuture(DoWriteData(plan, planner));
}

Result<std::vector<WriteResult>> MemoryStorageWriter::DoWriteData(
    const SavePlan& plan, SavePlanner& planner) {
  if (!set_up_) {
    return Status::FailedPrecondition(
        "WriteData called before SetUpStorageWriter");
  }
  std::vector<WriteResult> results;
  for (const WriteItem& item : plan.items) {
    ROCKSDCP_ASSIGN_OR_RETURN(ResolvedData data, planner.ResolveData(item));
    MemoryBlob blob;
    if (const auto* view = std::get_if<TensorView>(&data)) {
      if (item.type == WriteItemType::kByteIO || !item.tensor_data) {
        return Status::InvalidArgument("bytes item " +
                                       util::Quote(item.index.ToString()) +
                                       " resolved to a tensor");
      }
      ROCKSDCP_RETURN_IF_ERROR(view->Validate(item.index.fqn));
      const TensorWriteData& td = *item.tensor_data;
      if (view->dtype != td.properties.dtype || view->sizes != td.chunk.sizes) {
        return Status::InvalidArgument(
            "item " + util::Quote(item.index.ToString()) + " is planned as " +
            std::string(DTypeName(td.properties.dtype)) +
            util::ShapeString(td.chunk.sizes) + " but resolved to " +
            std::string(DTypeName(view->dtype)) +
            util::ShapeString(view->sizes));
      }
      blob.is_tensor = true;
      blob.dtype = view->dtype;
      blob.sizes = view->sizes;
      blob.bytes.resize(view->nbytes());
      CopyTensor(*view, TensorView::Contiguous(view->dtype, view->sizes,
                                               blob.bytes.data()));
    } else {
      if (item.type != WriteItemType::kByteIO) {
        return Status::InvalidArgument("tensor item " +
                                       util::Quote(item.index.ToString()) +
                                       " resolved to bytes");
      }
      blob.bytes = std::string(std::get<std::string_view>(data));
    }
    // The blob owns a copy: the planner may reuse what it lent us.
    planner.ReleaseData(item);
    WriteResult result;
    result.index = item.index;
    result.size_in_bytes = blob.bytes.size();
    result.storage_data = storage_->Stage(std::move(blob));
    staged_.push_back(result.storage_data);
    results.push_back(std::move(result));
  }
  return results;
}

Status MemoryStorageWriter::Finish(
    Metadata* metadata, const std::vector<std::vector<WriteResult>>& results) {
  if (!set_up_ || !is_coordinator_) {
    return Status::FailedPrecondition(
        "Finish is for the coordinator, after SetUpStorageWriter");
  }
  metadata->storage_data.clear();
  for (const auto& rank_results : results) {
    for (const WriteResult& result : rank_results) {
      metadata->storage_data[result.index] = result.storage_data;
    }
  }
  metadata->storage_meta = GetStorageMeta();
  ROCKSDCP_RETURN_IF_ERROR(
      storage_->Commit(id_, options_.overwrite, *metadata, results));
  // The blobs now belong to the committed checkpoint, whichever rank
  // staged them.
  staged_.clear();
  Abandon();
  return Status::OK();
}

std::optional<StorageMeta> MemoryStorageWriter::GetStorageMeta() {
  if (id_.empty()) return std::nullopt;
  StorageMeta meta;
  meta.checkpoint_id = id_;
  meta.save_id = save_id_;
  return meta;
}

// ---- MemoryStorageReader ----

MemoryStorageReader::MemoryStorageReader(MemoryStorage* storage)
    : storage_(storage) {}

Status MemoryStorageReader::Reset(std::string_view checkpoint_id) {
  id_.clear();
  checkpoint_.reset();
  ROCKSDCP_RETURN_IF_ERROR(ValidateCheckpointId(checkpoint_id));
  id_ = std::string(checkpoint_id);
  return Status::OK();
}

Result<Metadata> MemoryStorageReader::ReadMetadata() {
  if (id_.empty()) {
    return Status::FailedPrecondition("ReadMetadata called before Reset");
  }
  ROCKSDCP_ASSIGN_OR_RETURN(checkpoint_, storage_->Lookup(id_));
  Metadata metadata = checkpoint_->metadata;
  if (!metadata.storage_meta) metadata.storage_meta.emplace();
  metadata.storage_meta->load_id = FreshId("memory-load");
  return metadata;
}

Status MemoryStorageReader::SetUpStorageReader(const Metadata& metadata,
                                               bool is_coordinator, int rank,
                                               int world_size) {
  if (checkpoint_ == nullptr) {
    return Status::FailedPrecondition(
        "SetUpStorageReader called before ReadMetadata");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status::InvalidArgument("rank " + std::to_string(rank) +
                                   " is not in a world of size " +
                                   std::to_string(world_size));
  }
  return Status::OK();
}

Result<LoadPlan> MemoryStorageReader::PrepareLocalPlan(LoadPlan plan) {
  return plan;
}

Result<std::vector<LoadPlan>> MemoryStorageReader::PrepareGlobalPlan(
    std::vector<LoadPlan> plans) {
  return plans;
}

std::future<Status> MemoryStorageReader::ReadData(const LoadPlan& plan,
                                                  LoadPlanner& planner) {
  return util::ReadyFuture(DoReadData(plan, planner));
}

Status MemoryStorageReader::DoReadData(const LoadPlan& plan,
                                       LoadPlanner& planner) {
  if (checkpoint_ == nullptr) {
    return Status::FailedPrecondition("ReadData called before ReadMetadata");
  }
  for (const ReadItem& item : plan.items) {
    auto it = checkpoint_->blobs.find(item.storage_index);
    if (it == checkpoint_->blobs.end()) {
      return Status::NotFound("checkpoint " + util::Quote(id_) +
                              " has no item " +
                              util::Quote(item.storage_index.ToString()));
    }
    const MemoryBlob& blob = it->second;
    if (item.type == LoadItemType::kByteIO) {
      if (blob.is_tensor) {
        return Status::InvalidArgument(
            "item " + util::Quote(item.storage_index.ToString()) +
            " is a tensor in the checkpoint, but the plan reads bytes");
      }
      ROCKSDCP_RETURN_IF_ERROR(planner.LoadBytes(item, blob.bytes));
      continue;
    }
    if (!blob.is_tensor) {
      return Status::InvalidArgument(
          "item " + util::Quote(item.storage_index.ToString()) +
          " is bytes in the checkpoint, but the plan reads a tensor");
    }
    if (!BoxWithin(item.storage_offsets, item.lengths, blob.sizes)) {
      return Status::InvalidArgument(
          "read of " + util::Quote(item.storage_index.ToString()) + " at " +
          util::ShapeString(item.storage_offsets) + " of size " +
          util::ShapeString(item.lengths) +
          " lies outside the saved chunk of size " +
          util::ShapeString(blob.sizes));
    }
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView dest, planner.ResolveTensor(item));
    if (dest.dtype != blob.dtype || dest.sizes != item.lengths) {
      return Status::InvalidArgument(
          "item " + util::Quote(item.dest_index.ToString()) +
          ": destination is " + std::string(DTypeName(dest.dtype)) +
          util::ShapeString(dest.sizes) + ", checkpoint box is " +
          std::string(DTypeName(blob.dtype)) + util::ShapeString(item.lengths));
    }
    // The source is only read; TensorView has no const flavour.
    TensorView chunk = TensorView::Contiguous(
        blob.dtype, blob.sizes, const_cast<char*>(blob.bytes.data()));
    CopyTensor(chunk.Narrow(item.storage_offsets, item.lengths), dest);
    ROCKSDCP_RETURN_IF_ERROR(planner.CommitTensor(item, dest));
  }
  return Status::OK();
}

}  // namespace rocksdcp::testing
