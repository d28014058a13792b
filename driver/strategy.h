/*
 * strategy.h — the typed strategy lives in the public header dpc/plan.h; driver code includes
 * this name for it.
 */
#ifndef DPC_DRIVER_STRATEGY_H
#define DPC_DRIVER_STRATEGY_H

#include "ir/base.h"
#include <dpc/plan.h>

#endif
