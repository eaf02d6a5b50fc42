#include "format/plan_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <utility>

#include "format/fb_util.h"
#include "schema/plans_generated.h"

namespace rocksdcp::format {

namespace {

constexpr uint16_t kSavePlanFormatVersion = 1;
constexpr uint16_t kWriteResultsFormatVersion = 1;
constexpr uint16_t kLoadPlanFormatVersion = 1;
constexpr uint16_t kStepOutcomeFormatVersion = 1;

// A plan item is at most five tables (WriteItem, its MetadataIndex,
// TensorWriteData, ChunkStorageMetadata, TensorProperties), so a plan under
// 2 GiB holds far fewer. The cap bounds the work a crafted message can cause
// by pointing many offsets at one shared subtree.
constexpr flatbuffers::uoffset_t kMaxTables = 1u << 27;

// Start every error message of their value.
constexpr std::string_view kSavePlan = "save plan";
constexpr std::string_view kLoadPlan = "load plan";
constexpr std::string_view kWriteResults = "write results";
constexpr std::string_view kStepOutcome = "step outcome";

Status Bad(std::string_view what, const std::string& why) {
  return Status::Corruption(std::string(what) + ": " + why);
}

Status CheckFormatVersion(std::string_view what, uint16_t version,
                          uint16_t known) {
  if (version == known) return Status::OK();
  return Bad(what, "unsupported format_version " + std::to_string(version));
}

// "item 3", the start of the subject of an item's errors.
std::string Item(size_t i) { return "item " + std::to_string(i); }

// ---- SavePlan ----

flatbuffers::Offset<fb::WriteItem> CreateWriteItem(
    flatbuffers::FlatBufferBuilder& fbb, const WriteItem& item) {
  const auto index = CreateIndex(fbb, item.index);
  flatbuffers::Offset<fb::TensorWriteData> tensor_data;  // Null: absent.
  if (item.tensor_data) {
    const TensorWriteData& t = *item.tensor_data;
    const auto chunk = CreateChunk(fbb, t.chunk);
    const auto properties = CreateProperties(fbb, t.properties);
    const auto size = fbb.CreateVector(t.size);
    tensor_data = fb::CreateTensorWriteData(fbb, chunk, properties, size);
  }
  return fb::CreateWriteItem(fbb, index, static_cast<uint8_t>(item.type),
                             tensor_data);
}

// Errors continue a sentence about the item (see fb_util.h).
Result<TensorWriteData> DecodeTensorWriteData(const fb::TensorWriteData& t) {
  TensorWriteData out;
  if (t.properties() == nullptr) {
    return Status::Corruption("has no properties");
  }
  ROCKSDCP_ASSIGN_OR_RETURN(out.properties, DecodeProperties(*t.properties()));
  if (t.size() == nullptr) return Status::Corruption("has no size");
  out.size = ReadLongs(t.size());
  for (int64_t s : out.size) {
    if (s < 0) return Status::Corruption("has a negative size");
  }
  if (t.chunk() == nullptr) return Status::Corruption("has no chunk");
  out.chunk = DecodeChunk(*t.chunk());
  ROCKSDCP_RETURN_IF_ERROR(CheckChunkShape(out.chunk));
  return out;
}

Result<WriteItem> DecodeWriteItem(const fb::WriteItem& item, size_t i) {
  WriteItem out;
  // Required, so the Verifier checked it is there.
  Result<MetadataIndex> index = DecodeIndex(*item.index());
  if (!index.ok()) return Corrupt(kSavePlan, Item(i), index.status());
  out.index = std::move(index).value();
  // Built only on failure: a plan can hold millions of items.
  auto subject = [&] { return Item(i) + " " + QuotedIndex(out.index); };

  switch (item.type()) {
    case static_cast<uint8_t>(WriteItemType::kTensor):
    case static_cast<uint8_t>(WriteItemType::kShard):
    case static_cast<uint8_t>(WriteItemType::kByteIO):
      out.type = static_cast<WriteItemType>(item.type());
      break;
    default:
      return Bad(kSavePlan, subject() + " has unknown type " +
                                std::to_string(item.type()));
  }
  if (item.tensor_data() != nullptr) {
    Result<TensorWriteData> data = DecodeTensorWriteData(*item.tensor_data());
    if (!data.ok()) return Corrupt(kSavePlan, subject(), data.status());
    out.tensor_data = std::move(data).value();
  } else if (out.type != WriteItemType::kByteIO) {
    // The writer sizes and copies a tensor item from its tensor_data.
    return Bad(kSavePlan, subject() + " is a tensor without tensor_data");
  }
  return out;
}

// ---- LoadPlan ----

flatbuffers::Offset<fb::ReadItem> CreateReadItem(
    flatbuffers::FlatBufferBuilder& fbb, const ReadItem& item) {
  const auto dest_index = CreateIndex(fbb, item.dest_index);
  const auto dest_offsets = fbb.CreateVector(item.dest_offsets);
  const auto storage_index = CreateIndex(fbb, item.storage_index);
  const auto storage_offsets = fbb.CreateVector(item.storage_offsets);
  const auto lengths = fbb.CreateVector(item.lengths);
  return fb::CreateReadItem(fbb, static_cast<uint8_t>(item.type), dest_index,
                            dest_offsets, storage_index, storage_offsets,
                            lengths);
}

Result<ReadItem> DecodeReadItem(const fb::ReadItem& item, size_t i) {
  ReadItem out;
  // Both indexes are required, so the Verifier checked they are there.
  Result<MetadataIndex> dest = DecodeIndex(*item.dest_index());
  if (!dest.ok()) {
    return Corrupt(kLoadPlan, Item(i) + " dest_index", dest.status());
  }
  out.dest_index = std::move(dest).value();
  Result<MetadataIndex> storage = DecodeIndex(*item.storage_index());
  if (!storage.ok()) {
    return Corrupt(kLoadPlan, Item(i) + " storage_index", storage.status());
  }
  out.storage_index = std::move(storage).value();
  auto subject = [&] { return Item(i) + " " + QuotedIndex(out.dest_index); };

  switch (item.type()) {
    case static_cast<uint8_t>(LoadItemType::kTensor):
    case static_cast<uint8_t>(LoadItemType::kByteIO):
      out.type = static_cast<LoadItemType>(item.type());
      break;
    default:
      return Bad(kLoadPlan, subject() + " has unknown type " +
                                std::to_string(item.type()));
  }

  // A reader copies the box [storage_offsets, +lengths) to [dest_offsets,
  // +lengths), one entry per dimension.
  out.dest_offsets = ReadLongs(item.dest_offsets());
  out.storage_offsets = ReadLongs(item.storage_offsets());
  out.lengths = ReadLongs(item.lengths());
  const size_t rank = out.lengths.size();
  if (out.dest_offsets.size() != rank || out.storage_offsets.size() != rank) {
    return Bad(kLoadPlan, subject() + " has dest_offsets of rank " +
                              std::to_string(out.dest_offsets.size()) +
                              ", storage_offsets of rank " +
                              std::to_string(out.storage_offsets.size()) +
                              " and lengths of rank " + std::to_string(rank));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (out.dest_offsets[d] < 0 || out.storage_offsets[d] < 0 ||
        out.lengths[d] < 0) {
      return Bad(kLoadPlan,
                 subject() + " has a negative offset or length in dimension " +
                     std::to_string(d));
    }
  }
  return out;
}

}  // namespace

// ---- SavePlan ----

std::string EncodeSavePlan(const SavePlan& plan) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::WriteItem>> items;
  items.reserve(plan.items.size());
  for (const WriteItem& item : plan.items) {
    items.push_back(CreateWriteItem(fbb, item));
  }
  const auto item_vector = fbb.CreateVector(items);
  const auto storage_data = CreateBytes(fbb, plan.storage_data);
  const auto planner_data = CreateBytes(fbb, plan.planner_data);
  fbb.Finish(fb::CreateSavePlan(fbb, kSavePlanFormatVersion, item_vector,
                                storage_data, planner_data, plan.usable),
             kSavePlanIdentifier);
  return Finished(fbb);
}

Result<SavePlan> DecodeSavePlan(std::string_view value) {
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::SavePlan* p,
      VerifiedRoot<fb::SavePlan>(aligned, kSavePlanIdentifier, kSavePlan,
                                 kMaxTables));
  ROCKSDCP_RETURN_IF_ERROR(CheckFormatVersion(kSavePlan, p->format_version(),
                                              kSavePlanFormatVersion));
  SavePlan out;
  if (p->items() != nullptr) {
    out.items.reserve(p->items()->size());
    for (const fb::WriteItem* item : *p->items()) {
      ROCKSDCP_ASSIGN_OR_RETURN(WriteItem decoded,
                                DecodeWriteItem(*item, out.items.size()));
      out.items.push_back(std::move(decoded));
    }
  }
  out.storage_data = ReadBytes(p->storage_data());
  out.planner_data = ReadBytes(p->planner_data());
  out.usable = p->usable();
  return out;
}

// ---- LoadPlan ----

std::string EncodeLoadPlan(const LoadPlan& plan) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::ReadItem>> items;
  items.reserve(plan.items.size());
  for (const ReadItem& item : plan.items) {
    items.push_back(CreateReadItem(fbb, item));
  }
  const auto item_vector = fbb.CreateVector(items);
  const auto storage_data = CreateBytes(fbb, plan.storage_data);
  const auto planner_data = CreateBytes(fbb, plan.planner_data);
  fbb.Finish(fb::CreateLoadPlan(fbb, kLoadPlanFormatVersion, item_vector,
                                storage_data, planner_data),
             kLoadPlanIdentifier);
  return Finished(fbb);
}

Result<LoadPlan> DecodeLoadPlan(std::string_view value) {
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::LoadPlan* p,
      VerifiedRoot<fb::LoadPlan>(aligned, kLoadPlanIdentifier, kLoadPlan,
                                 kMaxTables));
  ROCKSDCP_RETURN_IF_ERROR(CheckFormatVersion(kLoadPlan, p->format_version(),
                                              kLoadPlanFormatVersion));
  LoadPlan out;
  if (p->items() != nullptr) {
    out.items.reserve(p->items()->size());
    for (const fb::ReadItem* item : *p->items()) {
      ROCKSDCP_ASSIGN_OR_RETURN(ReadItem decoded,
                                DecodeReadItem(*item, out.items.size()));
      out.items.push_back(std::move(decoded));
    }
  }
  out.storage_data = ReadBytes(p->storage_data());
  out.planner_data = ReadBytes(p->planner_data());
  return out;
}

// ---- WriteResults ----

std::string EncodeWriteResults(const std::vector<WriteResult>& results) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::WriteResult>> entries;
  entries.reserve(results.size());
  for (const WriteResult& result : results) {
    const auto index = CreateIndex(fbb, result.index);
    const auto storage_data = CreateBytes(fbb, result.storage_data);
    entries.push_back(
        fb::CreateWriteResult(fbb, index, result.size_in_bytes, storage_data));
  }
  const auto entry_vector = fbb.CreateVector(entries);
  fbb.Finish(
      fb::CreateWriteResultList(fbb, kWriteResultsFormatVersion, entry_vector),
      kWriteResultsIdentifier);
  return Finished(fbb);
}

Result<std::vector<WriteResult>> DecodeWriteResults(std::string_view value) {
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(
      const fb::WriteResultList* list,
      VerifiedRoot<fb::WriteResultList>(aligned, kWriteResultsIdentifier,
                                        kWriteResults, kMaxTables));
  ROCKSDCP_RETURN_IF_ERROR(CheckFormatVersion(
      kWriteResults, list->format_version(), kWriteResultsFormatVersion));
  std::vector<WriteResult> out;
  if (list->results() != nullptr) {
    out.reserve(list->results()->size());
    for (const fb::WriteResult* r : *list->results()) {
      WriteResult result;
      // Required, so the Verifier checked it is there.
      Result<MetadataIndex> index = DecodeIndex(*r->index());
      if (!index.ok()) {
        return Corrupt(kWriteResults, "result " + std::to_string(out.size()),
                       index.status());
      }
      result.index = std::move(index).value();
      result.size_in_bytes = r->size_in_bytes();
      result.storage_data = ReadBytes(r->storage_data());
      out.push_back(std::move(result));
    }
  }
  return out;
}

// ---- StepOutcome ----

std::string EncodeStepOutcome(const Status& status, std::string_view payload) {
  const bool ok = status.ok();
  // Sized so that a large payload (a plan) is copied in once, without the
  // builder growing and copying it again.
  flatbuffers::FlatBufferBuilder fbb(
      (ok ? payload.size() : status.message().size()) + 128);
  flatbuffers::Offset<flatbuffers::String> message;  // Null: absent.
  if (!ok && !status.message().empty()) {
    message = fbb.CreateString(status.message());
  }
  flatbuffers::Offset<ByteVector> payload_vector;  // Null: absent.
  if (ok) payload_vector = CreateBytes(fbb, payload);
  fbb.Finish(fb::CreateStepOutcome(fbb, kStepOutcomeFormatVersion,
                                   static_cast<int32_t>(status.code()), message,
                                   payload_vector),
             kStepOutcomeIdentifier);
  return Finished(fbb);
}

Result<StepOutcome> DecodeStepOutcome(std::string_view value) {
  const AlignedBytes aligned(value);
  ROCKSDCP_ASSIGN_OR_RETURN(const fb::StepOutcome* o,
                            VerifiedRoot<fb::StepOutcome>(
                                aligned, kStepOutcomeIdentifier, kStepOutcome));
  ROCKSDCP_RETURN_IF_ERROR(CheckFormatVersion(kStepOutcome, o->format_version(),
                                              kStepOutcomeFormatVersion));
  const int32_t code = o->code();
  if (code < static_cast<int32_t>(StatusCode::kOk) ||
      code > static_cast<int32_t>(kLastStatusCode)) {
    return Bad(kStepOutcome, "unknown status code " + std::to_string(code));
  }
  const std::string_view message = o->message() != nullptr
                                       ? o->message()->string_view()
                                       : std::string_view();
  StepOutcome out;
  if (code == static_cast<int32_t>(StatusCode::kOk)) {
    if (!message.empty()) return Bad(kStepOutcome, "OK outcome has a message");
    out.payload = ReadBytes(o->payload());
    return out;
  }
  if (o->payload() != nullptr && o->payload()->size() != 0) {
    return Bad(kStepOutcome, "failed outcome has a payload");
  }
  out.status = Status(static_cast<StatusCode>(code), std::string(message));
  return out;
}

}  // namespace rocksdcp::format
