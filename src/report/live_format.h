/* live_format.h - what `cumemtrace live PID` reads from a traced process:
 * the socket and the document, for the server (src/runtime/live.c) and the
 * command (src/cli/cli_live.c).
 *
 * A thread of ours listens on a Linux abstract unix socket named after the
 * process, "\0cumemtrace-live-PID": no file on disk, and the name is gone
 * when the process is. It starts with every signal blocked and sleeps in
 * accept(); only a connection wakes it. A peer of another user (SO_PEERCRED)
 * is closed without a word. For one of the same user it copies, under the
 * tracker's lock, the counters and the stacks holding most and growing
 * fastest (no sample taken, nothing of the tracker's changed), writes them as
 * one JSON document (below) and closes the connection. Where a framework's
 * blocks are recorded (PyTorch's tensors), the stacks of its cache's segments
 * are left out, as in every report: they hold the same memory as the
 * blocks; what they hold is the cache's reserved_bytes. Symbolizing is the
 * client's work, from /proc/PID/maps: the process only names its Python
 * frames, which only it knows.
 *
 *   {"format":"cumemtrace-live","version":1,"pid":N,"time_ms":N,
 *    "argv":[...],"growth":{"mode":"time"|"marks","samples":N},
 *    "program_end":{"time_ms":N}|null,
 *    "devices":[{"device":N|null,"kinds":{"device":[current,peak],...},
 *                "all":[current,peak]}],
 *    "caches":[{"kind":"torch_tensor","view":"blocks"|"segments"|"unseen",
 *               "why":"...","reserved_bytes":N}],
 *    "stacks":[{"id":N,"live_bytes":N,"live_blocks":N,"peak_live_bytes":N,
 *               "allocations":N,"kind":"device"|null,"api":"cudaMalloc"|null,
 *               "end_bytes":N|null,"end_blocks":N|null,
 *               "growing":true|false,"rate":N,
 *               "frames":["0x7f..." | {"function":..,"file":..,"line":N}]}],
 *    "top":[stack ids, most live bytes first],
 *    "growing":[stack ids, fastest first]}
 *
 * Once a Python program has ended (its exit hooks ran: program_end), its
 * interpreter's teardown frees what module globals held, so "top" and
 * "growing" rank the stacks by what they held at that end (end_bytes,
 * end_blocks), as every report of the program does; devices and caches are
 * as they are now. */
#ifndef CUMEMTRACE_LIVE_FORMAT_H
#define CUMEMTRACE_LIVE_FORMAT_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define LIVE_FORMAT_VERSION 1
#define LIVE_TOP 20     /* stacks sent by live bytes */
#define LIVE_GROWING 10 /* and by growth rate */

/* The abstract socket "\0cumemtrace-live-PID" into `address`; its length,
 * for bind and connect. */
static inline socklen_t live_socket_address(int pid, struct sockaddr_un *address)
{
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    int name = 1 + snprintf(address->sun_path + 1, sizeof(address->sun_path) - 1,
                            "cumemtrace-live-%d", pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + name);
}

#endif
