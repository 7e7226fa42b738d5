/* host.c - what the interposer lends the core (see host.h): zero until lent. */
#include "host.h"

struct host host;
