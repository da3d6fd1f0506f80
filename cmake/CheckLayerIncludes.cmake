# cmake -DLAYER=nn -DALLOWED=amp,backend,core -DROOT=<engine folder> -P CheckLayerIncludes.cmake
# Fails naming every file of ROOT/LAYER that includes an engine header ("folder/...") from a folder other than
# LAYER and ALLOWED. Headers of other libraries (<...>) and of the layer's own folder are always fine.
cmake_minimum_required(VERSION 3.25)  # IN_LIST and the other policies of the project
string(REPLACE "," ";" allowed "${ALLOWED}")
list(APPEND allowed ${LAYER})
file(GLOB engine_folders RELATIVE ${ROOT} ${ROOT}/*)
file(GLOB_RECURSE files ${ROOT}/${LAYER}/*.h ${ROOT}/${LAYER}/*.cpp ${ROOT}/${LAYER}/*.cu ${ROOT}/${LAYER}/*.cuh)
set(violations "")
foreach(file IN LISTS files)
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z_]+/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+)/.*" "\\1" folder "${line}")
    if(IS_DIRECTORY ${ROOT}/${folder} AND NOT folder IN_LIST allowed)
      file(RELATIVE_PATH shown ${ROOT} ${file})
      string(STRIP "${line}" line)
      string(APPEND violations "\n  engine/${shown}: ${line}")
    endif()
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" ", " allowed_text "${allowed}")
  message(FATAL_ERROR "layering: engine/${LAYER} may include only ${allowed_text}; these include a higher or "
                      "unrelated layer:${violations}")
endif()
