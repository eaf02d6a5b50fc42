#include "rocksdcp/tensor.h"

#include <cstring>
#include <limits>

namespace rocksdcp {

namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  std::string_view name;
};

// Indexed by the DType value.
constexpr DTypeInfo kDTypes[] = {
    {DType{0}, 0, "invalid"},
    {DType::kFloat64, 8, "float64"},
    {DType::kFloat32, 4, "float32"},
    {DType::kFloat16, 2, "float16"},
    {DType::kBFloat16, 2, "bfloat16"},
    {DType::kFloat8E4M3FN, 1, "float8_e4m3fn"},
    {DType::kFloat8E5M2, 1, "float8_e5m2"},
    {DType::kFloat8E4M3FNUZ, 1, "float8_e4m3fnuz"},
    {DType::kFloat8E5M2FNUZ, 1, "float8_e5m2fnuz"},
    {DType::kInt8, 1, "int8"},
    {DType::kInt16, 2, "int16"},
    {DType::kInt32, 4, "int32"},
    {DType::kInt64, 8, "int64"},
    {DType::kUInt8, 1, "uint8"},
    {DType::kUInt16, 2, "uint16"},
    {DType::kUInt32, 4, "uint32"},
    {DType::kUInt64, 8, "uint64"},
    {DType::kBool, 1, "bool"},
    {DType::kComplex32, 4, "complex32"},
    {DType::kComplex64, 8, "complex64"},
    {DType::kComplex128, 16, "complex128"},
    {DType::kFloat8E8M0FNU, 1, "float8_e8m0fnu"},
};
static_assert(sizeof(kDTypes) / sizeof(kDTypes[0]) == kMaxDType + 1);

// DLPack type codes newer than Debian's dlpack.h (DLPACK_VERSION 60). They
// are part of DLPack's ABI from 0.8 (bool) and 1.1 (float8) on.
constexpr uint8_t kDLBoolCode = 6;
constexpr uint8_t kDLFloat8E4M3FNCode = 10;
constexpr uint8_t kDLFloat8E4M3FNUZCode = 11;
constexpr uint8_t kDLFloat8E5M2Code = 12;
constexpr uint8_t kDLFloat8E5M2FNUZCode = 13;
constexpr uint8_t kDLFloat8E8M0FNUCode = 14;

struct DLMapping {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};
constexpr DLMapping kDLMappings[] = {
    {DType::kFloat64, kDLFloat, 64},
    {DType::kFloat32, kDLFloat, 32},
    {DType::kFloat16, kDLFloat, 16},
    {DType::kBFloat16, kDLBfloat, 16},
    {DType::kFloat8E4M3FN, kDLFloat8E4M3FNCode, 8},
    {DType::kFloat8E5M2, kDLFloat8E5M2Code, 8},
    {DType::kFloat8E4M3FNUZ, kDLFloat8E4M3FNUZCode, 8},
    {DType::kFloat8E5M2FNUZ, kDLFloat8E5M2FNUZCode, 8},
    {DType::kInt8, kDLInt, 8},
    {DType::kInt16, kDLInt, 16},
    {DType::kInt32, kDLInt, 32},
    {DType::kInt64, kDLInt, 64},
    {DType::kUInt8, kDLUInt, 8},
    {DType::kUInt16, kDLUInt, 16},
    {DType::kUInt32, kDLUInt, 32},
    {DType::kUInt64, kDLUInt, 64},
    {DType::kBool, kDLBoolCode, 8},
    {DType::kComplex32, kDLComplex, 32},
    {DType::kComplex64, kDLComplex, 64},
    {DType::kComplex128, kDLComplex, 128},
    {DType::kFloat8E8M0FNU, kDLFloat8E8M0FNUCode, 8},
};

std::string_view DeviceName(int device_type) {
  switch (device_type) {
    case kDLCUDA:
      return "CUDA";
    case kDLCUDAManaged:
      return "CUDA managed";
    case kDLOpenCL:
      return "OpenCL";
    case kDLVulkan:
      return "Vulkan";
    case kDLMetal:
      return "Metal";
    case kDLVPI:
      return "VPI";
    case kDLROCM:
      return "ROCm";
    case kDLExtDev:
      return "an extension device";
    default:
      return "an unknown device";
  }
}

// Copies a box of `sizes` from src to dst; strides in bytes.
void CopyStrided(const uint8_t* src, const int64_t* src_strides, uint8_t* dst,
                 const int64_t* dst_strides, const int64_t* sizes, int dims,
                 size_t elem, size_t inner_bytes) {
  if (dims == 0) {
    std::memcpy(dst, src, inner_bytes);
    return;
  }
  for (int64_t i = 0; i < sizes[0]; ++i) {
    CopyStrided(src + i * src_strides[0], src_strides + 1,
                dst + i * dst_strides[0], dst_strides + 1, sizes + 1, dims - 1,
                elem, inner_bytes);
  }
}

}  // namespace

bool IsValidDType(uint8_t value) { return value >= 1 && value <= kMaxDType; }

size_t DTypeSize(DType dtype) {
  auto v = static_cast<uint8_t>(dtype);
  return IsValidDType(v) ? kDTypes[v].size : 0;
}

std::string_view DTypeName(DType dtype) {
  auto v = static_cast<uint8_t>(dtype);
  return IsValidDType(v) ? kDTypes[v].name : "invalid";
}

Result<DType> DTypeFromName(std::string_view name) {
  std::string_view bare = name;
  if (bare.substr(0, 6) == "torch.") bare.remove_prefix(6);
  for (uint8_t v = 1; v <= kMaxDType; ++v) {
    if (kDTypes[v].name == bare) return kDTypes[v].dtype;
  }
  return Status::InvalidArgument("unknown dtype '" + std::string(name) + "'");
}

TensorView TensorView::Contiguous(DType dtype, std::vector<int64_t> sizes,
                                  void* data) {
  TensorView v;
  v.dtype = dtype;
  v.sizes = std::move(sizes);
  v.data = data;
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

uint64_t TensorView::nbytes() const {
  return static_cast<uint64_t>(numel()) * DTypeSize(dtype);
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return strides;
}

std::vector<int64_t> TensorView::EffectiveStrides() const {
  return strides.empty() ? ContiguousStrides(sizes) : strides;
}

bool TensorView::IsContiguous() const {
  if (strides.empty()) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

Status TensorView::Validate(std::string_view what) const {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("tensor '" + std::string(what) +
                                   "': " + why);
  };
  if (!IsValidDType(static_cast<uint8_t>(dtype))) return bad("invalid dtype");
  if (!strides.empty() && strides.size() != sizes.size()) {
    return bad("has " + std::to_string(sizes.size()) + " sizes but " +
               std::to_string(strides.size()) + " strides");
  }
  uint64_t n = DTypeSize(dtype);
  bool empty = false;
  for (int64_t s : sizes) {
    if (s < 0) return bad("negative size " + std::to_string(s));
    if (s == 0) empty = true;
  }
  if (!empty) {
    for (int64_t s : sizes) {
      if (n > (uint64_t{1} << 62) / static_cast<uint64_t>(s)) {
        return bad("byte size overflows 62 bits");
      }
      n *= static_cast<uint64_t>(s);
    }
    if (data == nullptr) return bad("data is null");
  }
  return Status::OK();
}

TensorView TensorView::Narrow(const std::vector<int64_t>& offsets,
                              const std::vector<int64_t>& lengths) const {
  TensorView v;
  v.dtype = dtype;
  v.strides = EffectiveStrides();
  v.sizes = lengths;
  int64_t elem_offset = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    elem_offset += offsets[i] * v.strides[i];
  }
  v.data = static_cast<uint8_t*>(data) +
           elem_offset * static_cast<int64_t>(DTypeSize(dtype));
  return v;
}

void CopyTensor(const TensorView& src, const TensorView& dst) {
  const int64_t numel = src.numel();
  if (numel == 0) return;
  const size_t elem = DTypeSize(src.dtype);
  std::vector<int64_t> ss = src.EffectiveStrides();
  std::vector<int64_t> ds = dst.EffectiveStrides();
  std::vector<int64_t> sizes = src.sizes;
  // Drop size-1 dims, then merge dims that are contiguous in both views, so
  // that the innermost loop is one memcpy as long as possible.
  std::vector<int64_t> m_sizes, m_ss, m_ds;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!m_sizes.empty() && m_ss.back() == ss[i] * sizes[i] &&
        m_ds.back() == ds[i] * sizes[i]) {
      m_sizes.back() *= sizes[i];
      m_ss.back() = ss[i];
      m_ds.back() = ds[i];
    } else {
      m_sizes.push_back(sizes[i]);
      m_ss.push_back(ss[i]);
      m_ds.push_back(ds[i]);
    }
  }
  size_t inner_bytes = elem;
  if (!m_sizes.empty() && m_ss.back() == 1 && m_ds.back() == 1) {
    inner_bytes = elem * static_cast<size_t>(m_sizes.back());
    m_sizes.pop_back();
    m_ss.pop_back();
    m_ds.pop_back();
  }
  for (auto& s : m_ss) s *= static_cast<int64_t>(elem);
  for (auto& s : m_ds) s *= static_cast<int64_t>(elem);
  CopyStrided(static_cast<const uint8_t*>(src.data), m_ss.data(),
              static_cast<uint8_t*>(dst.data), m_ds.data(), m_sizes.data(),
              static_cast<int>(m_sizes.size()), elem, inner_bytes);
}

Result<DType> DTypeFromDLPack(DLDataType dt) {
  if (dt.lanes != 1) {
    return Status::InvalidArgument("DLPack dtype with " +
                                   std::to_string(dt.lanes) +
                                   " lanes is not supported (need 1)");
  }
  for (const DLMapping& m : kDLMappings) {
    if (m.code == dt.code && m.bits == dt.bits) return m.dtype;
  }
  return Status::InvalidArgument(
      "DLPack dtype (code " + std::to_string(dt.code) + ", bits " +
      std::to_string(dt.bits) + ") has no rocksdcp dtype");
}

DLDataType DTypeToDLPack(DType dtype) {
  for (const DLMapping& m : kDLMappings) {
    if (m.dtype == dtype) return DLDataType{m.code, m.bits, 1};
  }
  return DLDataType{kDLOpaqueHandle, 0, 1};
}

Result<TensorView> FromDLPack(const DLTensor& t) {
  const int dev = t.device.device_type;
  if (dev != kDLCPU && dev != kDLCUDAHost && dev != kDLROCMHost) {
    return Status::InvalidArgument(
        "tensor is on " + std::string(DeviceName(dev)) + " (DLPack device " +
        std::to_string(dev) + ":" + std::to_string(t.device.device_id) +
        "); rocksdcp reads and writes CPU memory only: copy it to the CPU "
        "first");
  }
  if (t.ndim < 0) return Status::InvalidArgument("DLTensor has ndim < 0");
  ROCKSDCP_ASSIGN_OR_RETURN(DType dtype, DTypeFromDLPack(t.dtype));
  TensorView v;
  v.dtype = dtype;
  v.sizes.assign(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) v.strides.assign(t.strides, t.strides + t.ndim);
  v.data = static_cast<uint8_t*>(t.data) + t.byte_offset;
  ROCKSDCP_RETURN_IF_ERROR(v.Validate("DLTensor"));
  return v;
}

DLTensor ToDLPack(TensorView& view) {
  if (view.strides.empty()) view.strides = ContiguousStrides(view.sizes);
  DLTensor t{};
  t.data = view.data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(view.sizes.size());
  t.dtype = DTypeToDLPack(view.dtype);
  t.shape = view.sizes.data();
  t.strides = view.strides.data();
  t.byte_offset = 0;
  return t;
}

}  // namespace rocksdcp
