# check_layers.cmake - no source includes a header of a folder it may not see.
#
#   cmake -DSOURCE=<repository> -P tests/check_layers.cmake
#
# src/record sees nothing of ours; src/report (the report model and its
# writers) and src/frameworks (the Python bridge) see record; src/runtime
# sees report, frameworks, record and include/ (the public API); src/api
# (the API-only library programs link) sees include/ alone; src/cli
# sees report and record; preload/ sees them all, and is the only one to
# see CUDA's headers. The build gives each folder only the include
# directories it may see, so a wrong include fails to compile; this check
# names the line.
cmake_minimum_required(VERSION 3.20)
set(folders src/record src/report src/frameworks src/runtime src/api src/cli preload include)
set(sees_record "")
set(sees_report src/record)
set(sees_frameworks src/record)
set(sees_runtime src/report src/frameworks src/record include)
set(sees_api include)
set(sees_cli src/report src/record)
set(failures "")
foreach(layer record report frameworks runtime api cli)
  file(GLOB files ${SOURCE}/src/${layer}/*.c ${SOURCE}/src/${layer}/*.h)
  if(NOT files)
    list(APPEND failures "src/${layer}/ has no sources: is SOURCE the repository?")
  endif()
  foreach(file ${files})
    file(RELATIVE_PATH name ${SOURCE} ${file})
    file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      if(line MATCHES "<cuda")
        list(APPEND failures "${name}: ${line}: only preload/ sees CUDA's headers")
      endif()
      if(line MATCHES "\"([^\"]+)\"")
        set(header ${CMAKE_MATCH_1})
        if(NOT EXISTS ${SOURCE}/src/${layer}/${header})
          foreach(folder ${folders})
            if(EXISTS ${SOURCE}/${folder}/${header} AND NOT folder IN_LIST sees_${layer})
              list(APPEND failures "${name}: ${line}: src/${layer}/ may not see ${folder}/")
            endif()
          endforeach()
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "includes against the layers:\n${text}")
endif()
