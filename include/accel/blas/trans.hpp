// accel/blas/trans.hpp — accel::blas::Trans: whether a GEMM operand is used as stored or transposed.
#pragma once

namespace accel::blas {

/// op(X) = X (no) or X^T (yes). Row-major: an m x k operand stored transposed is a k x m array.
enum class Trans : bool { no = false, yes = true };

}  // namespace accel::blas
