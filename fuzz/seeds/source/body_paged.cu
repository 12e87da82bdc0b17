// @flashprof lab=paged-prefill threads=64
int i = 0;
