#include "rocksdcp/testing/tensors.h"

namespace rocksdcp::testing {

std::string TensorBytes(const TensorView& t) {
  std::string out(t.nbytes(), '\0');
  CopyTensor(t, TensorView::Contiguous(t.dtype, t.sizes, out.data()));
  return out;
}

}  // namespace rocksdcp::testing
