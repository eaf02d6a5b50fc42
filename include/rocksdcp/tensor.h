// TensorView: a non-owning view of a strided, CPU-resident tensor, and its
// conversion to and from DLPack's DLTensor.
//
// rocksdcp never owns tensor memory. A trainer hands it views of its own
// buffers: save reads through them, load writes through them. The view must
// stay valid (and, for save, unchanged) until the call that uses it returns.
//
// Thread safety: a TensorView is a plain value; concurrent reads of the same
// view are safe. Writing through views of overlapping memory from several
// threads is the caller's race.

#ifndef ROCKSDCP_TENSOR_H_
#define ROCKSDCP_TENSOR_H_

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp {

// Element types: every fixed-width dtype of torch.
//
// NOTE: these values are written to disk in every checkpoint. Never change
// an existing value; add new ones at the end.
enum class DType : uint8_t {
  kFloat64 = 1,
  kFloat32 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kFloat8E4M3FN = 5,
  kFloat8E5M2 = 6,
  kFloat8E4M3FNUZ = 7,
  kFloat8E5M2FNUZ = 8,
  kInt8 = 9,
  kInt16 = 10,
  kInt32 = 11,
  kInt64 = 12,
  kUInt8 = 13,
  kUInt16 = 14,
  kUInt32 = 15,
  kUInt64 = 16,
  kBool = 17,
  kComplex32 = 18,
  kComplex64 = 19,
  kComplex128 = 20,
  kFloat8E8M0FNU = 21,
};

// The largest DType value; every value in [1, kMaxDType] is valid.
inline constexpr uint8_t kMaxDType = 21;

// Bytes per element.
size_t DTypeSize(DType dtype);

// torch's name without the "torch." prefix: "float32", "bfloat16", ...
std::string_view DTypeName(DType dtype);

// Parses a name from DTypeName (also accepts a "torch." prefix).
Result<DType> DTypeFromName(std::string_view name);

// True if `value` is a DType this build knows. Use it before casting bytes
// read from elsewhere.
bool IsValidDType(uint8_t value);

// A strided view of `sizes` elements of `dtype` at `data`.
//
// `strides` count elements, not bytes, as torch's do. Empty `strides` means
// contiguous (row-major). A 0-d tensor has empty `sizes` and one element.
struct TensorView {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  void* data = nullptr;

  // A contiguous view of `sizes` at `data`.
  static TensorView Contiguous(DType dtype, std::vector<int64_t> sizes,
                               void* data);

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  // Product of sizes (1 for a 0-d tensor, 0 when any size is 0).
  int64_t numel() const;
  // numel() * DTypeSize(dtype): the bytes of the contiguous projection.
  uint64_t nbytes() const;
  // The strides in effect: `strides`, or the row-major ones when empty.
  std::vector<int64_t> EffectiveStrides() const;
  // True if the elements are densely packed in row-major order.
  bool IsContiguous() const;

  // Checks the view is well formed: sizes >= 0, strides (when given) match
  // sizes in length, data non-null when numel() > 0, and nbytes() does not
  // overflow. `what` names the tensor in the error (e.g. its fqn).
  Status Validate(std::string_view what) const;

  // A view of the box [offsets, offsets + lengths) of this view.
  // REQUIRES: Validate().ok(); the box lies within sizes.
  TensorView Narrow(const std::vector<int64_t>& offsets,
                    const std::vector<int64_t>& lengths) const;
};

// Row-major strides (in elements) for `sizes`.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& sizes);

// Copies the elements of `src` into `dst`, element for element, honouring
// both views' strides.
// REQUIRES: same dtype and sizes; the memory does not overlap.
void CopyTensor(const TensorView& src, const TensorView& dst);

// Views a DLPack tensor. Only CPU memory (kDLCPU, kDLCUDAHost, kDLROCMHost)
// is accepted; any other device is refused with InvalidArgument naming it.
// The view borrows `t`'s shape, strides and data.
Result<TensorView> FromDLPack(const DLTensor& t);

// Maps a DLPack dtype to ours. DLPack codes newer than the installed
// dlpack.h (bool = 6, the float8 family 7..14) are understood too.
Result<DType> DTypeFromDLPack(DLDataType dt);
DLDataType DTypeToDLPack(DType dtype);

// A DLTensor describing `view` on kDLCPU. The result points into `view`'s
// `sizes` and `strides` vectors (strides are materialised into `view` when
// empty), so `view` must outlive it and must not be resized meanwhile.
DLTensor ToDLPack(TensorView& view);

}  // namespace rocksdcp

#endif  // ROCKSDCP_TENSOR_H_
