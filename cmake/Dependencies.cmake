# Third-party libraries, all from Debian packages (scripts/install-deps.sh).

# OpenBLAS, the OpenMP build: it shares our OpenMP pool and runs single-threaded inside a parallel
# region. Debian's libopenblas-openmp-dev installs it under openblas-openmp/; we link it by path so
# the pthread build can never be picked up by accident.
find_library(RF_OPENBLAS_LIB NAMES openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH REQUIRED)
find_path(RF_OPENBLAS_INCLUDE cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH REQUIRED)
add_library(rf_openblas INTERFACE)
target_link_libraries(rf_openblas INTERFACE ${RF_OPENBLAS_LIB} OpenMP::OpenMP_CXX)
target_include_directories(rf_openblas SYSTEM INTERFACE ${RF_OPENBLAS_INCLUDE})

find_library(RF_DNNL_LIB NAMES dnnl REQUIRED)
add_library(rf_dnnl INTERFACE)
target_link_libraries(rf_dnnl INTERFACE ${RF_DNNL_LIB} OpenMP::OpenMP_CXX)

# The Hugging Face tokenizer (src/data): PCRE2 runs tokenizer.json's Unicode split regexes (UTF + UCP,
# JIT), utf8proc its NFC normalizer.
pkg_check_modules(RF_PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(RF_UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)

# MPI (Open MPI from Debian; any MPI-3 works) for src/dist, the only code that includes mpi.h. We use
# its C API from C++: MPI_CXX_SKIP_MPICXX keeps the deprecated C++ bindings out of the headers. The
# tests launch with MPIEXEC_EXECUTABLE (mpirun).
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS CXX)
