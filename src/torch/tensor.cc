// torch::Tensor <-> TensorView: a view of the tensor's own memory, with
// LibTorch's sizes and strides (both count elements, as rocksdcp's do).

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "rocksdcp/torch.h"
#include "torch/torch_util.h"

namespace rocksdcp::torch {

namespace {

// One row per LibTorch scalar type that rocksdcp has.
struct TypePair {
  c10::ScalarType torch;
  DType dtype;
};
constexpr TypePair kTypes[] = {
    {c10::ScalarType::Byte, DType::kUInt8},
    {c10::ScalarType::Char, DType::kInt8},
    {c10::ScalarType::Short, DType::kInt16},
    {c10::ScalarType::Int, DType::kInt32},
    {c10::ScalarType::Long, DType::kInt64},
    {c10::ScalarType::Half, DType::kFloat16},
    {c10::ScalarType::Float, DType::kFloat32},
    {c10::ScalarType::Double, DType::kFloat64},
    {c10::ScalarType::ComplexHalf, DType::kComplex32},
    {c10::ScalarType::ComplexFloat, DType::kComplex64},
    {c10::ScalarType::ComplexDouble, DType::kComplex128},
    {c10::ScalarType::Bool, DType::kBool},
    {c10::ScalarType::BFloat16, DType::kBFloat16},
// The dtypes LibTorch gained after 1.13, from the release that added each.
#if ROCKSDCP_TORCH_AT_LEAST(2, 1)
    {c10::ScalarType::Float8_e4m3fn, DType::kFloat8E4M3FN},
    {c10::ScalarType::Float8_e5m2, DType::kFloat8E5M2},
#endif
#if ROCKSDCP_TORCH_AT_LEAST(2, 2)
    {c10::ScalarType::Float8_e4m3fnuz, DType::kFloat8E4M3FNUZ},
    {c10::ScalarType::Float8_e5m2fnuz, DType::kFloat8E5M2FNUZ},
#endif
#if ROCKSDCP_TORCH_AT_LEAST(2, 3)
    {c10::ScalarType::UInt16, DType::kUInt16},
    {c10::ScalarType::UInt32, DType::kUInt32},
    {c10::ScalarType::UInt64, DType::kUInt64},
#endif
#if ROCKSDCP_TORCH_AT_LEAST(2, 7)
    {c10::ScalarType::Float8_e8m0fnu, DType::kFloat8E8M0FNU},
#endif
};

std::string Quoted(std::string_view fqn) {
  return "tensor '" + std::string(fqn) + "'";
}

// True if no two elements of `view` share memory, by a test that is
// sufficient, not necessary: sorted by stride, each dimension of more than
// one element must step past the whole extent of the smaller ones. Every
// tensor that slicing, transposing and permuting make passes it;
// at::has_internal_overlap answers "too hard" for all but contiguous ones.
bool ElementsAreDisjoint(const TensorView& view) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    if (view.sizes[d] == 0) return true;  // No elements at all.
    if (view.sizes[d] > 1) dims.emplace_back(view.strides[d], view.sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;  // Elements spanned by the dimensions so far.
  for (const auto& [stride, size] : dims) {
    if (stride < extent) return false;
    // No overflow: LibTorch keeps every element within its storage.
    extent = stride * size;
  }
  return true;
}

}  // namespace

Result<DType> DTypeOf(c10::ScalarType type) {
  for (const TypePair& t : kTypes) {
    if (t.torch == type) return t.dtype;
  }
  return Status::InvalidArgument(std::string("LibTorch dtype ") +
                                 c10::toString(type) +
                                 " has no rocksdcp dtype (quantized dtypes "
                                 "are not supported)");
}

Result<c10::ScalarType> ScalarTypeOf(DType dtype) {
  for (const TypePair& t : kTypes) {
    if (t.dtype == dtype) return t.torch;
  }
  return Status::InvalidArgument("dtype " + std::string(DTypeName(dtype)) +
                                 " has no " + LibTorchName() + " scalar type");
}

Result<TensorView> ViewOf(const at::Tensor& tensor, std::string_view fqn) {
  if (!tensor.defined()) {
    return Status::InvalidArgument(Quoted(fqn) + " is undefined");
  }
  if (!tensor.device().is_cpu()) {
    return Status::InvalidArgument(
        Quoted(fqn) + " is on " + tensor.device().str() +
        "; rocksdcp reads and writes CPU tensors only: move it to the CPU "
        "first (module->to(torch::kCPU))");
  }
  if (tensor.is_quantized()) {
    return Status::InvalidArgument(
        Quoted(fqn) + " is quantized (" +
        std::string(c10::toString(tensor.scalar_type())) +
        "); rocksdcp saves plain dtypes only: dequantize() it first");
  }
  if (tensor.layout() != c10::kStrided) {
    std::string layout = LayoutName(tensor.layout());
    return Status::InvalidArgument(
        Quoted(fqn) + " has layout " + layout +
        "; rocksdcp saves strided (dense) tensors only: convert it with "
        "to_dense() first");
  }
  if (tensor.is_conj() || tensor.is_neg()) {
    return Status::InvalidArgument(
        Quoted(fqn) + " has its lazy " +
        (tensor.is_conj() ? "conjugate" : "negative") +
        " bit set, so its memory does not hold its values: call "
        "resolve_conj() / resolve_neg() first");
  }
  ROCKSDCP_ASSIGN_OR_RETURN(DType dtype, DTypeOf(tensor.scalar_type()));
  TensorView view;
  view.dtype = dtype;
  view.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  view.strides.assign(tensor.strides().begin(), tensor.strides().end());
  // data_ptr() already includes the storage offset of a slice.
  view.data = tensor.numel() == 0 ? nullptr : tensor.data_ptr();
  ROCKSDCP_RETURN_IF_ERROR(view.Validate(Quoted(fqn)));
  return view;
}

Result<TensorView> MutableViewOf(const at::Tensor& tensor,
                                 std::string_view fqn) {
  ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, ViewOf(tensor, fqn));
  if (!ElementsAreDisjoint(view)) {
    return Status::InvalidArgument(
        Quoted(fqn) +
        " has elements that share memory (a stride of 0, as expand() "
        "makes), so it can't be loaded into: load into a tensor of its "
        "own");
  }
  return view;
}

}  // namespace rocksdcp::torch
