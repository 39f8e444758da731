# cmake -DSRC=<source dir> -DDEST=<scratch dir> -P serve_check.cmake
# README command 1 and then the service install, as an operator runs them: .ci/serve (with
# --check-config, so it exits instead of serving) into a fresh build directory, then
# `cmake --install` from that directory, which needs every installed program built. .ci/serve
# runs a second time to show it is idempotent (nothing to install or rebuild, same result).
file(REMOVE_RECURSE "${DEST}")
set(build "${DEST}/build")
set(prefix "${DEST}/prefix")
foreach(run first second)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env "TERN_SERVE_BUILD=${build}"
                          "${SRC}/.ci/serve" --check-config
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "configuration OK")
    message(FATAL_ERROR ".ci/serve --check-config (${run} run) failed (${rc}):\n${out}")
  endif()
endforeach()
if(out MATCHES "Linking|install-deps: installing")
  message(FATAL_ERROR ".ci/serve rebuilt or installed something on its second run:\n${out}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${build}" --prefix "${prefix}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install after .ci/serve failed (${rc}):\n${out}")
endif()
foreach(f sbin/ternd sbin/ternctl lib/systemd/system/ternd.service)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed after .ci/serve: ${f}\n${out}")
  endif()
endforeach()
file(STRINGS "${prefix}/lib/systemd/system/ternd.service" exec REGEX "^ExecStart=")
if(NOT exec MATCHES "^ExecStart=${prefix}/sbin/ternd ")
  message(FATAL_ERROR "installed unit: ${exec}, want ExecStart=${prefix}/sbin/ternd ...")
endif()
file(REMOVE_RECURSE "${DEST}")
message(STATUS ".ci/serve then cmake --install: ok")
