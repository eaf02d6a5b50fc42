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
// "__metadata__", or kBase64ItemsKey for a byte item), over a million byte
// items, or byte items that would take the header past
// kMaxSafetensorsHeaderBytes (checked before any is read).
// progress reports bytes and items written.
Result<TransferStats> ExportSafetensors(
    Store& store, const std::string& id, const std::string& out_path,
    const ProgressCallback& progress = {},
    size_t buffer_bytes = kDefaultBufferBytes);

// One tensor of a safetensors file, as its verified header gives it.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data.
  uint64_t end = 0;
};

// Safetensors' name of `dtype` ("F32", "BF16", ...), or nullopt for a dtype
// it lacks (complex32 and complex128).
std::optional<std::string_view> SafetensorsDTypeName(DType dtype);

// The checks of SafetensorsFile::Open (below) on a whole file in memory:
// its tensors, in data order, into *tensors and its "__metadata__" entries
// into *byte_items, and where the data starts. Corruption saying what is
// wrong otherwise; the caller names the file. Never reads outside `file`
// and builds at most kDefaultMaxJsonValues JSON values, whatever it holds
// (fuzz/safetensors_fuzzer.cc).
Result<uint64_t> ParseSafetensors(
    std::string_view file, std::vector<SafetensorsTensor>* tensors,
    std::vector<std::pair<std::string, std::string>>* byte_items);

// A safetensors file, mapped read-only (MappedFile) with its header
// verified before anything uses it: the header size within the file and
// kMaxSafetensorsHeaderBytes; strict JSON (tools/json.h: no duplicate keys,
// UTF-8), parsed member by member (memory holds the parsed tensors, not a
// JSON tree; each member at most kDefaultMaxJsonValues values); fields
// other than dtype, shape and data_offsets ignored, as upstream; known
// dtypes; at most
// kMaxSafetensorsDims dimensions; sizes matching dtype and shape without
// overflow; and, as safetensors' own reader requires, tensors that tile the
// data exactly, without gaps or overlaps. Corruption naming the file and
// the tensor otherwise.
//
// "__metadata__" entries become byte items, verbatim, except those listed
// under kBase64ItemsKey (written by ExportSafetensors), which are decoded.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // In data order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::vector<std::pair<std::string, std::string>>& byte_items() const {
    return byte_items_;
  }

  // Saves the file into `store` as checkpoint `id` in one Save, through
  // views of the mapping, never a copy; every 64 MiB written, the pages
  // read so far leave the process (MappedFile::ReleasePages), so its RSS
  // stays near that whatever the file's size. AlreadyExists if `id` is
  // committed and !overwrite.
  Result<TransferStats> SaveTo(Store& store, const std::string& id,
                               bool overwrite = false,
                               const ProgressCallback& progress = {}) const;

 private:
  std::string path_;
  MappedFile file_;
  const uint8_t* data_ = nullptr;  // Into file_, past the header.
  std::vector<SafetensorsTensor> tensors_;
  std::vector<std::pair<std::string, std::string>> byte_items_;
};

// SafetensorsFile::Open(in_path), then SaveTo(store, id, ...).
Result<TransferStats> ImportSafetensors(const std::string& in_path,
                                        Store& store, const std::string& id,
                                        bool overwrite = false,
                                        const ProgressCallback& progress = {});

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_SAFETENSORS_H_
