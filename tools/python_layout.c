/* python_layout.c - print one row of src/record/python_layout.h for the CPython
 * whose headers it is compiled against (see tools/python-layout.sh).
 * Offsets of the few fields python.c reads to walk a thread's Python frames
 * without the GIL. Never part of the library: it needs Python's internal
 * headers, which only the generating machine has. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030b0000
#include <internal/pycore_frame.h>
#else
#include <frameobject.h>
#endif
#include <internal/pycore_runtime.h>

int main(void)
{
    size_t tstate_frame, cframe_frame = 0, frame_code, frame_previous, frame_instruction,
                         frame_owner = 0, code_start = 0, code_first_traceable = 0,
                         code_version = 0;
#if PY_VERSION_HEX >= 0x030d0000
    tstate_frame = offsetof(PyThreadState, current_frame);
    frame_code = offsetof(_PyInterpreterFrame, f_executable);
#elif PY_VERSION_HEX >= 0x030b0000
    tstate_frame = offsetof(PyThreadState, cframe);
    cframe_frame = offsetof(_PyCFrame, current_frame);
    frame_code = offsetof(_PyInterpreterFrame, f_code);
#else
    tstate_frame = offsetof(PyThreadState, frame);
    frame_code = offsetof(PyFrameObject, f_code);
#endif
#if PY_VERSION_HEX >= 0x030d0000
    frame_instruction = offsetof(_PyInterpreterFrame, instr_ptr);
#elif PY_VERSION_HEX >= 0x030b0000
    frame_instruction = offsetof(_PyInterpreterFrame, prev_instr);
#else
    frame_instruction = offsetof(PyFrameObject, f_lasti);
#endif
#if PY_VERSION_HEX >= 0x030b0000
    frame_previous = offsetof(_PyInterpreterFrame, previous);
    frame_owner = offsetof(_PyInterpreterFrame, owner);
    code_start = offsetof(PyCodeObject, co_code_adaptive);
    code_first_traceable = offsetof(PyCodeObject, _co_firsttraceable);
    size_t code_name = offsetof(PyCodeObject, co_qualname);
#else
    frame_previous = offsetof(PyFrameObject, f_back);
    size_t code_name = offsetof(PyCodeObject, co_name);
#endif
#if PY_VERSION_HEX >= 0x030c0000
    code_version = offsetof(PyCodeObject, co_version); /* a new one at each code object made */
#endif
    /* Where each thread's state is kept for PyGILState_GetThisThreadState. */
#if PY_VERSION_HEX >= 0x030c0000
    size_t runtime_tss = offsetof(_PyRuntimeState, autoTSSkey);
#else
    size_t runtime_tss = offsetof(_PyRuntimeState, gilstate.autoTSSkey);
#endif
    /* From 3.14 f_executable is a _PyStackRef, whose low two bits are flags. */
    int code_tag_bits = PY_VERSION_HEX >= 0x030e0000 ? 3 : 0;
    printf(
        "    {%d, %d, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, "
        "%d, %zu, %zu},\n",
        PY_MAJOR_VERSION, PY_MINOR_VERSION, tstate_frame, cframe_frame, frame_code, frame_previous,
        frame_instruction, frame_owner, offsetof(PyCodeObject, co_filename), code_name,
        offsetof(PyCodeObject, co_firstlineno), code_start, code_first_traceable, code_version,
        sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject),
        offsetof(PyCompactUnicodeObject, utf8), offsetof(PyASCIIObject, state),
        offsetof(PyASCIIObject, length), code_tag_bits, runtime_tss,
        offsetof(_PyRuntimeState, initialized));
    return 0;
}
