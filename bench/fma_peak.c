/* The machine's fp32 FMA peak: every OpenMP thread runs 12 independent AVX-512 FMA
 * chains (enough to cover the FMA latency on two pipes), and the FLOP rate of all
 * threads together is printed. The ceiling the tuned kernels are compared with in
 * BENCHMARKS.md:
 *
 *   gcc -O2 -march=native -fopenmp bench/fma_peak.c -o /tmp/fma_peak
 *   OMP_NUM_THREADS=1 /tmp/fma_peak; OMP_NUM_THREADS=2 /tmp/fma_peak
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

#define CHAINS 12

int main(void) {
  const long iters = 50000000;
  double flop = 0.0;
  float sink = 0.0f;
  double t0 = omp_get_wtime();
#pragma omp parallel reduction(+ : flop, sink)
  {
    __m512 acc[CHAINS];
    const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
      for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
    }
    for (int i = 0; i < CHAINS; i++) sink += _mm512_reduce_add_ps(acc[i]);
    flop = (double)iters * CHAINS * 16 * 2;
  }
  double t = omp_get_wtime() - t0;
  printf("%d threads: %.1f GFLOPS (checksum %g)\n", omp_get_max_threads(), flop / t / 1e9,
         (double)sink);
  return 0;
}
