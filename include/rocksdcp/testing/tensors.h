// Tensor helpers for tests of storages and planners. Part of
// rocksdcp::testing.

#ifndef ROCKSDCP_TESTING_TENSORS_H_
#define ROCKSDCP_TESTING_TENSORS_H_

#include <string>

#include "rocksdcp/tensor.h"

namespace rocksdcp::testing {

// The elements of `t` as contiguous bytes, read through its strides: equal
// for two views of any layouts that hold equal elements, so
// EXPECT_EQ(TensorBytes(loaded), TensorBytes(saved)) compares a load with
// what was saved.
std::string TensorBytes(const TensorView& t);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTING_TENSORS_H_
