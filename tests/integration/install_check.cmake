# cmake -DBUILD=<build dir> -DDEST=<empty dir> -P install_check.cmake
# Runs the install target into DEST (as DESTDIR, prefix /usr) and checks every file lands where an
# operator expects it, and that the installed unit starts the ternd installed beside it. Then the
# same for another prefix (/opt/tern): the unit's paths follow the prefix given to cmake --install,
# not the one the build was configured with.
file(REMOVE_RECURSE "${DEST}")
set(ENV{DESTDIR} "${DEST}")

function(install_to prefix)
  execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${prefix}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake --install --prefix ${prefix} failed (${rc}):\n${out}")
  endif()
  set(install_out "${out}" PARENT_SCOPE)
endfunction()

# The unit under prefix: ExecStartPre and ExecStart run the installed ternd (it exists in DEST)
# with config, and nothing is left of the template's @VARIABLES@.
function(check_unit prefix ternd config)
  set(unit "${DEST}${prefix}/lib/systemd/system/ternd.service")
  if(NOT EXISTS "${unit}")
    message(FATAL_ERROR "not installed: ${prefix}/lib/systemd/system/ternd.service")
  endif()
  file(READ "${unit}" text)
  if(text MATCHES "@[A-Za-z_]+@")
    message(FATAL_ERROR "${unit}: unconfigured ${CMAKE_MATCH_0}")
  endif()
  foreach(key ExecStartPre ExecStart)
    if(NOT text MATCHES "\n${key}=([^ \n]+)([^\n]*)")
      message(FATAL_ERROR "${unit}: no ${key}= line")
    endif()
    set(bin "${CMAKE_MATCH_1}")
    set(args "${CMAKE_MATCH_2}")
    if(NOT bin STREQUAL ternd)
      message(FATAL_ERROR "${unit}: ${key} runs ${bin}, want the installed ${ternd}")
    endif()
    if(NOT EXISTS "${DEST}${bin}")
      message(FATAL_ERROR "${unit}: ${key} runs ${bin}, which the install did not put there")
    endif()
    if(NOT args MATCHES " -c ${config}$")
      message(FATAL_ERROR "${unit}: ${key} arguments '${args}', want -c ${config}")
    endif()
  endforeach()
endfunction()

install_to(/usr)
set(out "${install_out}")
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
check_unit(/usr /usr/sbin/ternd /etc/tern/ternd.yaml)

# GNUInstallDirs puts the configuration of an /opt prefix under /etc/opt.
install_to(/opt/tern)
check_unit(/opt/tern /opt/tern/sbin/ternd /etc/opt/tern/tern/ternd.yaml)
file(REMOVE_RECURSE "${DEST}")
message(STATUS "install layout ok")
