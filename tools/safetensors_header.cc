#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <variant>

#include "base64.h"
#include "json.h"
#include "safetensors.h"

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

// A tensor's entry in the header, verified.
struct TensorEntry {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Result<TensorEntry> ParseTensorEntry(const std::string& name, const Json& v,
                                     uint64_t data_size) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("tensor " + JsonString(name) + ": " + what);
  };
  if (v.kind != Json::kObject) return bad("entry is not an object");
  const Json* dtype = nullptr;
  const Json* shape = nullptr;
  const Json* offsets = nullptr;
  for (const auto& [key, member] : v.object) {
    // Other fields are ignored, as safetensors' own reader (serde) does.
    if (key == "dtype")
      dtype = &member;
    else if (key == "shape")
      shape = &member;
    else if (key == "data_offsets")
      offsets = &member;
  }
  if (dtype == nullptr || shape == nullptr || offsets == nullptr) {
    return bad("needs \"dtype\", \"shape\" and \"data_offsets\"");
  }
  TensorEntry t;
  if (dtype->kind != Json::kString) return bad("dtype is not a string");
  const auto d = StDTypeFromName(dtype->string);
  if (!d) return bad("unknown dtype " + JsonString(dtype->string));
  t.dtype = *d;
  if (shape->kind != Json::kArray) return bad("shape is not an array");
  if (shape->array.size() > kMaxSafetensorsDims) {
    return bad(std::to_string(shape->array.size()) + " dimensions, more than " +
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

// Reads a header's JSON into SafetensorsItems, a value at a time: memory
// holds the items kept so far and one tensor entry or byte item value,
// never the JSON's tree or a second copy of a name.
class HeaderReader {
 public:
  HeaderReader(std::string_view json, const uint8_t* data, uint64_t data_size,
               uint64_t memory_limit, SafetensorsItems* out)
      : reader_(json, "the header"),
        data_(data),
        data_size_(data_size),
        memory_limit_(memory_limit),
        out_(out) {}

  Status Read() {
    ROCKSDCP_RETURN_IF_ERROR(reader_.ReadObject(
        [&](std::string name) -> Status {
          if (name != kSafetensorsMetadataKey) return Tensor(std::move(name));
          if (seen_metadata_) {
            return reader_.Error("duplicate key " + JsonString(name));
          }
          seen_metadata_ = true;
          return Metadata();
        },
        // Found through the state dict, which holds every name anyway.
        /*check_duplicate_keys=*/false));
    ROCKSDCP_RETURN_IF_ERROR(reader_.Finish());
    if (over_limit_) {
      Status s = memory_.Check(memory_limit_);
      return Status(s.code(),
                    s.message() + "; import it as several smaller files");
    }
    return CheckTiling();
  }

 private:
  // Whether to keep an item just counted in memory_: false once the
  // estimate is past the limit, from when on nothing is kept. The items
  // are only counted, for the error to say what the file holds.
  bool Keep() {
    if (!over_limit_ && memory_.estimate() > memory_limit_) {
      over_limit_ = true;
      out_->items = StateDict();
      spans_ = std::vector<Span>();
    }
    return !over_limit_;
  }

  // A name taken twice: by two tensors, two byte items, or one of each.
  Status Duplicate(const std::string& name, bool tensor,
                   const StateValue& other) {
    if (tensor != std::holds_alternative<std::string>(other)) {
      return reader_.Error("duplicate key " + JsonString(name));
    }
    return Status::Corruption("\"__metadata__\" entry " + JsonString(name) +
                              " has the name of a tensor");
  }

  Status Tensor(std::string name) {
    Json v;
    ROCKSDCP_RETURN_IF_ERROR(reader_.ReadValue(&v, kMaxSafetensorsEntryValues));
    ROCKSDCP_ASSIGN_OR_RETURN(TensorEntry t,
                              ParseTensorEntry(name, v, data_size_));
    ++out_->tensors;
    memory_.AddTensor(name, t.end - t.begin);
    if (!Keep()) return Status::OK();
    // Save only reads the tensors: the read-only mapping is never written.
    auto [it, inserted] = out_->items.try_emplace(
        std::move(name),
        TensorView::Contiguous(t.dtype, std::move(t.shape),
                               const_cast<uint8_t*>(data_ + t.begin)));
    if (!inserted) return Duplicate(it->first, /*tensor=*/true, it->second);
    spans_.push_back({t.begin, t.end, &it->first});
    return Status::OK();
  }

  // "__metadata__": null (as upstream) or an object of strings, each a
  // byte item, verbatim but for those kBase64ItemsKey lists. The list
  // itself is no item.
  Status Metadata() {
    ROCKSDCP_ASSIGN_OR_RETURN(Json::Kind kind, reader_.Peek());
    if (kind == Json::kNull) {
      Json null;
      return reader_.ReadValue(&null, 1);
    }
    if (kind != Json::kObject) {
      return Status::Corruption("\"__metadata__\" is not an object");
    }
    std::optional<std::string> base64_list;
    ROCKSDCP_RETURN_IF_ERROR(reader_.ReadObject(
        [&](std::string key) -> Status {
          ROCKSDCP_ASSIGN_OR_RETURN(Json::Kind value_kind, reader_.Peek());
          if (value_kind != Json::kString) {
            return Status::Corruption("\"__metadata__\" entry " +
                                      JsonString(key) + " is not a string");
          }
          std::string value;
          ROCKSDCP_RETURN_IF_ERROR(reader_.ReadString(&value));
          if (key == kBase64ItemsKey) {
            if (base64_list) {
              return reader_.Error("duplicate key " + JsonString(key));
            }
            base64_list = std::move(value);
            return Status::OK();
          }
          ++out_->byte_items;
          memory_.AddByteItem(key, value.size());
          if (!Keep()) return Status::OK();
          auto [it, inserted] =
              out_->items.try_emplace(std::move(key), std::move(value));
          if (!inserted) {
            return Duplicate(it->first, /*tensor=*/false, it->second);
          }
          return Status::OK();
        },
        /*check_duplicate_keys=*/false));
    if (!base64_list || over_limit_) return Status::OK();
    return DecodeBase64Items(*base64_list, out_->byte_items);
  }

  // Decodes, in place, the byte items that the kBase64ItemsKey entry
  // `list` names; `byte_items` bounds the list's length.
  Status DecodeBase64Items(const std::string& list, uint64_t byte_items) {
    const std::string what =
        "the \"__metadata__\" entry " + JsonString(kBase64ItemsKey);
    // The array and each byte item's name once, and one more name, for a
    // list that names one the metadata lacks to be told so.
    ROCKSDCP_ASSIGN_OR_RETURN(Json names,
                              ParseJson(list, what, byte_items + 2));
    if (names.kind != Json::kArray) {
      return Status::Corruption(what + " is not an array of names");
    }
    std::set<std::string_view> done;
    for (const Json& name : names.array) {
      if (name.kind != Json::kString || name.string == kBase64ItemsKey) {
        return Status::Corruption(what +
                                  " holds something other than a "
                                  "name of another entry");
      }
      auto it = out_->items.find(name.string);
      std::string* value = it == out_->items.end()
                               ? nullptr
                               : std::get_if<std::string>(&it->second);
      if (value == nullptr) {
        return Status::Corruption(JsonString(kBase64ItemsKey) + " lists " +
                                  JsonString(name.string) +
                                  ", which \"__metadata__\" lacks");
      }
      if (!done.insert(it->first).second) continue;
      auto decoded = Base64Decode(*value);
      if (!decoded) {
        return Status::Corruption("\"__metadata__\" entry " +
                                  JsonString(name.string) +
                                  " is not base64, though " +
                                  JsonString(kBase64ItemsKey) + " lists it");
      }
      *value = std::move(*decoded);
    }
    return Status::OK();
  }

  // As safetensors' own reader: tensors tile the data region exactly, in
  // offset order, without gaps or overlaps.
  Status CheckTiling() {
    std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
      return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
    });
    uint64_t next = 0;
    for (const Span& t : spans_) {
      if (t.begin != next) {
        return Status::Corruption(
            "tensor " + JsonString(*t.name) + ": data_offsets begin at " +
            std::to_string(t.begin) + ", expected " + std::to_string(next) +
            (t.begin < next ? " (overlaps the previous tensor)" : " (a gap)"));
      }
      next = t.end;
    }
    if (next != data_size_) {
      return Status::Corruption("tensors cover " + std::to_string(next) +
                                " bytes of data, the file holds " +
                                std::to_string(data_size_));
    }
    return Status::OK();
  }

  // A tensor's bytes in the data, for the tiling check.
  struct Span {
    uint64_t begin;
    uint64_t end;
    const std::string* name;  // The state dict's key.
  };

  JsonReader reader_;
  const uint8_t* data_;
  uint64_t data_size_;
  uint64_t memory_limit_;
  SafetensorsItems* out_;
  std::vector<Span> spans_;
  bool seen_metadata_ = false;
  ImportMemory memory_;
  bool over_limit_ = false;
};

}  // namespace

std::optional<std::string_view> SafetensorsDTypeName(DType dtype) {
  for (const StDType& d : kStDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return std::nullopt;
}

namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

}  // namespace

void ImportMemory::AddTensor(std::string_view name, uint64_t bytes) {
  ++tensors_;
  tensor_bytes_ = SaturatingAdd(tensor_bytes_, bytes);
  Add(name, bytes);
}

void ImportMemory::AddByteItem(std::string_view name, uint64_t bytes) {
  ++byte_items_;
  byte_item_bytes_ = SaturatingAdd(byte_item_bytes_, bytes);
  estimate_ = SaturatingAdd(estimate_, bytes);  // The value, held once.
  Add(name, bytes);
}

void ImportMemory::Add(std::string_view name, uint64_t bytes) {
  // The pieces import's writer cuts the item into; an empty item is one.
  static const uint64_t piece_bytes = RocksDBWriterOptions().max_piece_bytes;
  const uint64_t pieces =
      std::max<uint64_t>(1, bytes / piece_bytes + (bytes % piece_bytes != 0));
  name_bytes_ = SaturatingAdd(name_bytes_, name.size());
  const uint64_t item = SaturatingAdd(
      kImportBytesPerItem, SaturatingMul(kImportBytesPerNameByte, name.size()));
  const uint64_t per_piece =
      SaturatingAdd(kImportBytesPerPiece,
                    SaturatingMul(kImportBytesPerPieceNameByte, name.size()));
  estimate_ = SaturatingAdd(
      estimate_, SaturatingAdd(item, SaturatingMul(pieces, per_piece)));
}

Status ImportMemory::Check(uint64_t limit) const {
  if (estimate_ <= limit) return Status::OK();
  // The estimate rounded up; the limit exactly.
  auto mib = [](uint64_t b) {
    return std::to_string(b / (1 << 20) + (b % (1 << 20) != 0)) + " MiB";
  };
  const std::string limit_text =
      limit % (1 << 20) == 0 ? mib(limit) : std::to_string(limit) + " bytes";
  auto count = [](uint64_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  return Status::InvalidArgument(
      count(tensors_, "tensor") + " and " + count(byte_items_, "byte item") +
      " (" + count(name_bytes_, "byte") + " of names, " +
      std::to_string(tensor_bytes_) + " of tensor data, " +
      std::to_string(byte_item_bytes_) + " of byte items) would take about " +
      mib(estimate_) + " of memory to import, more than its limit of " +
      limit_text);
}

Status ParseSafetensorsItems(std::string_view file, uint64_t memory_limit,
                             SafetensorsItems* items) {
  *items = SafetensorsItems();
  if (file.size() < 8) {
    return Status::Corruption(std::to_string(file.size()) +
                              " bytes, too short for the header size");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  if (n > kMaxSafetensorsHeaderBytes) {
    return Status::Corruption("the header size is " + std::to_string(n) +
                              " bytes, over safetensors' limit of " +
                              std::to_string(kMaxSafetensorsHeaderBytes) +
                              " bytes");
  }
  if (n > file.size() - 8) {
    return Status::Corruption(
        "the header size is " + std::to_string(n) + " bytes, but only " +
        std::to_string(file.size() - 8) +
        " bytes follow it: the file is cut short, or not safetensors");
  }
  items->data_offset = 8 + n;
  const auto* data = reinterpret_cast<const uint8_t*>(file.data()) + 8 + n;
  Status s = HeaderReader(file.substr(8, n), data, file.size() - 8 - n,
                          memory_limit, items)
                 .Read();
  if (!s.ok()) *items = SafetensorsItems();
  return s;
}

Result<uint64_t> ParseSafetensors(
    std::string_view file, std::vector<SafetensorsTensor>* tensors,
    std::vector<std::pair<std::string, std::string>>* byte_items) {
  SafetensorsItems parsed;
  ROCKSDCP_RETURN_IF_ERROR(ParseSafetensorsItems(file, UINT64_MAX, &parsed));
  const auto* data =
      reinterpret_cast<const uint8_t*>(file.data()) + parsed.data_offset;
  for (auto& [name, value] : parsed.items) {
    if (auto* bytes = std::get_if<std::string>(&value)) {
      byte_items->emplace_back(name, std::move(*bytes));
      continue;
    }
    const TensorView& v = std::get<TensorView>(value);
    const auto begin =
        static_cast<uint64_t>(static_cast<const uint8_t*>(v.data) - data);
    tensors->push_back({.name = name,
                        .dtype = v.dtype,
                        .shape = v.sizes,
                        .begin = begin,
                        .end = begin + v.nbytes()});
  }
  std::sort(tensors->begin(), tensors->end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
            });
  return parsed.data_offset;
}

}  // namespace rocksdcp::tools
