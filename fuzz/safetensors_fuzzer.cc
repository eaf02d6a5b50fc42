// Fuzzes the checks `rocksdcp import` makes of a safetensors file before
// it uses one byte of it (ParseSafetensors, tools/safetensors_header.cc,
// with tools/json.cc's strict JSON reader). The input is a whole file.
//
// An accepted file must be what the importer relies on: tensors in data
// order that tile the data exactly, each spanning dtype size x numel bytes
// of it, at most kMaxSafetensorsDims dimensions, distinct names, and byte
// items named unlike any tensor and never rocksdcp.base64_items.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_items.h"
#include "fuzz_util.h"
#include "safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocksdcp;
  using namespace rocksdcp::tools;
  const std::string_view file = fuzz::AsChars(data, size);
  std::vector<SafetensorsTensor> tensors;
  std::vector<std::pair<std::string, std::string>> byte_items;
  const Result<uint64_t> data_offset =
      ParseSafetensors(file, &tensors, &byte_items);
  if (!data_offset.ok()) {
    FUZZ_CHECK(data_offset.status().code() == StatusCode::kCorruption);
    return 0;
  }
  FUZZ_CHECK(*data_offset >= 8 && *data_offset <= size);
  const uint64_t data_size = size - *data_offset;
  uint64_t next = 0;
  std::set<std::string> names;
  for (const SafetensorsTensor& t : tensors) {
    FUZZ_CHECK(t.begin == next && t.begin <= t.end && t.end <= data_size);
    FUZZ_CHECK(t.shape.size() <= kMaxSafetensorsDims);
    const auto nbytes = TensorBytes(t.dtype, t.shape);
    FUZZ_CHECK(nbytes.has_value() && *nbytes == t.end - t.begin);
    FUZZ_CHECK(SafetensorsDTypeName(t.dtype).has_value());
    FUZZ_CHECK(names.insert(t.name).second);
    next = t.end;
  }
  FUZZ_CHECK(next == data_size);
  for (const auto& [name, value] : byte_items) {
    FUZZ_CHECK(names.insert(name).second);
    FUZZ_CHECK(name != kBase64ItemsKey);  // The list, never an item.
  }
  return 0;
}
