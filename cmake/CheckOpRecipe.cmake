# cmake -DROOT=<source tree> -P CheckOpRecipe.cmake
# Keeps the recipe for adding a backend op (engine/backend/backend.h's opening comment, docs/ARCHITECTURE.md) true:
# an op is its entry in engine/backend/backend_ops.def, its implementations and its op case, and nothing else.
# Fails naming each break: an op the CPU or CUDA backend does not implement (required ops) or that backend.cpp does
# not compose (fused ops), an op no op case runs, a decorator that does not forward through backend_ops.def, and a
# class deriving from Backend outside the recipe's files (it would have to list every op by hand).
cmake_minimum_required(VERSION 3.25)
set(def ${ROOT}/engine/backend/backend_ops.def)
set(backends engine/backend/cpu/cpu_backend.h engine/backend/cuda/cuda_backend.h)
set(defaults engine/backend/backend.cpp)
set(op_cases tests/test_backend_ops.cpp)
# The files that derive from Backend: the backends above and the decorators, which forward through the list.
set(decorators engine/backend/profiled_backend.h engine/backend/profiled_backend.cpp tests/forwarding_backend.h
               tests/recording_backend.h tests/test_placement.cpp)
set(derive_from_backend ${backends} engine/backend/profiled_backend.h tests/forwarding_backend.h
                        tests/test_placement.cpp)

set(problems "")
foreach(file IN LISTS backends defaults op_cases decorators)
  if(NOT EXISTS ${ROOT}/${file})
    string(APPEND problems "\n  ${file}: missing (the recipe names it)")
  else()
    file(READ ${ROOT}/${file} "text_${file}")
  endif()
endforeach()
file(STRINGS ${def} entries REGEX "^AMPWB_(FUSED_)?OP\\(")
set(count 0)
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^AMPWB_(FUSED_)?OP\\(([a-z0-9_]+),.*" "\\2" op "${entry}")
  math(EXPR count "${count} + 1")
  if(entry MATCHES "^AMPWB_FUSED_OP")
    if(NOT "${text_${defaults}}" MATCHES "Backend::${op}\\(")
      string(APPEND problems "\n  ${defaults}: no default composition Backend::${op}() of the fused op ${op}")
    endif()
  else()
    foreach(backend IN LISTS backends)
      if(DEFINED "text_${backend}" AND NOT "${text_${backend}}" MATCHES "void ${op}\\(")
        string(APPEND problems "\n  ${backend}: does not implement ${op}")
      endif()
    endforeach()
  endif()
  if(DEFINED "text_${op_cases}" AND NOT "${text_${op_cases}}" MATCHES "[^a-z0-9_]${op}\\(")
    string(APPEND problems "\n  ${op_cases}: no op case runs ${op}")
  endif()
endforeach()
if(count EQUAL 0)
  string(APPEND problems "\n  engine/backend/backend_ops.def: no ops found")
endif()
foreach(file IN LISTS decorators)
  if(DEFINED "text_${file}" AND NOT "${text_${file}}" MATCHES "#include \"backend/backend_ops.def\"")
    string(APPEND problems "\n  ${file}: does not forward through backend_ops.def")
  endif()
endforeach()
file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/engine/*.h ${ROOT}/engine/*.cpp ${ROOT}/tests/*.h
     ${ROOT}/tests/*.cpp ${ROOT}/app/*.cpp ${ROOT}/app/*.h ${ROOT}/ui/*.cpp ${ROOT}/ui/*.h ${ROOT}/bench/*.cpp
     ${ROOT}/fuzz/*.cpp)
foreach(file IN LISTS sources)
  if(file MATCHES "^tests/op_recipe/" OR file IN_LIST derive_from_backend)
    continue()
  endif()
  file(STRINGS ${ROOT}/${file} derived REGEX "public Backend[ \t]*{")
  if(derived)
    string(APPEND problems "\n  ${file}: derives from Backend outside the recipe (derive from a decorator that "
                           "forwards through backend_ops.def, such as tests/forwarding_backend.h)")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "op recipe: adding an op would touch more than the recipe's files:${problems}")
endif()
message(STATUS "op recipe: ${count} ops; an op touches backend_ops.def, ${backends}, ${defaults} (fused), "
               "engine/reference/, tests/op_cases.h, tests/op_tolerances.h and ${op_cases}")
