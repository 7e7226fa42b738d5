/* api.c - the public cumemtrace_* functions (include/cumemtrace.h). */
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "collect.h"
#include "config.h"
#include "cumemtrace.h"
#include "run_events.h"
#include "torch_stats.h"
#include "tracker.h"

#define PUBLIC __attribute__((visibility("default")))

PUBLIC const char *cumemtrace_version(void)
{
    return CUMEMTRACE_VERSION;
}

PUBLIC int cumemtrace_snapshot(const char *path)
{
    static int snapshots;
    char template_[REPORT_TEMPLATE_MAX];
    tracker_init();
    if (path) {
        if (strlen(path) >= sizeof(template_))
            return -1;
        strcpy(template_, path);
    } else {
        report_template(template_, "snapshot", __atomic_add_fetch(&snapshots, 1, __ATOMIC_RELAXED));
    }
    if (tracker.traced)
        torch_stats_refresh(250); /* before entering: the reading is Python's, not ours */
    int entered = tracker_enter();
    int result = report_write_to("snapshot", template_, 0);
    if (entered)
        tracker_leave();
    return result;
}

/* The JSON report of now into `fd`, with whatever framework reading the
 * caller made for it. */
static int write_json(int fd)
{
    int entered = tracker_enter();
    int result = -1;
    struct report *r = report_new("snapshot");
    struct out *out = r ? pages_alloc(sizeof(*out)) : NULL;
    if (out) {
        out_fd(out, fd);
        report_json(r, out);
        out_flush(out);
        result = out->failed ? -1 : 0;
        pages_free(out, sizeof(*out));
    }
    if (r)
        report_delete(r);
    if (entered)
        tracker_leave();
    return result;
}

PUBLIC int cumemtrace_write_json(int fd)
{
    tracker_init();
    return write_json(fd);
}

PUBLIC int cumemtrace_write_json_holders(int fd)
{
    tracker_init();
    if (tracker.traced)
        torch_stats_refresh(250); /* before entering, as a snapshot's */
    return write_json(fd);
}

PUBLIC void cumemtrace_mark(const char *label)
{
    tracker_init();
    torch_stats_before_mark();
    run_mark(label ? label : "");
}
