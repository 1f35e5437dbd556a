# check_sass.cmake — the multimem kernels' machine code holds what the collectives through the
# switch need: a multicast load-reduce per type (LDGMC ... ADD, half types accumulating in
# float32) in the all-reduce and in the reduce-scatter kernels, and the all-reduce's 16-byte store
# back through the same address. They never run on this project's GPU hosts (multicast is off
# there), so this is their check besides the host code's tests.
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
# One section per kernel function: the listing cut at each "Function :" line (its semicolons,
# CMake's list separator, replaced first).
string(REPLACE ";" "," sass "${sass}")
string(REPLACE "Function : " ";Function : " sections "${sass}")
foreach(kernel multimem_allreduce_kernel multimem_reducescatter_kernel)
  set(code "")
  set(nsections 0)
  foreach(section IN LISTS sections)
    if(section MATCHES "^Function : [^\n]*${kernel}")
      math(EXPR nsections "${nsections} + 1")
      string(APPEND code "${section}")
    endif()
  endforeach()
  if(nsections LESS 3)
    message(FATAL_ERROR "the SASS has ${nsections} ${kernel} functions, expected one per type")
  endif()
  foreach(form "LDGMC[.A-Z0-9]*F32ADD\\.BF16x8" "LDGMC[.A-Z0-9]*F32ADD\\.F16x8" "LDGMC[.A-Z0-9]*ADD\\.F32x4")
    if(NOT code MATCHES "${form}")
      message(FATAL_ERROR "the SASS of ${kernel} has no ${form}")
    endif()
  endforeach()
endforeach()
string(REGEX MATCHALL "STG\\.E\\.128[.A-Z]*SYS" stores "${sass}")
list(LENGTH stores nstores)
if(nstores LESS 3)
  message(FATAL_ERROR "the multimem kernel's SASS has ${nstores} system-scope 16-byte stores, expected one per type")
endif()
message(STATUS "multimem SASS: the three multicast load-reduce forms in both kernels and ${nstores} system-scope 16-byte stores")
