/* live_format.h - what `cumemtrace live PID` reads from a traced process:
 * the socket and the document, for the server (src/runtime/live.c) and the
 * command (src/cli/cli_live.c).
 *
 * A thread of ours listens on a Linux abstract unix socket named after the
 * process, "\0cumemtrace-live-PID": no file on disk, and the name is gone
 * when the process is. It starts with every signal blocked and sleeps in
 * accept(); only a connection wakes it. A peer of another user (SO_PEERCRED)
 * is closed without a word. One of the same user may ask first: what it
 * sends until it shuts its side of the connection (the command sends
 * nothing or LIVE_ASK_HOLDERS, then shuts it), LIVE_REQUEST_BYTES at most
 * and for LIVE_REQUEST_MS at most; anything but LIVE_ASK_HOLDERS asks for
 * the view alone. Then it copies, under the
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
 *    "cwd":"the directory the program started in (its Python files' relative
 *           names are from there)",
 *    "program_end":{"time_ms":N}|null,
 *    "devices":[{"device":N|null,"kinds":{"device":[current,peak],...},
 *                "all":[current,peak]}],
 *    "caches":[{"kind":"torch_tensor","view":"blocks"|"segments"|"unseen",
 *               "why":"...","reserved_bytes":N}],
 *    "stacks":[{"id":N,"live_bytes":N,"live_blocks":N,"peak_live_bytes":N,
 *               "allocations":N,"kind":"device"|null,"api":"cudaMalloc"|null,
 *               "end_bytes":N|null,"end_blocks":N|null,
 *               "growing":true|false,"rate":N,"calls":N,"rate_per_call":N,
 *               "frames":["0x7f..." | {"function":..,"file":..,"line":N}]}],
 *    "top":[stack ids, most live bytes first],
 *    "growing":[stack ids, fastest first],
 *    "holders":{"setting":true|false,"python":"running"|"ended"|"none",
 *               "mine":N|null,"asked":N,"answered":N,"walks":N,
 *               "why":null|"...","objects":N,"ms":N,"cut_short":null|"after 1 s",
 *               "path_count":N,
 *               "paths":[{"path":"__main__.model.outs[*]","container":"list",
 *                         "bytes":N,"storages":N,"tensors":N,
 *                         "kind":"torch_tensor"|null,"stack":N|null}]}}
 *
 * A growing stack's "rate" is per second, or per mark once the program
 * marks; "rate_per_call" is per call of its site, over its "calls" (growth.h;
 * 0 at marks, and for a stack not growing).
 *
 * "holders" answers the question who holds the memory, which only Python
 * can: a peer that sends LIVE_ASK_HOLDERS asks the process to walk from
 * Python's roots to the frameworks' arrays (src/frameworks/holders_live.c)
 * and gets the request's number ("mine"). The walk is made later, by the
 * thread that takes the GIL for the periodic readings, never in this
 * answer: "answered" says which request the paths answer (a later
 * document carries them), "why" why that walk named none. Requests made
 * while one is pending share its number; walks are spaced (at most one a
 * second, and 1/21 of the program's time). "setting" false:
 * CUMEMTRACE_HOLDERS=0, nothing is walked; "python" none: no Python in the
 * process, nothing to walk. Each path's "stack" is the stack that
 * allocated its largest block, when the tracer recorded that block. The
 * key came after version 1's first documents: a document without it is
 * from a process that cannot be asked.
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
#define LIVE_TOP 20                  /* stacks sent by live bytes */
#define LIVE_GROWING 10              /* and by growth rate */
#define LIVE_ASK_HOLDERS "holders\n" /* a peer's request: who holds the arrays */
#define LIVE_REQUEST_BYTES 64        /* read of a request, at most */
#define LIVE_REQUEST_MS 200          /* waited for one, at most */

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
