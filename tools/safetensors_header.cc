#include "safetensors.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "base64.h"
#include "json.h"

namespace rocksdcp::tools {
namespace {

struct StDType {
  DType dtype;
  std::string_view name;
};
// Safetensors' dtype names; bare F8_E4M3 is the OCP "fn" variant, as in
// PyTorch's float8_e4m3fn.
constexpr StDType kStDTypes[] = {
    {DType::kBool, "BOOL"},
    {DType::kUInt8, "U8"},
    {DType::kInt8, "I8"},
    {DType::kFloat8E5M2, "F8_E5M2"},
    {DType::kFloat8E4M3FN, "F8_E4M3"},
    {DType::kFloat8E5M2FNUZ, "F8_E5M2FNUZ"},
    {DType::kFloat8E4M3FNUZ, "F8_E4M3FNUZ"},
    {DType::kFloat8E8M0FNU, "F8_E8M0"},
    {DType::kInt16, "I16"},
    {DType::kUInt16, "U16"},
    {DType::kFloat16, "F16"},
    {DType::kBFloat16, "BF16"},
    {DType::kInt32, "I32"},
    {DType::kUInt32, "U32"},
    {DType::kFloat32, "F32"},
    {DType::kFloat64, "F64"},
    {DType::kInt64, "I64"},
    {DType::kUInt64, "U64"},
    {DType::kComplex64, "C64"},
};

std::optional<DType> StDTypeFromName(std::string_view name) {
  for (const StDType& d : kStDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

// ---- Import ----

Result<SafetensorsTensor> ParseTensorEntry(const std::string& name,
                                           const Json& v, uint64_t data_size) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("tensor " + JsonString(name) + ": " + what);
  };
  if (v.kind != Json::kObject) return bad("entry is not an object");
  const Json* dtype = nullptr;
  const Json* shape = nullptr;
  const Json* offsets = nullptr;
  for (const auto& [key, member] : v.object) {
    // Other fields are ignored, as safetensors' own reader (serde) does.
    if (key == "dtype") dtype = &member;
    else if (key == "shape") shape = &member;
    else if (key == "data_offsets") offsets = &member;
  }
  if (dtype == nullptr || shape == nullptr || offsets == nullptr) {
    return bad("needs \"dtype\", \"shape\" and \"data_offsets\"");
  }
  SafetensorsTensor t;
  t.name = name;
  if (dtype->kind != Json::kString) return bad("dtype is not a string");
  const auto d = StDTypeFromName(dtype->string);
  if (!d) return bad("unknown dtype " + JsonString(dtype->string));
  t.dtype = *d;
  if (shape->kind != Json::kArray) return bad("shape is not an array");
  if (shape->array.size() > kMaxSafetensorsDims) {
    return bad(std::to_string(shape->array.size()) +
               " dimensions, more than " +
               std::to_string(kMaxSafetensorsDims));
  }
  for (const Json& dim : shape->array) {
    if (!dim.integer || *dim.integer > uint64_t{1} << 62) {
      return bad("shape holds something other than a size");
    }
    t.shape.push_back(static_cast<int64_t>(*dim.integer));
  }
  if (offsets->kind != Json::kArray || offsets->array.size() != 2 ||
      !offsets->array[0].integer || !offsets->array[1].integer) {
    return bad("data_offsets is not [begin, end]");
  }
  t.begin = *offsets->array[0].integer;
  t.end = *offsets->array[1].integer;
  if (t.begin > t.end || t.end > data_size) {
    return bad("data_offsets [" + std::to_string(t.begin) + ", " +
               std::to_string(t.end) + "] outside the data (" +
               std::to_string(data_size) + " bytes)");
  }
  // Zero-size dims aside, the sizes must still multiply out: strides are
  // int64 products of them.
  std::vector<int64_t> nonzero;
  for (int64_t dim : t.shape) nonzero.push_back(std::max<int64_t>(dim, 1));
  const auto bound = TensorBytes(t.dtype, nonzero);
  if (!bound || *bound > uint64_t{1} << 62) return bad("shape too large");
  const auto nbytes = TensorBytes(t.dtype, t.shape);
  if (!nbytes || *nbytes != t.end - t.begin) {
    return bad("data_offsets span " + std::to_string(t.end - t.begin) +
               " bytes, dtype and shape need " +
               (nbytes ? std::to_string(*nbytes) : std::string("too many")));
  }
  return t;
}

// The "__metadata__" entries as byte items: verbatim, but for those that
// kBase64ItemsKey lists, which are decoded. The list itself is no item.
Status ByteItemsFromMetadata(
    const Json& metadata,
    std::vector<std::pair<std::string, std::string>>* items) {
  if (metadata.kind == Json::kNull) return Status::OK();  // As upstream.
  if (metadata.kind != Json::kObject) {
    return Status::Corruption("\"__metadata__\" is not an object");
  }
  std::set<std::string> base64_names;
  for (const auto& [key, value] : metadata.object) {
    if (value.kind != Json::kString) {
      return Status::Corruption("\"__metadata__\" entry " + JsonString(key) +
                                " is not a string");
    }
    if (key != kBase64ItemsKey) continue;
    const std::string what = "the \"__metadata__\" entry " + JsonString(key);
    ROCKSDCP_ASSIGN_OR_RETURN(Json names, ParseJson(value.string, what));
    if (names.kind != Json::kArray) {
      return Status::Corruption(what + " is not an array of names");
    }
    for (const Json& name : names.array) {
      if (name.kind != Json::kString || name.string == kBase64ItemsKey) {
        return Status::Corruption(what + " holds something other than a "
                                  "name of another entry");
      }
      base64_names.insert(name.string);
    }
  }
  for (const auto& [key, value] : metadata.object) {
    if (key == kBase64ItemsKey) continue;
    if (base64_names.erase(key) == 0) {
      items->emplace_back(key, value.string);
      continue;
    }
    auto decoded = Base64Decode(value.string);
    if (!decoded) {
      return Status::Corruption("\"__metadata__\" entry " + JsonString(key) +
                                " is not base64, though " +
                                JsonString(kBase64ItemsKey) + " lists it");
    }
    items->emplace_back(key, std::move(*decoded));
  }
  if (!base64_names.empty()) {
    return Status::Corruption(JsonString(kBase64ItemsKey) + " lists " +
                              JsonString(*base64_names.begin()) +
                              ", which \"__metadata__\" lacks");
  }
  return Status::OK();
}

// The header's tensors, in data order, and byte items, verified.
Status ParseHeader(std::string_view json, uint64_t data_size,
                   std::vector<SafetensorsTensor>* tensors,
                   std::vector<std::pair<std::string, std::string>>* items) {
  // Member by member: memory holds the tensors as parsed (a few dozen
  // bytes each beyond their names), never the whole header's JSON tree.
  ROCKSDCP_RETURN_IF_ERROR(ParseJsonObject(
      json, "the header", [&](std::string name, Json v) -> Status {
        if (name == kSafetensorsMetadataKey) {
          return ByteItemsFromMetadata(v, items);
        }
        ROCKSDCP_ASSIGN_OR_RETURN(SafetensorsTensor t,
                                  ParseTensorEntry(name, v, data_size));
        tensors->push_back(std::move(t));
        return Status::OK();
      }));
  // As safetensors' own reader: tensors tile the data region exactly, in
  // offset order, without gaps or overlaps.
  std::sort(tensors->begin(), tensors->end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
            });
  uint64_t next = 0;
  for (const SafetensorsTensor& t : *tensors) {
    if (t.begin != next) {
      return Status::Corruption(
          "tensor " + JsonString(t.name) + ": data_offsets begin at " +
          std::to_string(t.begin) + ", expected " + std::to_string(next) +
          (t.begin < next ? " (overlaps the previous tensor)" : " (a gap)"));
    }
    next = t.end;
  }
  if (next != data_size) {
    return Status::Corruption("tensors cover " + std::to_string(next) +
                              " bytes of data, the file holds " +
                              std::to_string(data_size));
  }
  std::set<std::string_view> names;
  for (const SafetensorsTensor& t : *tensors) names.insert(t.name);
  for (const auto& [key, unused] : *items) {
    if (names.count(key) != 0) {
      return Status::Corruption("\"__metadata__\" entry " + JsonString(key) +
                                " has the name of a tensor");
    }
  }
  return Status::OK();
}

}  // namespace

std::optional<std::string_view> SafetensorsDTypeName(DType dtype) {
  for (const StDType& d : kStDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return std::nullopt;
}

Result<uint64_t> ParseSafetensors(
    std::string_view file, std::vector<SafetensorsTensor>* tensors,
    std::vector<std::pair<std::string, std::string>>* byte_items) {
  if (file.size() < 8) {
    return Status::Corruption(std::to_string(file.size()) +
                              " bytes, too short for the header size");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  if (n > kMaxSafetensorsHeaderBytes || n > file.size() - 8) {
    return Status::Corruption(
        "header size " + std::to_string(n) + " exceeds the file's " +
        std::to_string(file.size()) + " bytes (or " +
        std::to_string(kMaxSafetensorsHeaderBytes) + ")");
  }
  ROCKSDCP_RETURN_IF_ERROR(ParseHeader(file.substr(8, n),
                                       file.size() - 8 - n, tensors,
                                       byte_items));
  return 8 + n;
}

}  // namespace rocksdcp::tools
