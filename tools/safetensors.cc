#include "safetensors.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <variant>

#include "base64.h"
#include "json.h"
#include "tensor_stream.h"

namespace rocksdcp::tools {
namespace {

// How often an import lets go of the file's pages it has read: one of the
// CLI's buffers (kImportMemoryLimit counts on it).
constexpr uint64_t kReleaseEveryBytes = kDefaultBufferBytes;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is written as in memory: little-endian hosts "
              "only");

// ---- Export ----

// Reads every byte item of the checkpoint in one load and writes them as
// the body of "__metadata__" (without braces) into *json, counting each
// into *import_memory.
Status ByteItemsJson(Store& store, const std::string& id, OpenCheckpoint& c,
                     const std::vector<std::string>& fqns, std::string* json,
                     ImportMemory* import_memory) {
  StateDict sd;
  for (const std::string& fqn : fqns) sd[fqn] = std::string();
  LoadOptions options;
  options.checkpoint_id = id;
  // Every one must be there: a byte item gone (the checkpoint replaced
  // since its metadata was read) fails, naming it, not an empty string.
  options.allow_partial_load = false;
  ROCKSDCP_RETURN_IF_ERROR(Load(&sd, *c.reader, options));
  JsonWriter base64_names;
  base64_names.BeginArray();
  bool any_base64 = false;
  for (auto& [fqn, value] : sd) {
    const std::string& bytes = std::get<std::string>(value);
    if (!json->empty()) *json += ',';
    AppendJsonString(fqn, json);
    *json += ':';
    // Import counts the value as the header holds it.
    if (IsUtf8(bytes)) {
      AppendJsonString(bytes, json);
      import_memory->AddByteItem(fqn, bytes.size());
    } else {
      const std::string base64 = Base64Encode(bytes);
      AppendJsonString(base64, json);
      import_memory->AddByteItem(fqn, base64.size());
      base64_names.String(fqn);
      any_base64 = true;
    }
    value = std::string();  // Held once, in the header.
    if (json->size() > kMaxSafetensorsHeaderBytes) {
      return Status::InvalidArgument(
          Where(store, id) +
          ": byte items take the safetensors header past "
          "its limit of " +
          std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
    }
  }
  if (any_base64) {
    base64_names.EndArray();
    *json += ',';
    AppendJsonString(kBase64ItemsKey, json);
    *json += ':';
    AppendJsonString(base64_names.str(), json);
  }
  return Status::OK();
}

// What a checkpoint exports: its tensors, in the metadata's order, and
// its byte items.
struct ExportItems {
  std::vector<StreamItem> tensors;
  std::vector<std::string> byte_fqns;
  uint64_t tensor_bytes = 0;
};

// Checks that every item of `metadata` can be exported, before any is read.
Result<ExportItems> ExportableItems(const Metadata& metadata,
                                    const std::string& where) {
  ExportItems items;
  for (const auto& [fqn, smd] : metadata.state_dict_metadata) {
    const std::string item = where + ", item " + Quoted(fqn);
    if (!IsUtf8(fqn) || fqn == kSafetensorsMetadataKey) {
      return Status::InvalidArgument(
          item + ": not a name safetensors can hold (not UTF-8, or " +
          std::string(kSafetensorsMetadataKey) + ")");
    }
    const auto* md = std::get_if<TensorStorageMetadata>(&smd);
    if (md == nullptr) {
      if (fqn == kBase64ItemsKey) {
        return Status::InvalidArgument(
            item +
            ": a byte item of this name can't be exported: the name "
            "is the export's own \"__metadata__\" entry");
      }
      items.byte_fqns.push_back(fqn);
      continue;
    }
    if (md->size.size() > kMaxSafetensorsDims) {
      return Status::InvalidArgument(item + ": " +
                                     std::to_string(md->size.size()) +
                                     " dimensions; import reads at most " +
                                     std::to_string(kMaxSafetensorsDims));
    }
    if (!SafetensorsDTypeName(md->properties.dtype)) {
      return Status::InvalidArgument(
          item + ": dtype " + std::string(DTypeName(md->properties.dtype)) +
          " has no safetensors dtype");
    }
    const auto nbytes = TensorBytes(md->properties.dtype, md->size);
    if (!nbytes || __builtin_add_overflow(items.tensor_bytes, *nbytes,
                                          &items.tensor_bytes)) {
      return Status::Corruption(item + ": shape too large");
    }
    items.tensors.push_back(
        {.fqn = fqn, .dtype = md->properties.dtype, .size = md->size});
  }
  return items;
}

// The byte items' total, as their storage entries record it, bounds the
// header before any is read: a 6 GB pickled byte item is refused, not
// loaded. (Not the catalog's total: an entry's totals are checked by
// Verify only, and a load does not use them.)
Status CheckByteItemsFitHeader(const Metadata& metadata,
                               const std::vector<std::string>& byte_fqns,
                               const std::string& where) {
  uint64_t byte_payload = 0;
  for (const std::string& fqn : byte_fqns) {
    Result<uint64_t> n = StoredItemBytes(metadata, MetadataIndex(fqn));
    if (!n.ok()) return n.status().WithContext(where);
    // Each fits in the store (the reader checked), so the sum can't wrap.
    byte_payload += *n;
  }
  if (byte_payload > kMaxSafetensorsHeaderBytes) {
    return Status::InvalidArgument(
        where + ": byte items of " + std::to_string(byte_payload) +
        " bytes can't fit the safetensors header, whose limit is " +
        std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  return Status::OK();
}

// The safetensors header: "__metadata__" (when `metadata_json`, the byte
// items, is not empty), then each tensor's entry, padded with spaces to a
// multiple of 8 bytes. Sorts `tensors` as safetensors' writer lays them
// out: by element size, largest first, so that every tensor's data is
// aligned to its element size.
Result<std::string> SafetensorsHeader(std::vector<StreamItem>* tensors,
                                      std::string_view metadata_json,
                                      const std::string& where) {
  std::stable_sort(tensors->begin(), tensors->end(),
                   [](const StreamItem& a, const StreamItem& b) {
                     return DTypeSize(a.dtype) > DTypeSize(b.dtype);
                   });
  std::string header = "{";
  if (!metadata_json.empty()) {
    header += "\"" + std::string(kSafetensorsMetadataKey) + "\":{";
    header += metadata_json;
    header += "}";
  }
  uint64_t offset = 0;
  for (const StreamItem& t : *tensors) {
    const uint64_t nbytes = *TensorBytes(t.dtype, t.size);
    JsonWriter entry;
    entry.BeginObject()
        .Key("dtype")
        .String(*SafetensorsDTypeName(t.dtype))
        .Key("shape")
        .IntArray(t.size)
        .Key("data_offsets")
        .BeginArray()
        .Uint(offset)
        .Uint(offset + nbytes)
        .EndArray()
        .EndObject();
    if (header.size() > 1) header += ',';
    AppendJsonString(t.fqn, &header);
    header += ':' + entry.str();
    offset += nbytes;
  }
  header += '}';
  // Safetensors pads the header with spaces so that the data is 8-aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxSafetensorsHeaderBytes) {
    return Status::InvalidArgument(
        where + ": the safetensors header would be " +
        std::to_string(header.size()) + " bytes, over its limit of " +
        std::to_string(kMaxSafetensorsHeaderBytes) + " (too many tensors)");
  }
  return header;
}

}  // namespace

Result<TransferStats> ExportSafetensors(Store& store, const std::string& id,
                                        const std::string& out_path,
                                        const ProgressCallback& progress,
                                        size_t buffer_bytes,
                                        uint64_t import_memory_limit) {
  ROCKSDCP_ASSIGN_OR_RETURN(OpenCheckpoint c, OpenForRead(store, id));
  const std::string where = Where(store, id);
  ROCKSDCP_ASSIGN_OR_RETURN(ExportItems items,
                            ExportableItems(c.metadata, where));
  std::vector<StreamItem>& tensors = items.tensors;
  const std::vector<std::string>& byte_fqns = items.byte_fqns;
  const uint64_t tensor_bytes = items.tensor_bytes;
  // Import holds each item in memory while it saves them: tensors are
  // counted here, byte items once read.
  ImportMemory import_memory;
  for (const StreamItem& t : tensors) {
    import_memory.AddTensor(t.fqn, *TensorBytes(t.dtype, t.size));
  }
  auto check_import_memory = [&]() -> Status {
    Status s = import_memory.Check(import_memory_limit);
    if (s.ok()) return s;
    return Status::InvalidArgument(
        where + ": import could not read it back: " + s.message());
  };
  ROCKSDCP_RETURN_IF_ERROR(check_import_memory());
  std::string metadata_json;
  if (!byte_fqns.empty()) {
    ROCKSDCP_RETURN_IF_ERROR(
        CheckByteItemsFitHeader(c.metadata, byte_fqns, where));
    ROCKSDCP_RETURN_IF_ERROR(
        ByteItemsJson(store, id, c, byte_fqns, &metadata_json, &import_memory));
    ROCKSDCP_RETURN_IF_ERROR(check_import_memory());
  }
  ROCKSDCP_ASSIGN_OR_RETURN(std::string header,
                            SafetensorsHeader(&tensors, metadata_json, where));
  metadata_json = std::string();
  char size_le[8];
  for (int i = 0; i < 8; ++i) {
    size_le[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  }

  OutFile out(out_path);
  ROCKSDCP_RETURN_IF_ERROR(out.Open());
  ROCKSDCP_RETURN_IF_ERROR(out.Write(size_le, sizeof(size_le)));
  ROCKSDCP_RETURN_IF_ERROR(out.Write(header));
  header = std::string();
  Progress p;
  p.bytes_total = tensor_bytes;
  p.items_total = tensors.size() + byte_fqns.size();
  p.items_done = byte_fqns.size();
  if (progress) progress(p);
  ROCKSDCP_RETURN_IF_ERROR(
      StreamTensors(*c.reader, id, tensors, buffer_bytes,
                    [&](size_t item, std::string_view bytes) -> Status {
                      ROCKSDCP_RETURN_IF_ERROR(out.Write(bytes));
                      p.bytes_done += bytes.size();
                      p.items_done = byte_fqns.size() + item;
                      if (progress) progress(p);
                      return Status::OK();
                    }));
  if (p.bytes_done != tensor_bytes) {
    return Status::Internal(where + ": streamed " +
                            std::to_string(p.bytes_done) + " bytes of " +
                            std::to_string(tensor_bytes));
  }
  ROCKSDCP_RETURN_IF_ERROR(out.Commit());
  p.items_done = p.items_total;
  if (progress) progress(p);
  return TransferStats{.tensors = tensors.size(),
                       .byte_items = byte_fqns.size(),
                       .bytes = tensor_bytes};
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path,
                                              uint64_t memory_limit) {
  SafetensorsFile f;
  f.path_ = path;
  ROCKSDCP_RETURN_IF_ERROR(f.file_.Open(path));
  Status s = ParseSafetensorsItems(
      std::string_view(reinterpret_cast<const char*>(f.file_.data()),
                       f.file_.size()),
      memory_limit, &f.items_);
  // The header's pages (up to 100 MB) are read: they need not stay while
  // the file is saved.
  f.file_.ReleasePages();
  if (!s.ok()) return s.WithContext("safetensors file " + Quoted(path));
  return f;
}

uint64_t SafetensorsFile::DataOffset(const TensorView& t) const {
  return static_cast<uint64_t>(static_cast<const uint8_t*>(t.data) -
                               file_.data()) -
         items_.data_offset;
}

Result<TransferStats> SafetensorsFile::SaveTo(Store& store,
                                              const std::string& id,
                                              bool overwrite,
                                              const ProgressCallback& progress,
                                              Compression compression) const {
  const TransferStats stats{.tensors = items_.tensors,
                            .byte_items = items_.byte_items,
                            .bytes = file_.size() - items_.data_offset};
  RocksDBWriterOptions wo;
  wo.overwrite = overwrite;
  wo.compression = compression;
  // An import is kept rather than written on a trainer's clock: every
  // piece compressed, whatever the disk's speed.
  wo.compression_policy = CompressionPolicy::kAlways;
  // Every kReleaseEveryBytes written, the mapping's pages leave the RSS
  // (they stay in the page cache; pages still to be read fault back in):
  // the import's memory stays near that, whatever the file's size.
  std::mutex release_mu;
  uint64_t released_at = 0;
  wo.progress = [&](const Progress& p) {
    {
      std::lock_guard<std::mutex> lock(release_mu);
      if (p.bytes_done - released_at >= kReleaseEveryBytes ||
          p.bytes_done < released_at) {
        file_.ReleasePages();
        released_at = p.bytes_done;
      }
    }
    if (progress) progress(p);
  };
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store.NewWriter(wo));
  SaveOptions so;
  so.checkpoint_id = id;
  auto saved = Save(items_.items, *writer, so);
  if (!saved.ok()) {
    return saved.status().WithContext(Where(store, id) + ", importing " +
                                      Quoted(path_));
  }
  return stats;
}

Result<TransferStats> ImportSafetensors(const std::string& in_path,
                                        Store& store, const std::string& id,
                                        bool overwrite,
                                        const ProgressCallback& progress) {
  ROCKSDCP_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(in_path));
  return f.SaveTo(store, id, overwrite, progress);
}

}  // namespace rocksdcp::tools
