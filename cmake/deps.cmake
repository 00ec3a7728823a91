# deps.cmake — finds the CUDA toolkit (NVRTC, cuda.h), Lua 5.4, SQLite 3 and cJSON.
# Everything lands on the interface target `tailor_deps`. libcuda is NOT linked: the
# driver is loaded with dlopen at run time (runtime/cuda.c).

if(DEFINED ENV{CUDA_HOME} AND NOT CUDAToolkit_ROOT)
  set(CUDAToolkit_ROOT $ENV{CUDA_HOME})
endif()
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
# NVRTC by its file: the CUDA::nvrtc target can drag in the libcuda stub, and libcuda must never
# be linked (it is dlopen'd).
if(NOT CUDAToolkit_FOUND OR NOT CUDA_nvrtc_LIBRARY)
  message(FATAL_ERROR "tailor: no CUDA toolkit found (looked in CUDA_HOME='$ENV{CUDA_HOME}' and "
          "/usr/local/cuda): install the CUDA 13 toolkit or set CUDA_HOME to the folder that "
          "holds include/nvrtc.h and lib64/libnvrtc.so.")
endif()

find_path(LUA_INCLUDE_DIR lua.h PATH_SUFFIXES lua5.4 include/lua5.4)
find_library(LUA_LIBRARY NAMES lua5.4 lua-5.4 liblua5.4.so.0)
find_path(LUA_MULTIARCH_DIR lua5.4-deb-multiarch.h PATH_SUFFIXES x86_64-linux-gnu aarch64-linux-gnu)
find_path(SQLITE_INCLUDE_DIR sqlite3.h)
find_library(SQLITE_LIBRARY NAMES sqlite3 libsqlite3.so.0)
find_path(CJSON_INCLUDE_DIR cjson/cJSON.h)
find_library(CJSON_LIBRARY NAMES cjson libcjson.so.1)

foreach(v LUA_INCLUDE_DIR LUA_LIBRARY SQLITE_INCLUDE_DIR SQLITE_LIBRARY CJSON_INCLUDE_DIR CJSON_LIBRARY)
  if(NOT ${v})
    message(FATAL_ERROR "tailor: ${v} not found: install liblua5.4-dev libsqlite3-dev libcjson-dev "
            "(make deps does it) or add their prefix to CMAKE_PREFIX_PATH.")
  endif()
endforeach()

find_package(Threads REQUIRED)

add_library(tailor_deps INTERFACE)
target_include_directories(tailor_deps SYSTEM INTERFACE
  ${CUDAToolkit_INCLUDE_DIRS} ${LUA_INCLUDE_DIR} ${SQLITE_INCLUDE_DIR} ${CJSON_INCLUDE_DIR})
if(LUA_MULTIARCH_DIR)
  target_include_directories(tailor_deps SYSTEM INTERFACE ${LUA_MULTIARCH_DIR})
endif()
target_link_libraries(tailor_deps INTERFACE ${CUDA_nvrtc_LIBRARY} ${LUA_LIBRARY} ${SQLITE_LIBRARY}
  ${CJSON_LIBRARY} Threads::Threads ${CMAKE_DL_LIBS} m)
