/* kinds.c - the table of kinds of tracked blocks (see kinds.h). */
#include "kinds.h"

static const struct {
    const char *name;
    int space;
    int uses_device_memory;
    int freed_by_context;
} kinds[KIND_COUNT] = {
    [KIND_DEVICE] = {"device", SPACE_MEMORY, 1, 1},
    [KIND_MANAGED] = {"managed", SPACE_MEMORY, 0, 1},
    [KIND_PINNED_HOST] = {"pinned_host", SPACE_MEMORY, 0, 1},
    [KIND_REGISTERED_HOST] = {"registered_host", SPACE_REGISTERED, 0, 1},
    [KIND_STREAM_ORDERED] = {"stream_ordered", SPACE_MEMORY, 1, 0},
    [KIND_VMM_PHYSICAL] = {"vmm_physical", SPACE_VMM_HANDLE, 1, 0},
    [KIND_VMM_MAPPING] = {"vmm_mapping", SPACE_VMM_MAPPING, 0, 0},
    [KIND_VMM_RESERVATION] = {"vmm_reservation", SPACE_VMM_RESERVATION, 0, 0},
    [KIND_ARRAY] = {"array", SPACE_ARRAY, 1, 1},
    [KIND_TORCH_TENSOR] = {"torch_tensor", SPACE_FRAMEWORK, 0, 0},
    [KIND_CUPY_BLOCK] = {"cupy_block", SPACE_FRAMEWORK, 0, 0},
    [KIND_JAX_ARRAY] = {"jax_array", SPACE_FRAMEWORK, 0, 0},
};

const char *kind_name(int kind)
{
    return kind >= 0 && kind < KIND_COUNT ? kinds[kind].name : "unknown";
}

int kind_space(int kind)
{
    return kinds[kind].space;
}

int kind_uses_device_memory(int kind)
{
    return kinds[kind].uses_device_memory;
}

int kind_freed_by_context(int kind)
{
    return kinds[kind].freed_by_context;
}
