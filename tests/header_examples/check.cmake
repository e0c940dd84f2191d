# Passes when every generated file of header examples (SOURCES, comma-separated;
# one per header directory) exists and was compiled into OBJECTS after it was
# last generated: the build compiles them and a stale example fails the build
# itself; a file that was not compiled fails here.
string(REPLACE "," ";" _files "${SOURCES}")
list(LENGTH _files _n)
if(_n EQUAL 0)
  message(FATAL_ERROR "no header examples to check")
endif()
foreach(_f ${_files})
  get_filename_component(_name ${_f} NAME)
  set(_o ${OBJECTS}/${_name}.o)
  if(NOT EXISTS ${_f} OR NOT EXISTS ${_o} OR ${_f} IS_NEWER_THAN ${_o})
    message(FATAL_ERROR "${_name} has not been compiled since it was generated; build the tests")
  endif()
endforeach()
message(STATUS "header examples of ${_n} directories compiled")
