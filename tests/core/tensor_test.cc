#include "rocksdcp/tensor.h"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<DType> AllDTypes() {
  std::vector<DType> all;
  for (uint8_t v = 1; v <= kMaxDType; ++v) all.push_back(static_cast<DType>(v));
  return all;
}

// 0, 1, 2, ... as int32, viewed with `sizes`.
class IotaTensor {
 public:
  explicit IotaTensor(std::vector<int64_t> sizes) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    data_.resize(n);
    std::iota(data_.begin(), data_.end(), 0);
    view_ =
        TensorView::Contiguous(DType::kInt32, std::move(sizes), data_.data());
  }
  const TensorView& view() const { return view_; }
  std::vector<int32_t>& data() { return data_; }

 private:
  std::vector<int32_t> data_;
  TensorView view_;
};

// Reads element `index` of an int32 view through its strides.
int32_t At(const TensorView& v, const std::vector<int64_t>& index) {
  std::vector<int64_t> strides = v.EffectiveStrides();
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides[d];
  return static_cast<const int32_t*>(v.data)[off];
}

TEST(DTypeTest, SizesMatchTorch) {
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E4M3FN), 1u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E5M2), 1u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E4M3FNUZ), 1u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E5M2FNUZ), 1u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E8M0FNU), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt8), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt16), 2u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kUInt8), 1u);
  EXPECT_EQ(DTypeSize(DType::kUInt16), 2u);
  EXPECT_EQ(DTypeSize(DType::kUInt32), 4u);
  EXPECT_EQ(DTypeSize(DType::kUInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(DType::kComplex32), 4u);
  EXPECT_EQ(DTypeSize(DType::kComplex64), 8u);
  EXPECT_EQ(DTypeSize(DType::kComplex128), 16u);
  EXPECT_EQ(DTypeSize(static_cast<DType>(0)), 0u);
}

TEST(DTypeTest, NamesRoundTripForEveryDType) {
  for (DType d : AllDTypes()) {
    SCOPED_TRACE(DTypeName(d));
    EXPECT_NE(DTypeName(d), "invalid");
    ASSERT_OK_AND_ASSIGN(DType back, DTypeFromName(DTypeName(d)));
    EXPECT_EQ(back, d);
    ASSERT_OK_AND_ASSIGN(DType prefixed,
                         DTypeFromName("torch." + std::string(DTypeName(d))));
    EXPECT_EQ(prefixed, d);
  }
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeName(DType::kFloat8E4M3FN), "float8_e4m3fn");
}

TEST(DTypeTest, UnknownNameIsInvalidArgument) {
  EXPECT_THAT(DTypeFromName("float128"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("float128")));
  EXPECT_THAT(DTypeFromName(""), StatusIs(StatusCode::kInvalidArgument,
                                          HasSubstr("unknown dtype")));
}

TEST(DTypeTest, ValidRangeIsOneToMax) {
  EXPECT_FALSE(IsValidDType(0));
  EXPECT_TRUE(IsValidDType(1));
  EXPECT_TRUE(IsValidDType(kMaxDType));
  EXPECT_FALSE(IsValidDType(kMaxDType + 1));
  EXPECT_EQ(DTypeName(static_cast<DType>(kMaxDType + 1)), "invalid");
}

TEST(TensorViewTest, NumelAndNbytes) {
  TensorView scalar = TensorView::Contiguous(DType::kFloat64, {}, nullptr);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.nbytes(), 8u);
  TensorView empty =
      TensorView::Contiguous(DType::kFloat32, {3, 0, 2}, nullptr);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);
  TensorView m = TensorView::Contiguous(DType::kBFloat16, {3, 5}, nullptr);
  EXPECT_EQ(m.numel(), 15);
  EXPECT_EQ(m.nbytes(), 30u);
}

TEST(TensorViewTest, EffectiveStridesAndContiguity) {
  EXPECT_THAT(ContiguousStrides({2, 3, 4}), ElementsAre(12, 4, 1));
  EXPECT_THAT(ContiguousStrides({}), ElementsAre());
  TensorView v = TensorView::Contiguous(DType::kInt32, {2, 3}, nullptr);
  EXPECT_TRUE(v.IsContiguous());
  EXPECT_THAT(v.EffectiveStrides(), ElementsAre(3, 1));
  v.strides = {1, 2};  // Transposed.
  EXPECT_FALSE(v.IsContiguous());
  v.sizes = {1, 3};
  v.strides = {99, 1};  // A size-1 dim's stride doesn't matter.
  EXPECT_TRUE(v.IsContiguous());
}

TEST(TensorViewTest, ValidateNamesTheTensor) {
  int32_t x = 0;
  TensorView ok = TensorView::Contiguous(DType::kInt32, {1}, &x);
  EXPECT_OK(ok.Validate("w"));

  TensorView negative = TensorView::Contiguous(DType::kInt32, {-1}, &x);
  EXPECT_THAT(negative.Validate("layer.w"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'layer.w'"), HasSubstr("negative"))));

  TensorView strides = ok;
  strides.strides = {1, 1};
  EXPECT_THAT(strides.Validate("s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("strides")));

  TensorView null = TensorView::Contiguous(DType::kInt32, {2}, nullptr);
  EXPECT_THAT(null.Validate("n"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("null")));
  // No elements, no data needed.
  EXPECT_OK(
      TensorView::Contiguous(DType::kInt32, {0, 4}, nullptr).Validate("e"));

  TensorView huge =
      TensorView::Contiguous(DType::kInt64, {int64_t{1} << 40, 1 << 22}, &x);
  EXPECT_THAT(huge.Validate("h"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("overflow")));

  TensorView bad_dtype = ok;
  bad_dtype.dtype = static_cast<DType>(0);
  EXPECT_THAT(bad_dtype.Validate("d"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("dtype")));
}

TEST(TensorViewTest, NarrowViewsABox) {
  IotaTensor t({4, 5});
  TensorView box = t.view().Narrow({1, 2}, {2, 3});
  EXPECT_THAT(box.sizes, ElementsAre(2, 3));
  EXPECT_THAT(box.strides, ElementsAre(5, 1));
  EXPECT_FALSE(box.IsContiguous());
  EXPECT_EQ(At(box, {0, 0}), 7);
  EXPECT_EQ(At(box, {1, 2}), 14);
  // A box of a box.
  TensorView inner = box.Narrow({1, 1}, {1, 2});
  EXPECT_EQ(At(inner, {0, 0}), 13);
  EXPECT_EQ(At(inner, {0, 1}), 14);
}

TEST(TensorViewTest, NarrowOfStridedView) {
  IotaTensor t({3, 4});
  TensorView transposed = t.view();
  transposed.sizes = {4, 3};
  transposed.strides = {1, 4};
  TensorView box = transposed.Narrow({2, 1}, {2, 2});
  // transposed[i][j] = t[j][i] = 4j + i.
  EXPECT_EQ(At(box, {0, 0}), 6);
  EXPECT_EQ(At(box, {1, 1}), 11);
}

TEST(CopyTensorTest, ContiguousToContiguous) {
  IotaTensor src({2, 3});
  std::vector<int32_t> out(6, -1);
  CopyTensor(src.view(),
             TensorView::Contiguous(DType::kInt32, {2, 3}, out.data()));
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(CopyTensorTest, TransposedSourceToContiguous) {
  IotaTensor src({2, 3});
  TensorView t = src.view();
  t.sizes = {3, 2};
  t.strides = {1, 3};
  std::vector<int32_t> out(6, -1);
  CopyTensor(t, TensorView::Contiguous(DType::kInt32, {3, 2}, out.data()));
  EXPECT_THAT(out, ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(CopyTensorTest, ContiguousToTransposedDestination) {
  IotaTensor src({3, 2});
  std::vector<int32_t> out(6, -1);
  TensorView dst = TensorView::Contiguous(DType::kInt32, {3, 2}, out.data());
  dst.strides = {1, 3};
  CopyTensor(src.view(), dst);
  // dst[i][j] lives at out[i + 3j] and equals 2i + j.
  EXPECT_THAT(out, ElementsAre(0, 2, 4, 1, 3, 5));
}

TEST(CopyTensorTest, BoxIntoBoxOf3D) {
  IotaTensor src({3, 4, 5});
  std::vector<int32_t> out(2 * 6 * 7, -1);
  TensorView dst = TensorView::Contiguous(DType::kInt32, {2, 6, 7}, out.data());
  CopyTensor(src.view().Narrow({1, 1, 2}, {2, 2, 3}),
             dst.Narrow({0, 3, 4}, {2, 2, 3}));
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      for (int64_t k = 0; k < 7; ++k) {
        const bool inside = j >= 3 && j < 5 && k >= 4 && k < 7;
        const int32_t want =
            inside ? At(src.view(), {i + 1, j - 3 + 1, k - 4 + 2}) : -1;
        EXPECT_EQ(At(dst, {i, j, k}), want) << i << "," << j << "," << k;
      }
    }
  }
}

TEST(CopyTensorTest, SizeOneDimsWithOddStrides) {
  IotaTensor src({1, 4, 1});
  TensorView s = src.view();
  s.strides = {1000, 1, 77};  // Size-1 dims: strides never used.
  std::vector<int32_t> out(4, -1);
  CopyTensor(s, TensorView::Contiguous(DType::kInt32, {1, 4, 1}, out.data()));
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3));
}

TEST(CopyTensorTest, ZeroDAndEmpty) {
  double x = 2.5, y = 0;
  CopyTensor(TensorView::Contiguous(DType::kFloat64, {}, &x),
             TensorView::Contiguous(DType::kFloat64, {}, &y));
  EXPECT_EQ(y, 2.5);
  // Zero elements: nothing is touched, null data is fine.
  CopyTensor(TensorView::Contiguous(DType::kFloat64, {0, 3}, nullptr),
             TensorView::Contiguous(DType::kFloat64, {0, 3}, nullptr));
}

TEST(CopyTensorTest, EveryDTypeCopiesBytesExactly) {
  for (DType d : AllDTypes()) {
    SCOPED_TRACE(DTypeName(d));
    const size_t elem = DTypeSize(d);
    std::vector<uint8_t> src(3 * 2 * elem), dst(src.size(), 0);
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = static_cast<uint8_t>(i * 7 + 1);
    TensorView t = TensorView::Contiguous(d, {2, 3}, src.data());
    t.sizes = {3, 2};
    t.strides = {1, 3};
    CopyTensor(t, TensorView::Contiguous(d, {3, 2}, dst.data()));
    // dst element (i, j) is src element (j, i).
    for (size_t i = 0; i < 3; ++i) {
      for (size_t j = 0; j < 2; ++j) {
        for (size_t b = 0; b < elem; ++b) {
          ASSERT_EQ(dst[(i * 2 + j) * elem + b], src[(j * 3 + i) * elem + b]);
        }
      }
    }
  }
}

TEST(DLPackTest, RoundTripForEveryDType) {
  for (DType d : AllDTypes()) {
    SCOPED_TRACE(DTypeName(d));
    ASSERT_OK_AND_ASSIGN(DType back, DTypeFromDLPack(DTypeToDLPack(d)));
    EXPECT_EQ(back, d);

    std::vector<uint8_t> buf(2 * 3 * DTypeSize(d));
    TensorView view = TensorView::Contiguous(d, {2, 3}, buf.data());
    DLTensor dl = ToDLPack(view);
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    EXPECT_EQ(dl.ndim, 2);
    EXPECT_EQ(dl.data, buf.data());
    ASSERT_OK_AND_ASSIGN(TensorView round, FromDLPack(dl));
    EXPECT_EQ(round.dtype, d);
    EXPECT_THAT(round.sizes, ElementsAre(2, 3));
    EXPECT_THAT(round.strides, ElementsAre(3, 1));
    EXPECT_EQ(round.data, buf.data());
  }
}

TEST(DLPackTest, NewerDLPackCodesAreUnderstood) {
  ASSERT_OK_AND_ASSIGN(DType b, DTypeFromDLPack(DLDataType{6, 8, 1}));
  EXPECT_EQ(b, DType::kBool);
  ASSERT_OK_AND_ASSIGN(DType f8, DTypeFromDLPack(DLDataType{10, 8, 1}));
  EXPECT_EQ(f8, DType::kFloat8E4M3FN);
}

TEST(DLPackTest, StridesAndByteOffsetAreHonoured) {
  std::vector<float> buf(16);
  int64_t shape[] = {3, 2};
  int64_t strides[] = {1, 4};
  DLTensor dl{};
  dl.data = buf.data();
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = DLDataType{kDLFloat, 32, 1};
  dl.shape = shape;
  dl.strides = strides;
  dl.byte_offset = 8;
  ASSERT_OK_AND_ASSIGN(TensorView v, FromDLPack(dl));
  EXPECT_THAT(v.strides, ElementsAre(1, 4));
  EXPECT_EQ(v.data, buf.data() + 2);
  // Null strides mean contiguous.
  dl.strides = nullptr;
  ASSERT_OK_AND_ASSIGN(TensorView c, FromDLPack(dl));
  EXPECT_TRUE(c.IsContiguous());
}

TEST(DLPackTest, NonCpuDeviceIsRefusedNamingIt) {
  float x = 0;
  int64_t shape[] = {1};
  DLTensor dl{};
  dl.data = &x;
  dl.device = DLDevice{kDLCUDA, 3};
  dl.ndim = 1;
  dl.dtype = DLDataType{kDLFloat, 32, 1};
  dl.shape = shape;
  EXPECT_THAT(FromDLPack(dl), StatusIs(StatusCode::kInvalidArgument,
                                       AllOf(HasSubstr("CUDA"), HasSubstr(":3"),
                                             HasSubstr("CPU"))));
  dl.device = DLDevice{kDLROCM, 0};
  EXPECT_THAT(FromDLPack(dl),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ROCm")));
  // Pinned host memory is CPU memory.
  dl.device = DLDevice{kDLCUDAHost, 0};
  EXPECT_OK(FromDLPack(dl));
}

TEST(DLPackTest, UnsupportedDTypesAreRefused) {
  EXPECT_THAT(DTypeFromDLPack(DLDataType{kDLFloat, 32, 4}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("lanes")));
  EXPECT_THAT(DTypeFromDLPack(DLDataType{kDLFloat, 24, 1}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bits 24")));
}

TEST(DLPackTest, MalformedTensorIsRefused) {
  int64_t shape[] = {-2};
  DLTensor dl{};
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = 1;
  dl.dtype = DLDataType{kDLInt, 32, 1};
  dl.shape = shape;
  EXPECT_THAT(FromDLPack(dl),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("negative")));
}

}  // namespace
}  // namespace rocksdcp
