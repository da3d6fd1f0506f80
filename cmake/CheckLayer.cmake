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

# The front ends (ui/, app/) see the engine from the top: the facade (facade/: devices, capabilities, run setup)
# and the runs (train/: the trainer and its events; store/: stored runs; analysis/: what they say; export/: the
# model written out), with data/ for inspecting a dataset folder, dist/ for the processes of one run and core/ for
# errors and files. backend/, nn/, optim/, models/, amp/ and reference/ are the facade's business.
set(AMPWB_FRONT_END_LAYERS facade analysis store export train data dist core)

#   ampwb_front_end(TARGET)
#
# checks at build time, before TARGET builds, that every source and header in the calling folder (ui/ or app/)
# includes engine headers only from AMPWB_FRONT_END_LAYERS; the tests layering.ui_refuses_backend_include and
# layering.app_refuses_backend_include run the same script over a fixture.
function(ampwb_front_end target)
  get_filename_component(name ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/layering/${name}.checked)
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CheckLayerIncludes.cmake)
  string(REPLACE ";" "," allowed "${AMPWB_FRONT_END_LAYERS}")
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DLAYER=${name} -DALLOWED=${allowed} -DROOT=${PROJECT_SOURCE_DIR}/engine
            -DFOLDER=${CMAKE_CURRENT_SOURCE_DIR} -P ${script}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${files} ${script}
    COMMENT "Checking the includes of ${name}/ against the front ends' layers (${allowed})"
    VERBATIM)
  add_custom_target(${target}_layering DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layering)
endfunction()
