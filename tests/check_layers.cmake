# check_layers.cmake - no source includes a header of a folder above its own.
#
#   cmake -DSOURCE=<repository> -P tests/check_layers.cmake
#
# src/record sees nothing above it; src/report sees record; src/cli sees
# report and record; preload/ sees them all, and is the only one to see
# CUDA's headers. The build gives each folder only the include directories
# it may see, so a wrong include fails to compile; this check names the line.
set(above_record src/report src/cli preload)
set(above_report src/cli preload)
set(above_cli preload)
set(failures "")
foreach(layer record report cli)
  file(GLOB files ${SOURCE}/src/${layer}/*.c ${SOURCE}/src/${layer}/*.h)
  foreach(file ${files})
    file(RELATIVE_PATH name ${SOURCE} ${file})
    file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      if(line MATCHES "<cuda")
        list(APPEND failures "${name}: ${line}: only preload/ sees CUDA's headers")
      endif()
      if(line MATCHES "\"([^\"]+)\"")
        foreach(folder ${above_${layer}})
          if(EXISTS ${SOURCE}/${folder}/${CMAKE_MATCH_1})
            list(APPEND failures "${name}: ${line}: ${folder}/ is above src/${layer}/")
          endif()
        endforeach()
      endif()
    endforeach()
  endforeach()
endforeach()
if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "includes against the layers:\n${text}")
endif()
