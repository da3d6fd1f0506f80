# cmake -DLAYER=nn -DALLOWED=amp,backend,core -DROOT=<engine folder> -P CheckLayerIncludes.cmake
# cmake -DLAYER=ui -DALLOWED=facade,... -DROOT=<engine folder> -DFOLDER=<ui folder> -P CheckLayerIncludes.cmake
# Fails naming every file of ROOT/LAYER (or of FOLDER, a front end such as ui/ named LAYER) that includes an engine
# header ("folder/...") from a folder other than LAYER and ALLOWED. Headers of other libraries (<...>) and of the
# layer's own folder are always fine.
cmake_minimum_required(VERSION 3.25)  # IN_LIST and the other policies of the project
string(REPLACE "," ";" allowed "${ALLOWED}")
list(APPEND allowed ${LAYER})
if(FOLDER)
  set(shown_folder ${LAYER})
else()
  set(FOLDER ${ROOT}/${LAYER})
  set(shown_folder engine/${LAYER})
endif()
file(GLOB engine_folders RELATIVE ${ROOT} ${ROOT}/*)
file(GLOB_RECURSE files ${FOLDER}/*.h ${FOLDER}/*.cpp ${FOLDER}/*.cu ${FOLDER}/*.cuh)
set(violations "")
foreach(file IN LISTS files)
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z_]+/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+)/.*" "\\1" folder "${line}")
    if(IS_DIRECTORY ${ROOT}/${folder} AND NOT folder IN_LIST allowed)
      file(RELATIVE_PATH shown ${FOLDER} ${file})
      string(STRIP "${line}" line)
      string(APPEND violations "\n  ${shown_folder}/${shown}: ${line}")
    endif()
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" ", " allowed_text "${allowed}")
  message(FATAL_ERROR "layering: ${shown_folder} may include only ${allowed_text}; these include another "
                      "layer:${violations}")
endif()
