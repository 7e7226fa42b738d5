/* framework_hooks.c - what the interposer lends the frameworks' bridge (see
 * framework_hooks.h): zero until lent. */
#include "framework_hooks.h"

struct framework_hooks framework_hooks;

void framework_hooks_lend(const struct framework_hooks *lent)
{
    framework_hooks = *lent;
}
