# Finds the Debian-packaged dependencies (see ../shared/docs/STACK.md for the pitfalls) and, optionally, CUDA.

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED)
find_package(dnnl CONFIG REQUIRED)  # needs ocl-icd-opencl-dev on Debian

# Debian's small OpenCV packages ship no CMake config: find headers and libraries directly.
find_path(OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
foreach(component core imgproc imgcodecs)
  find_library(OPENCV_${component}_LIBRARY opencv_${component} REQUIRED)
  add_library(OpenCV::${component} UNKNOWN IMPORTED)
  set_target_properties(OpenCV::${component} PROPERTIES
    IMPORTED_LOCATION ${OPENCV_${component}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${OPENCV_INCLUDE_DIR})
endforeach()

find_package(SQLite3 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)  # the ampwb command line (header-only: libcli11-dev)
find_package(ZLIB REQUIRED)  # gzip: the IDX files of the MNIST family

# MPI (Open MPI: openmpi-bin, libopenmpi-dev) for runs on several processes (engine/dist); without it the build
# still works and refuses a launch of several ranks, saying why.
set(AMPWB_HAVE_MPI OFF)
if(AMPWB_ENABLE_MPI)
  include(CheckLanguage)
  check_language(C)
  if(CMAKE_C_COMPILER)
    enable_language(C)  # FindMPI's C component needs it; the engine calls MPI's C API (no C sources are built)
    find_package(MPI COMPONENTS C)
    if(MPI_C_FOUND)
      set(AMPWB_HAVE_MPI ON)
    endif()
  endif()
endif()

# CUDA: on when nvcc is found through PATH, CUDACXX or the usual toolkit location.
set(AMPWB_HAVE_CUDA OFF)
if(AMPWB_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # "native" fails on machines without a GPU
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 dialect for nvcc
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # cuDNN ships no CMake config: find its header and library under the toolkit (or CUDNN_ROOT) and make an
    # imported target. cuBLASLt comes with the toolkit (CUDA::cublasLt). Without either, no CUDA backend.
    find_path(CUDNN_INCLUDE_DIR cudnn.h
      HINTS ENV CUDNN_ROOT ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES include)
    find_library(CUDNN_LIBRARY cudnn
      HINTS ENV CUDNN_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES lib64 lib)
    if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND TARGET CUDA::cublasLt)
      if(NOT TARGET CUDNN::cudnn)
        add_library(CUDNN::cudnn UNKNOWN IMPORTED)
        set_target_properties(CUDNN::cudnn PROPERTIES
          IMPORTED_LOCATION ${CUDNN_LIBRARY}
          INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
      endif()
      file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h _ampwb_cudnn_version REGEX "define CUDNN_(MAJOR|MINOR) ")
      string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*CUDNN_MINOR ([0-9]+).*" "\\1.\\2" _ampwb_cudnn_version
             "${_ampwb_cudnn_version}")
      message(STATUS "cuDNN ${_ampwb_cudnn_version}: ${CUDNN_LIBRARY}")
      # cudnn-frontend's headers, for cuDNN's graph API (scripts/install-deps.sh fetches the pinned version into
      # .cache/; CUDNN_FRONTEND_ROOT points elsewhere). Without them the convolutions use the legacy API only.
      find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
        HINTS ENV CUDNN_FRONTEND_ROOT ${PROJECT_SOURCE_DIR}/.cache/cudnn-frontend/1.32.0
        PATH_SUFFIXES include NO_DEFAULT_PATH)
      message(STATUS "cudnn-frontend: ${CUDNN_FRONTEND_INCLUDE_DIR}")
      set(AMPWB_HAVE_CUDA ON)
    else()
      message(WARNING "nvcc found, but not cuDNN (cudnn.h: ${CUDNN_INCLUDE_DIR}, libcudnn: ${CUDNN_LIBRARY}) "
                      "or cuBLASLt: building without the CUDA backend")
    endif()
  else()
    message(STATUS "nvcc not found: building without the CUDA backend")
  endif()
endif()

# NCCL (from the CUDA installation, or NCCL_ROOT) for runs on several GPUs (engine/dist/nccl_communicator.h): only
# with the CUDA backend. Without it a CUDA build still trains one GPU per run and refuses several ranks on GPUs,
# saying why.
set(AMPWB_HAVE_NCCL OFF)
if(AMPWB_HAVE_CUDA AND AMPWB_ENABLE_NCCL)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
    HINTS ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib64 lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    if(NOT TARGET NCCL::nccl)
      add_library(NCCL::nccl UNKNOWN IMPORTED)
      set_target_properties(NCCL::nccl PROPERTIES
        IMPORTED_LOCATION ${NCCL_LIBRARY}
        INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    endif()
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _ampwb_nccl_version REGEX "define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*" "\\1.\\2.\\3"
           _ampwb_nccl_version "${_ampwb_nccl_version}")
    message(STATUS "NCCL ${_ampwb_nccl_version}: ${NCCL_LIBRARY}")
    set(AMPWB_HAVE_NCCL ON)
  else()
    message(STATUS "NCCL not found (nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}): several ranks on GPUs "
                   "are refused")
  endif()
endif()
