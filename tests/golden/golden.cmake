# golden.cmake - the writers' output on fixed reports, held equal to files.
#
#   cmake -DCUMEMTRACE=build/cumemtrace -P tests/golden/golden.cmake
#         every report of tests/golden/reports/ checked
#   cmake -DCUMEMTRACE=build/cumemtrace -DUPDATE=ON -P tests/golden/golden.cmake
#         tests/golden/expected/ written anew: when a change means to change
#         what the writers write (say so in its commit)
#   -DNAME=leak_loop  one report only (each ctest golden_NAME is one)
#
# Each report is a JSON report a traced program wrote on the simulator, with
# its pid, host, times and paths made neutral (normalise.py). From it the
# command writes the text and JSON reports (`cumemtrace report`) and the
# three exports (`cumemtrace export`), in an empty environment: no
# CUMEMTRACE_* setting of the caller's changes them.
cmake_minimum_required(VERSION 3.20)
get_filename_component(here ${CMAKE_CURRENT_LIST_FILE} DIRECTORY)
if(NOT CUMEMTRACE)
  message(FATAL_ERROR "-DCUMEMTRACE=<the cumemtrace command> is needed")
endif()
get_filename_component(command ${CUMEMTRACE} ABSOLUTE)
# The outputs are made beside the command (its build tree, which git
# ignores), never in the directory the script is run from.
if(NOT WORK)
  get_filename_component(build ${command} DIRECTORY)
  set(WORK ${build}/golden-work)
endif()
if(NAME)
  set(names ${NAME})
else()
  file(GLOB inputs ${here}/reports/*.json)
  set(names "")
  foreach(input ${inputs})
    get_filename_component(name ${input} NAME_WE)
    list(APPEND names ${name})
  endforeach()
endif()

# What each output is called, and the command that writes it (OUT: its path).
set(outputs txt json folded perfetto.trace.json memviz.pickle)
set(run_txt report INPUT --format text -o OUT)
set(run_json report INPUT --format json -o OUT)
set(run_folded export --format folded INPUT -o OUT)
set(run_perfetto.trace.json export --format perfetto INPUT -o OUT)
set(run_memviz.pickle export --format memviz INPUT -o OUT)

set(failures "")
foreach(name ${names})
  set(input ${here}/reports/${name}.json)
  if(NOT EXISTS ${input})
    message(FATAL_ERROR "no report ${input}")
  endif()
  file(REMOVE_RECURSE ${WORK}/${name})
  file(MAKE_DIRECTORY ${WORK}/${name})
  foreach(output ${outputs})
    set(made ${WORK}/${name}/${name}.${output})
    set(expected ${here}/expected/${name}.${output})
    string(REPLACE INPUT ${input} arguments "${run_${output}}")
    string(REPLACE OUT ${made} arguments "${arguments}")
    execute_process(COMMAND env -i PATH=$ENV{PATH} ASAN_OPTIONS=$ENV{ASAN_OPTIONS}
                            UBSAN_OPTIONS=$ENV{UBSAN_OPTIONS} ${command} ${arguments}
                    RESULT_VARIABLE status ERROR_VARIABLE errors)
    if(NOT status EQUAL 0 OR NOT EXISTS ${made})
      list(APPEND failures "${name}.${output}: cumemtrace ${arguments}: status ${status}: ${errors}")
    elseif(UPDATE)
      file(COPY_FILE ${made} ${expected})
    else()
      execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${made} ${expected}
                      RESULT_VARIABLE different)
      if(different)
        execute_process(COMMAND diff -u ${expected} ${made} OUTPUT_VARIABLE diff)
        string(SUBSTRING "${diff}" 0 3000 diff)
        message(NOTICE "${diff}")
        list(APPEND failures "${name}.${output} differs from tests/golden/expected/ (the diff "
                             "above: regenerate with -DUPDATE=ON if the change is meant)")
      endif()
    endif()
  endforeach()
endforeach()
if(failures)
  list(JOIN failures "\n" text)
  message(NOTICE "${text}")
  message(FATAL_ERROR "golden files differ")
endif()
