# Finds the dependencies: Debian's packages, or a bundle of their headers
# and libraries (SPMD_DEPS_BUNDLE, made by scripts/gpu-bundle.sh) on a
# machine without a package registry. With a bundle, the packages' CMake
# and pkg-config files are not consulted, and its include/ and lib/ come
# before the system's, so a build from it uses nothing else.

if(SPMD_DEPS_BUNDLE)
  if(NOT EXISTS ${SPMD_DEPS_BUNDLE}/MANIFEST)
    message(FATAL_ERROR "SPMD_DEPS_BUNDLE=${SPMD_DEPS_BUNDLE} is not a bundle (no MANIFEST): run scripts/gpu-bundle.sh")
  endif()
  include_directories(BEFORE SYSTEM ${SPMD_DEPS_BUNDLE}/include)
  link_directories(BEFORE ${SPMD_DEPS_BUNDLE}/lib)
  list(APPEND CMAKE_BUILD_RPATH ${SPMD_DEPS_BUNDLE}/lib)
  add_link_options(-Wl,-rpath-link,${SPMD_DEPS_BUNDLE}/lib)
  foreach(pkg nlohmann_json CLI11 spdlog simdjson PkgConfig Catch2 benchmark)
    set(CMAKE_DISABLE_FIND_PACKAGE_${pkg} ON)
  endforeach()
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

# spdlog (header-only, on fmt header-only): only support/Log.cpp includes
# it, so nothing links libspdlog or libfmt. A bundle keeps both in its own
# spdlog/include, off the global include path: LibTorch ships another fmt,
# which the runtime's sources must keep reading.
find_package(spdlog CONFIG QUIET)
find_package(Threads REQUIRED)
add_library(spmd_dep_spdlog INTERFACE)
target_compile_definitions(spmd_dep_spdlog INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)
target_link_libraries(spmd_dep_spdlog INTERFACE Threads::Threads)
if(SPMD_DEPS_BUNDLE)
  target_include_directories(spmd_dep_spdlog SYSTEM INTERFACE ${SPMD_DEPS_BUNDLE}/spdlog/include)
elseif(spdlog_FOUND)
  get_target_property(spmd_spdlog_include spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(spmd_dep_spdlog SYSTEM INTERFACE ${spmd_spdlog_include})
else()
  message(FATAL_ERROR "spdlog not found: install libspdlog-dev (scripts/setup.sh does)")
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

# mimalloc: the allocator of the compiler's executables (spmdc,
# bench_compiler). A compile is about a third malloc and free (the IR's
# small vectors and strings); mimalloc makes `spmdc compile` 1.5x faster
# than glibc's malloc (docs/PERFORMANCE.md, "The allocator"). Linked as a
# shared library ahead of libc, it replaces malloc for the whole process
# (new/delete included). Not for the runtime (LibTorch and CUDA bring their
# own allocation paths), nor for sanitizer and fuzz builds (their runtimes
# replace malloc), nor from a GPU bundle. Without it the tools use glibc's
# malloc; `spmdc --version` says which.
option(SPMD_MIMALLOC "Link spmdc and bench_compiler with mimalloc (Debian's libmimalloc-dev) when found" ON)
add_library(spmd_dep_allocator INTERFACE)
if(SPMD_MIMALLOC AND NOT SPMD_SANITIZE AND NOT SPMD_FUZZ AND NOT SPMD_DEPS_BUNDLE)
  find_package(mimalloc CONFIG QUIET)
endif()
if(mimalloc_FOUND)
  # --no-as-needed: nothing names a mimalloc symbol but malloc itself.
  target_link_libraries(spmd_dep_allocator INTERFACE -Wl,--push-state,--no-as-needed mimalloc -Wl,--pop-state)
  target_compile_definitions(spmd_dep_allocator INTERFACE SPMD_MIMALLOC=1)
else()
  message(STATUS "mimalloc not linked: spmdc uses glibc's malloc (slower; apt-get install libmimalloc-dev)")
endif()

# LibTorch: only the runtime links it. pip's torch (2.6 to 2.14, CPU or
# CUDA): CMake finds it through torch.utils.cmake_prefix_path, asked of
# SPMD_PYTHON (scripts/setup.sh's venv by default) unless CMAKE_PREFIX_PATH
# or Torch_DIR already points at it.
if(SPMD_BUILD_RUNTIME)
  include(SpmdTorch)
endif()
