# embed.cmake - turn a text file into a C array, so that a page's JavaScript
# and CSS can live in readable files of their own (src/report/report_html.js, .css)
# and still be compiled into the library.
#
#   cmake -DINPUT=file -DOUTPUT=header.h -DNAME=identifier -P embed.cmake
file(READ "${INPUT}" content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," content "${content}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" content "${content}")
file(WRITE "${OUTPUT}" "/* Generated from ${INPUT} by tools/embed.cmake; do not edit. */\nstatic const char ${NAME}[] = {\n${content}0x00};\n")
