/* holders_live.h - who holds the arrays, walked when `cumemtrace live`
 * asks (holders_live.c): the live view's requests, numbered, and the
 * answer to the latest, its top paths in fixed-size lines. */
#ifndef CUMEMTRACE_HOLDERS_LIVE_H
#define CUMEMTRACE_HOLDERS_LIVE_H

#include <stdint.h>

#define HOLDERS_LIVE_LINES 8 /* paths answered, most bytes first */

/* One path from Python's roots and the arrays' memory it reaches first. */
struct holders_live_line {
    char path[160];           /* "__main__.model.outs[*]", cut if longer */
    char container[32];       /* what holds the arrays: "list" */
    uint64_t bytes, storages; /* the memory: storages (views counted once) */
    uint64_t tensors;         /* the array objects on them */
    uint64_t largest;         /* the address of its largest storage: inside its block */
};

/* The requests and the answer to the latest walked. */
struct holders_live {
    uint64_t asked;    /* the latest request's number; 0: none yet */
    uint64_t answered; /* the number the answer below is for; 0: none yet */
    uint64_t walks;    /* walks made for the live view */
    uint32_t due_ms;   /* tracker time at which a pending request may be walked */
    const char *why;   /* NULL: walked; else why not (static text) */
    uint64_t objects;  /* objects the walk visited */
    uint32_t ms;       /* how long it took */
    char cut[48];      /* "": complete; else where it stopped ("after 1 s") */
    uint32_t count;    /* lines */
    uint64_t paths;    /* paths the walk found, shown or not */
    struct holders_live_line lines[HOLDERS_LIVE_LINES];
};

/* Any thread, no lock held: a request for a walk. Its number, the one a
 * pending request already has (requests coalesce: one walk answers them
 * all). The caller wakes the reader (torch_stats_request). */
uint64_t holders_live_ask(void);
/* Any thread: the requests and the latest answer, copied. */
void holders_live_copy(struct holders_live *out);
/* Milliseconds until a pending request may be walked (0: now); -1 when
 * none is pending. For the reader's sleep. */
int holders_live_due_in(void);
/* With the GIL, on the reader thread: the pending request walked and
 * answered, if it is due; else nothing. */
void holders_live_answer(void);
void holders_live_reset(void); /* after fork: no request, no answer */

#endif
