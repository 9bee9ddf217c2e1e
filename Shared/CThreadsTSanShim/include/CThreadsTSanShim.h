#ifndef CTHREADS_TSAN_SHIM_H
#define CTHREADS_TSAN_SHIM_H
/// Marker so Swift can import the module; the shim itself has no API.
int callpush_tsan_thrd_shim_present(void);
#endif
