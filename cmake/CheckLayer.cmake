# One engine folder as one static library that may use only the layers it names (as LLVM's LINK_COMPONENTS):
#
#   ampwb_layer(NAME SOURCES a.cpp ... DEPENDS lower layers...)
#
# makes ampwb_NAME, links it to ampwb_<each dependency>, and checks at build time that every source and header in
# engine/NAME/ includes engine headers only from NAME/ and those layers: an upward include fails the build with
# the file, the include and the allowed layers (the script below, also run by the test layering.refuses_upward).
set(AMPWB_CHECK_LAYER_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/CheckLayerIncludes.cmake)

function(ampwb_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPENDS" ${ARGN})
  add_library(ampwb_${name} STATIC ${L_SOURCES})
  target_include_directories(ampwb_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  foreach(dep IN LISTS L_DEPENDS)
    target_link_libraries(ampwb_${name} PUBLIC ampwb_${dep})
  endforeach()

  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cu ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cuh)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/layering/${name}.checked)
  string(REPLACE ";" "," allowed "${L_DEPENDS}")
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DLAYER=${name} -DALLOWED=${allowed} -DROOT=${CMAKE_CURRENT_SOURCE_DIR}
            -P ${AMPWB_CHECK_LAYER_SCRIPT}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${files} ${AMPWB_CHECK_LAYER_SCRIPT}
    COMMENT "Checking the includes of engine/${name} against its layers (${allowed})"
    VERBATIM)
  add_custom_target(ampwb_${name}_layering DEPENDS ${stamp})
  add_dependencies(ampwb_${name} ampwb_${name}_layering)
endfunction()
