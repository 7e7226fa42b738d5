/* torch_figures.c - the names PyTorch's counters go by in reports. */
#include <string.h>

#include "torch_figures.h"

static const char *const names[TORCH_FIGURE_COUNT] = {
    [TORCH_ALLOCATED] = "allocated_bytes",
    [TORCH_ALLOCATED_PEAK] = "allocated_peak",
    [TORCH_REQUESTED] = "requested_bytes",
    [TORCH_RESERVED] = "reserved_bytes",
    [TORCH_RESERVED_PEAK] = "reserved_peak",
    [TORCH_ACTIVE] = "active_bytes",
    [TORCH_INACTIVE_SPLIT] = "inactive_split_bytes",
    [TORCH_INACTIVE_SPLIT_BLOCKS] = "inactive_split_blocks",
    [TORCH_ALLOC_RETRIES] = "num_alloc_retries",
    [TORCH_OOMS] = "num_ooms",
};

const char *torch_figure_name(int figure)
{
    return figure >= 0 && figure < TORCH_FIGURE_COUNT ? names[figure] : "unknown";
}

static const char *const read_names[TORCH_READ_KINDS] = {
    [TORCH_READ_SAMPLE] = "sample",
    [TORCH_READ_REPORT] = "report",
    [TORCH_READ_OOM] = "oom_observer",
    [TORCH_READ_EXIT] = "python_exit",
};

const char *torch_read_name(int read)
{
    return read >= 0 && read < TORCH_READ_KINDS ? read_names[read] : "sample";
}

int torch_read_of(const char *name)
{
    for (int i = 0; name && i < TORCH_READ_KINDS; i++)
        if (strcmp(name, read_names[i]) == 0)
            return i;
    return -1;
}
