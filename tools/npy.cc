#include "npy.h"

#include <bit>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "files.h"
#include "tensor_stream.h"

namespace rocksdcp::tools {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy data is written as in memory: little-endian hosts only");

std::optional<std::string_view> NpyDescr(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "|b1";
    case DType::kInt8:
      return "|i1";
    case DType::kUInt8:
      return "|u1";
    case DType::kInt16:
      return "<i2";
    case DType::kUInt16:
      return "<u2";
    case DType::kInt32:
      return "<i4";
    case DType::kUInt32:
      return "<u4";
    case DType::kInt64:
      return "<i8";
    case DType::kUInt64:
      return "<u8";
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kComplex64:
      return "<c8";
    case DType::kComplex128:
      return "<c16";
    default:
      return std::nullopt;
  }
}

// The .npy 1.0 preamble: magic, version, header length, then the header
// dict padded with spaces and a newline so that the data starts at a
// multiple of 64 bytes.
// REQUIRES: shape.size() <= kMaxNpyDims, so the header fits its 16 bits.
std::string NpyPreamble(std::string_view descr,
                        const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (2, 3), but (5,)
  if (shape.size() == 1) dims.pop_back();
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

}  // namespace

Status DumpNpy(Store& store, const std::string& id, const std::string& fqn,
               const std::string& out_path, size_t buffer_bytes) {
  ROCKSDCP_ASSIGN_OR_RETURN(OpenCheckpoint c, OpenForRead(store, id));
  const std::string where = Where(store, id) + ", item " + Quoted(fqn);
  auto it = c.metadata.state_dict_metadata.find(fqn);
  if (it == c.metadata.state_dict_metadata.end()) {
    return Status::NotFound(where + ": no such item");
  }
  const auto* md = std::get_if<TensorStorageMetadata>(&it->second);
  if (md == nullptr) {
    return Status::InvalidArgument(where +
                                   ": a byte item, not a tensor; .npy holds "
                                   "tensors only");
  }
  const auto descr = NpyDescr(md->properties.dtype);
  if (!descr) {
    return Status::InvalidArgument(
        where + ": dtype " + std::string(DTypeName(md->properties.dtype)) +
        " has no NumPy type");
  }
  if (md->size.size() > kMaxNpyDims) {
    return Status::InvalidArgument(
        where + ": " + std::to_string(md->size.size()) +
        " dimensions; NumPy reads at most " + std::to_string(kMaxNpyDims));
  }
  if (!TensorBytes(md->properties.dtype, md->size)) {
    return Status::Corruption(where + ": shape too large");
  }
  OutFile out(out_path);
  ROCKSDCP_RETURN_IF_ERROR(out.Open());
  ROCKSDCP_RETURN_IF_ERROR(out.Write(NpyPreamble(*descr, md->size)));
  const std::vector<StreamItem> items = {
      {.fqn = fqn, .dtype = md->properties.dtype, .size = md->size}};
  ROCKSDCP_RETURN_IF_ERROR(StreamTensors(
      *c.reader, id, items, buffer_bytes,
      [&](size_t, std::string_view bytes) { return out.Write(bytes); }));
  return out.Commit();
}

}  // namespace rocksdcp::tools
