# cmake -DBUILD=<build dir> -DDEST=<empty dir> -P install_check.cmake
# Runs the install target into DEST (as DESTDIR, prefix /usr) and checks every file lands where an
# operator expects it.
file(REMOVE_RECURSE "${DEST}")
set(ENV{DESTDIR} "${DEST}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix /usr
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}):\n${out}")
endif()
foreach(f usr/sbin/ternd usr/sbin/ternctl usr/lib/systemd/system/ternd.service
          usr/share/doc/tern/ternd.yaml usr/share/doc/tern/example.zone
          usr/share/doc/tern/example-geo.json
          usr/share/doc/tern/README.md usr/share/man/man8/ternd.8 usr/share/man/man8/ternctl.8)
  if(NOT EXISTS "${DEST}/${f}")
    message(FATAL_ERROR "not installed: /${f}\n${out}")
  endif()
endforeach()
execute_process(COMMAND "${DEST}/usr/sbin/ternd" --version RESULT_VARIABLE rc OUTPUT_VARIABLE v)
if(NOT rc EQUAL 0 OR NOT v MATCHES "^ternd ")
  message(FATAL_ERROR "installed ternd --version: ${rc} ${v}")
endif()
file(REMOVE_RECURSE "${DEST}")
message(STATUS "install layout ok")
