/* torch_figures.c - the names PyTorch's counters go by in reports. */
#include "torch_figures.h"

static const char *const names[TORCH_FIGURE_COUNT] = {
    [TORCH_ALLOCATED] = "allocated_bytes",        [TORCH_ALLOCATED_PEAK] = "allocated_peak",
    [TORCH_REQUESTED] = "requested_bytes",
    [TORCH_RESERVED] = "reserved_bytes",          [TORCH_RESERVED_PEAK] = "reserved_peak",
    [TORCH_ACTIVE] = "active_bytes",              [TORCH_INACTIVE_SPLIT] = "inactive_split_bytes",
    [TORCH_INACTIVE_SPLIT_BLOCKS] = "inactive_split_blocks",
    [TORCH_ALLOC_RETRIES] = "num_alloc_retries",  [TORCH_OOMS] = "num_ooms",
};

const char *torch_figure_name(int figure)
{
    return figure >= 0 && figure < TORCH_FIGURE_COUNT ? names[figure] : "unknown";
}
