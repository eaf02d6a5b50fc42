// `rocksdcp export --safetensors` and `rocksdcp import`: a whole checkpoint
// as a safetensors file (github.com/huggingface/safetensors), and back.
//
// The format: an 8-byte little-endian header size N, N bytes of JSON
// ({"<name>": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}), then the tensors' raw bytes, C order,
// offsets relative to the end of the header.

#ifndef ROCKSDCP_TOOLS_SAFETENSORS_H_
#define ROCKSDCP_TOOLS_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint_items.h"
#include "files.h"
#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::tools {

// The header entry holding string metadata, byte items here.
inline constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";
// Safetensors' own reader refuses larger headers (MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// The most dimensions a tensor of an imported file may have (PyTorch's
// limit is 25, NumPy 2's 64).
inline constexpr size_t kMaxSafetensorsDims = 64;
// The "__metadata__" entry that lists, as a JSON array in a string, the
// byte items that export stored as base64 because they are not UTF-8.
inline constexpr std::string_view kBase64ItemsKey = "rocksdcp.base64_items";

// What import holds, by measurement (tools/README.md, "Memory of import"),
// while it saves a file's items in one Save: for each item, tensor or byte
// item, about kImportBytesPerItem (its entry in the state dict, and the
// library's plan, metadata and commit of it) and kImportBytesPerNameByte
// a byte of its name (copied into each of those: 12 bytes a byte measured
// for short names, 25 for names of megabytes); for each piece the library
// cuts the item into (RocksDBWriterOptions::max_piece_bytes), about
// kImportBytesPerPiece and kImportBytesPerPieceNameByte a byte of the
// item's name (each piece's key and metadata name the item, and are kept
// until the save commits: a 1 GiB tensor with a 100 KB name took 2.4 GB);
// and a byte item's value. Measured with the library's Save as it is;
// remeasure when that changes (tests/tools/make_safetensors.py).
inline constexpr uint64_t kImportBytesPerItem = 2048;
inline constexpr uint64_t kImportBytesPerNameByte = 24;
inline constexpr uint64_t kImportBytesPerPiece = 64;
inline constexpr uint64_t kImportBytesPerPieceNameByte = 3;
// The most that the items of a file may make import hold, by that
// estimate: three of the CLI's buffers (kDefaultBufferBytes). With the
// header's pages while it is read (at most 100 MB) and one buffer's worth
// of tensor data while the file is saved (SafetensorsFile::SaveTo), an
// import stays under about 280 MiB whatever the file: about half the
// library's default memory_budget (512 MiB), which bounds only the
// writer's own buffers.
inline constexpr uint64_t kImportMemoryLimit = 3 * kDefaultBufferBytes;

// Adds up what import would hold for a file's items, by the constants
// above, and says so when it is past a limit. Sums saturate.
class ImportMemory {
 public:
  // A tensor of `bytes` bytes of data.
  void AddTensor(std::string_view name, uint64_t bytes);
  // A byte item whose value is `bytes` bytes.
  void AddByteItem(std::string_view name, uint64_t bytes);

  uint64_t estimate() const { return estimate_; }
  // OK if estimate() is within `limit`; otherwise InvalidArgument saying
  // how many tensors and byte items there are, their names' and payload's
  // bytes, the estimate and the limit.
  Status Check(uint64_t limit) const;

 private:
  void Add(std::string_view name, uint64_t bytes);

  uint64_t tensors_ = 0;
  uint64_t byte_items_ = 0;
  uint64_t name_bytes_ = 0;
  uint64_t tensor_bytes_ = 0;
  uint64_t byte_item_bytes_ = 0;
  uint64_t estimate_ = 0;
};

// The most JSON values a tensor's entry in a header may hold: its dtype,
// shape (at most kMaxSafetensorsDims) and offsets take 70, and fields
// import ignores the rest.
inline constexpr uint64_t kMaxSafetensorsEntryValues = 4096;

struct TransferStats {
  uint64_t tensors = 0;
  uint64_t byte_items = 0;
  uint64_t bytes = 0;  // Tensor payload.
};

// Writes checkpoint `id` as a safetensors file. Tensors are laid out by
// element size, largest first, then by name (safetensors' own writer
// orders by dtype, then name: the same alignment), so each one's data is
// aligned to its element size; the header is padded with spaces to a
// multiple of 8. Byte items go into
// "__metadata__": a value that is UTF-8 as itself, any other as base64
// (RFC 4648), its name listed under kBase64ItemsKey, which
// ImportSafetensors undoes.
//
// The header is written first (sizes come from the metadata), then the
// tensors stream through `buffer_bytes` of memory (tools/tensor_stream.h);
// byte items, bounded by the header limit, are read in one load. The file
// appears whole or not at all (OutFile).
//
// InvalidArgument, naming the checkpoint and item, for what import could
// not read back: a dtype safetensors lacks (complex32/128), more than
// kMaxSafetensorsDims dimensions, a name it can't hold (not UTF-8,
// "__metadata__", or kBase64ItemsKey for a byte item), byte items that
// would take the header past kMaxSafetensorsHeaderBytes (checked before
// any is read), or items that would take import past
// `import_memory_limit` (ImportMemory; the parameter is for tests).
// progress reports bytes and items written.
Result<TransferStats> ExportSafetensors(
    Store& store, const std::string& id, const std::string& out_path,
    const ProgressCallback& progress = {},
    size_t buffer_bytes = kDefaultBufferBytes,
    uint64_t import_memory_limit = kImportMemoryLimit);

// One tensor of a safetensors file, as its verified header gives it.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data.
  uint64_t end = 0;
};

// What import keeps of a safetensors file: its items as the state dict
// that Save takes, and no other copy of them.
struct SafetensorsItems {
  // Tensors as contiguous views into the file's data (never written
  // through: Save only reads them), byte items decoded.
  StateDict items;
  uint64_t tensors = 0;
  uint64_t byte_items = 0;
  uint64_t data_offset = 0;  // Where the data starts: 8 + the header size.
};

// Safetensors' name of `dtype` ("F32", "BF16", ...), or nullopt for a dtype
// it lacks (complex32 and complex128).
std::optional<std::string_view> SafetensorsDTypeName(DType dtype);

// The checks of SafetensorsFile::Open (below) on a whole file in memory,
// with its limit on memory: the file's items into *items. Corruption
// saying what is wrong with the file, or InvalidArgument
// (ImportMemory::Check) for one whose items would take import past
// `memory_limit`; the caller names the file. Reads the header a value at
// a time (JsonReader), keeping only the items: at most `memory_limit` of
// them by the estimate (past it, it only counts them, to say how many
// there are), one tensor's entry of at most kMaxSafetensorsEntryValues
// JSON values, and one byte item's value at a time. Never reads outside
// `file`.
Status ParseSafetensorsItems(std::string_view file, uint64_t memory_limit,
                             SafetensorsItems* items);

// The same checks, without the limit on memory, into vectors: tensors in
// data order, and "__metadata__" entries; returns where the data starts.
// Corruption saying what is wrong otherwise. For the fuzzer
// (fuzz/safetensors_fuzzer.cc) and tests.
Result<uint64_t> ParseSafetensors(
    std::string_view file, std::vector<SafetensorsTensor>* tensors,
    std::vector<std::pair<std::string, std::string>>* byte_items);

// A safetensors file, mapped read-only (MappedFile) with its header
// verified before anything uses it: the header size within the file and
// kMaxSafetensorsHeaderBytes; strict JSON (tools/json.h: no duplicate keys,
// UTF-8), read value by value (memory holds the items, not a JSON tree);
// fields other than dtype, shape and data_offsets ignored, as upstream;
// known dtypes; at most kMaxSafetensorsDims dimensions; sizes matching
// dtype and shape without overflow; and, as safetensors' own reader
// requires, tensors that tile the data exactly, without gaps or overlaps.
// Corruption naming the file and the tensor otherwise; InvalidArgument if
// its items would take import past `memory_limit` (ImportMemory::Check).
//
// "__metadata__" entries become byte items, verbatim, except those listed
// under kBase64ItemsKey (written by ExportSafetensors), which are decoded.
class SafetensorsFile {
 public:
  // Once the header is read, its pages leave the process (ReleasePages).
  static Result<SafetensorsFile> Open(
      const std::string& path, uint64_t memory_limit = kImportMemoryLimit);

  const std::string& path() const { return path_; }
  // The file's items, as SaveTo saves them: tensors as views into the
  // mapping, byte items decoded.
  const StateDict& items() const { return items_.items; }
  uint64_t tensors() const { return items_.tensors; }
  uint64_t byte_items() const { return items_.byte_items; }
  // Where a tensor of items() starts in the file's data (its
  // data_offsets[0]). REQUIRES: `t` is one of items()'s tensors.
  uint64_t DataOffset(const TensorView& t) const;

  // Saves the file into `store` as checkpoint `id` in one Save, through
  // views of the mapping, never a copy; every 64 MiB written, the pages
  // read so far leave the process (MappedFile::ReleasePages), so its RSS
  // stays near that whatever the file's size. AlreadyExists if `id` is
  // committed and !overwrite. `compression`: RocksDBWriterOptions', with
  // CompressionPolicy::kAlways.
  Result<TransferStats> SaveTo(
      Store& store, const std::string& id, bool overwrite = false,
      const ProgressCallback& progress = {},
      Compression compression = Compression::kNone) const;

 private:
  std::string path_;
  MappedFile file_;
  SafetensorsItems items_;
};

// SafetensorsFile::Open(in_path), then SaveTo(store, id, ...).
Result<TransferStats> ImportSafetensors(const std::string& in_path,
                                        Store& store, const std::string& id,
                                        bool overwrite = false,
                                        const ProgressCallback& progress = {});

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_SAFETENSORS_H_
