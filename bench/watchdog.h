/* watchdog.h — a thread that ends gpucoll-bench when a step cannot finish: a step that runs past
 * -T's bound, or an NCCL step whose communicator reports an asynchronous error (its kernels may
 * then never return). gpucoll's own waits are bounded in the library (GC_TIMEOUT_MS); NCCL's and
 * the bench's CUDA synchronizations are not, and this is what bounds them. */
#ifndef GCB_WATCHDOG_H
#define GCB_WATCHDOG_H

#include "nccl_loader.h"

typedef struct gcb_watchdog gcb_watchdog_t;

/* Starts the thread. timeout_s > 0 bounds every armed step; nccl (may be NULL) is polled for
 * asynchronous errors while a step that uses it is armed. Returns NULL with a message in err. */
gcb_watchdog_t *gcb_watchdog_start(int rank, double timeout_s, const gcb_nccl_t *nccl, char *err,
                                   size_t errlen);

/* Polls nccl too (at most GCB_WATCHDOG_MAX_NCCL communicators in all, the one given to
 * gcb_watchdog_start included): a step that uses NCCL may run on several communicators. Returns
 * 0, or nonzero with a message in err. */
#define GCB_WATCHDOG_MAX_NCCL 3
int gcb_watchdog_watch(gcb_watchdog_t *w, const gcb_nccl_t *nccl, char *err, size_t errlen);

/* A step begins: `what` names it in the message (copied); uses_nccl turns on the polling. */
void gcb_watchdog_arm(gcb_watchdog_t *w, const char *what, int uses_nccl);

/* The step ended in time. */
void gcb_watchdog_disarm(gcb_watchdog_t *w);

/* Stops and joins the thread. NULL is a no-op. */
void gcb_watchdog_stop(gcb_watchdog_t *w);

#endif /* GCB_WATCHDOG_H */
