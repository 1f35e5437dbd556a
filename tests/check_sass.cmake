# check_sass.cmake — the multimem kernel's machine code holds what the all-reduce through the
# switch needs: a multicast load-reduce per type (LDGMC ... ADD, half types accumulating in
# float32) and a 16-byte store back through the same address. It never runs on this project's
# GPU hosts (multicast is off there), so this is its check besides the host code's tests.
# Usage: cmake -DCUOBJDUMP=cuobjdump -DOBJECT_DIR=<gpucoll_kernels' object dir> -P check_sass.cmake
file(GLOB_RECURSE objects "${OBJECT_DIR}/multimem.cu.o")
if(NOT objects)
  message(FATAL_ERROR "no multimem.cu.o under ${OBJECT_DIR}")
endif()
list(GET objects 0 object)
execute_process(COMMAND ${CUOBJDUMP} -sass ${object} OUTPUT_VARIABLE sass RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CUOBJDUMP} -sass ${object} failed (${rc})")
endif()
foreach(form "LDGMC[.A-Z0-9]*F32ADD\\.BF16x8" "LDGMC[.A-Z0-9]*F32ADD\\.F16x8" "LDGMC[.A-Z0-9]*ADD\\.F32x4")
  if(NOT sass MATCHES "${form}")
    message(FATAL_ERROR "the multimem kernel's SASS has no ${form}")
  endif()
endforeach()
string(REGEX MATCHALL "STG\\.E\\.128[.A-Z]*SYS" stores "${sass}")
list(LENGTH stores nstores)
if(nstores LESS 3)
  message(FATAL_ERROR "the multimem kernel's SASS has ${nstores} system-scope 16-byte stores, expected one per type")
endif()
message(STATUS "multimem SASS: the three multicast load-reduce forms and ${nstores} system-scope 16-byte stores")
