/* sizes.c - the bytes an allocation takes, from the arguments of its call.
 *
 * Most calls name their size; pitched allocations and arrays describe a
 * shape, and entrypoints.h turns the shape into bytes with these. */
#include "preload.h"

uint64_t pitch_bytes(int ok, const size_t *pitch, size_t width, size_t rows)
{
    return (uint64_t)(ok ? *pitch : width) * rows;
}

static unsigned format_bytes_per_element(CUarray_format format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

/* Bytes of an array (all mipmap levels): an estimate, since the driver pads
 * and tiles arrays as it likes; the driver's own figure is not queryable. */
uint64_t array_bytes(CUarray_format format, unsigned channels, size_t width, size_t height,
                     size_t depth, unsigned levels)
{
    uint64_t total = 0;
    uint64_t element = (uint64_t)format_bytes_per_element(format) * (channels ? channels : 1);
    if (levels == 0)
        levels = 1;
    for (unsigned level = 0; level < levels; level++) {
        total += element * (width ? width : 1) * (height ? height : 1) * (depth ? depth : 1);
        width = width > 1 ? width / 2 : 1;
        height = height > 1 ? height / 2 : height;
        depth = depth > 1 ? depth / 2 : depth;
    }
    return total;
}

uint64_t channel_bytes(const struct cudaChannelFormatDesc *desc)
{
    int bits = desc->x + desc->y + desc->z + desc->w;
    return bits > 0 ? (uint64_t)(bits + 7) / 8 : 1;
}
