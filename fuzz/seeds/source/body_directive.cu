// @flashprof rows_per_block=32 threads=128 dynamic_smem=4096 grid=kv_group
#include <math.h>
int r = blockIdx.x; out[r] = INFINITY;
