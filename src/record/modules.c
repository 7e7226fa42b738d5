/* modules.c - the address range of a loaded object (see modules.h). Used to
 * leave the tracer's own frames out of stacks, and to find where the Python
 * interpreter's frames begin. */
#include <link.h>

#include "modules.h"

struct range {
    uintptr_t inside, low, high;
};

static int find_range(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct range *r = data;
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < low)
            low = start;
        if (start + ph->p_memsz > high)
            high = start + ph->p_memsz;
    }
    if (r->inside < low || r->inside >= high)
        return 0;
    r->low = low;
    r->high = high;
    return 1;
}

int module_range(const void *inside, uintptr_t *low, uintptr_t *high)
{
    struct range r = {(uintptr_t)inside, 0, 0};
    if (!dl_iterate_phdr(find_range, &r))
        return -1;
    *low = r.low;
    *high = r.high;
    return 0;
}
