// Every difference between the LibTorch versions spmd_runtime builds
// against (Debian's 1.13, CUDA builds of 2.x) lives here.
//
//   #if SPMD_TORCH_AT_LEAST(2, 1)
//     ... c10::ScalarType::Float8_e4m3fn exists ...
//   #endif
//
// Ops that only some versions have are not listed here: the executor asks
// the dispatcher at prepare time and uses a fallback (Fallbacks.h) only when
// the linked LibTorch lacks the op.
#pragma once

#include <c10/util/Optional.h>  // c10::optional: c10's own in 1.13, std::optional's alias in 2.x
#include <torch/version.h>

/// True when the linked LibTorch is at least major.minor.
#define SPMD_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

/// c10::ScalarType has the float8 types (torch 2.1+).
#define SPMD_TORCH_HAS_FLOAT8 SPMD_TORCH_AT_LEAST(2, 1)
/// c10::ScalarType has the "fnuz" float8 types (torch 2.2+).
#define SPMD_TORCH_HAS_FLOAT8_FNUZ SPMD_TORCH_AT_LEAST(2, 2)
/// c10::ScalarType has the unsigned types beyond uint8 (torch 2.3+).
#define SPMD_TORCH_HAS_UINT16 SPMD_TORCH_AT_LEAST(2, 3)
