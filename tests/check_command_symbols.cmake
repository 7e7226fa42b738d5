# check_command_symbols.cmake - the command links none of what runs only in
# the traced process.
#
#   cmake -DNM=nm -DCOMMAND=<build>/cumemtrace -DOBJECTS="a.o|b.o|..." \
#         -DOWN="c.o|d.o|..." -P tests/check_command_symbols.cmake
#
# OBJECTS are src/runtime's and src/frameworks' objects and the recorder's
# (src/record but its plain modules: the tracker, the stack walk, the
# CPython walker, the registry): no symbol they define for other files may
# be in the command's binary (its symbol table keeps the hidden ones too).
# OWN are the command's own objects (src/cli, src/report, src/record's plain
# modules): a name one of them defines, even a static one of the same
# spelling (record's `py`, frameworks' `py`), proves nothing.
cmake_minimum_required(VERSION 3.20)

# The names `objects` define: `types` is nm's letters for them.
function(defined_names out objects types)
  string(REPLACE "|" ";" objects "${objects}")
  set(names "")
  foreach(object ${objects})
    execute_process(COMMAND ${NM} --defined-only ${object} OUTPUT_VARIABLE text
                    RESULT_VARIABLE failed)
    if(failed)
      message(FATAL_ERROR "${NM} cannot read ${object}")
    endif()
    string(REGEX MATCHALL "[0-9a-f]+ [${types}] [A-Za-z_][A-Za-z0-9_.]*" rows "${text}")
    foreach(row ${rows})
      string(REGEX REPLACE "^[0-9a-f]+ . " "" name "${row}")
      list(APPEND names ${name})
    endforeach()
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# Global definitions only: a file's static names may recur anywhere.
defined_names(defined "${OBJECTS}" "BDGRSTV")
defined_names(own "${OWN}" "A-Za-z")
list(LENGTH defined count)
if(count EQUAL 0)
  message(FATAL_ERROR "no symbols found in the objects: ${OBJECTS}")
endif()

execute_process(COMMAND ${NM} ${COMMAND} OUTPUT_VARIABLE text RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "${NM} cannot read ${COMMAND}")
endif()
string(REGEX MATCHALL "[0-9a-f]* *[A-Za-z] [A-Za-z_][A-Za-z0-9_.]*" rows "${text}")
set(linked "")
foreach(row ${rows})
  string(REGEX REPLACE "^[0-9a-f]* *. " "" name "${row}")
  list(APPEND linked ${name})
endforeach()
# The report model must be there: an empty or stripped table proves nothing.
if(NOT "report_json" IN_LIST linked)
  message(FATAL_ERROR "${COMMAND} has no symbol table to check (report_json not in it)")
endif()

set(found "")
foreach(name ${defined})
  if(name IN_LIST linked AND NOT name IN_LIST own)
    list(APPEND found ${name})
  endif()
endforeach()
if(found)
  list(JOIN found " " text)
  message(FATAL_ERROR "the command links code of src/runtime, src/frameworks or the "
                      "recorder: ${text}")
endif()
message(STATUS "${count} symbols of src/runtime, src/frameworks and the recorder, none in the "
               "command")
