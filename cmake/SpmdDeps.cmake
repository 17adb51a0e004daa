# Finds the dependencies. Debian packages are preferred; a plain include
# folder (SPMD_EXTRA_INCLUDE) can supply the header-only ones on machines
# without a package registry (see scripts/gpu-check.sh).

if(SPMD_EXTRA_INCLUDE)
  include_directories(SYSTEM ${SPMD_EXTRA_INCLUDE})
  link_directories(${SPMD_EXTRA_INCLUDE}/../lib)
endif()

# nlohmann_json (header-only)
find_package(nlohmann_json 3 QUIET)
add_library(spmd_dep_json INTERFACE)
if(nlohmann_json_FOUND)
  target_link_libraries(spmd_dep_json INTERFACE nlohmann_json::nlohmann_json)
endif()

# CLI11 (header-only)
find_package(CLI11 QUIET)
add_library(spmd_dep_cli INTERFACE)
if(CLI11_FOUND)
  target_link_libraries(spmd_dep_cli INTERFACE CLI11::CLI11)
endif()

# simdjson: the .pt2 model JSON parser (chosen by measurement: see
# docs/PERFORMANCE.md).
find_package(simdjson QUIET)
add_library(spmd_dep_simdjson INTERFACE)
if(simdjson_FOUND)
  target_link_libraries(spmd_dep_simdjson INTERFACE simdjson::simdjson)
else()
  target_link_libraries(spmd_dep_simdjson INTERFACE simdjson)
endif()

# libzip: archive access.
find_package(PkgConfig QUIET)
add_library(spmd_dep_zip INTERFACE)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBZIP QUIET IMPORTED_TARGET libzip)
endif()
if(LIBZIP_FOUND)
  target_link_libraries(spmd_dep_zip INTERFACE PkgConfig::LIBZIP)
else()
  target_link_libraries(spmd_dep_zip INTERFACE zip)
endif()

# LibTorch: only the runtime links it. pip's torch (2.6 to 2.14, CPU or
# CUDA): CMake finds it through torch.utils.cmake_prefix_path, asked of
# SPMD_PYTHON (scripts/setup.sh's venv by default) unless CMAKE_PREFIX_PATH
# or Torch_DIR already points at it.
if(SPMD_BUILD_RUNTIME)
  include(SpmdTorch)
endif()
